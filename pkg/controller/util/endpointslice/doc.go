// Package util holds the pieces the EndpointSlice and Endpoints controllers
// share, mirroring what upstream keeps in the k8s.io/endpointslice/util
// staging library: which pod changes matter to which Services (pod
// projection keys), the last-change-trigger-time tracker, the slice
// generation tracker, and small pod/port helpers.
package util
