package endpointslicemirroring

import v1 "k8s.io/api/core/v1"

// The core/v1 Endpoints API is deprecated in favour of EndpointSlices;
// reading it is the point of this controller. The aliases keep the
// deprecation notice to this one place.
type (
	endpoints       = v1.Endpoints       //nolint:staticcheck // this controller mirrors the deprecated API
	endpointSubset  = v1.EndpointSubset  //nolint:staticcheck // this controller mirrors the deprecated API
	endpointAddress = v1.EndpointAddress //nolint:staticcheck // this controller mirrors the deprecated API
	endpointPort    = v1.EndpointPort    //nolint:staticcheck // this controller mirrors the deprecated API
)
