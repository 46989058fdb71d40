// Package util holds the pieces the EndpointSlice and Endpoints controllers
// share that k8s.io/endpointslice/util does not export: the endpoint set
// keyed by endpoint identity, port lookup, hashing and the metric
// constructors. Pod projection keys, the trigger-time tracker and the pod
// helpers come from k8s.io/endpointslice/util itself.
package util
