package controller

import (
	"context"

	v1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewEventRecorder returns a broadcaster and a recorder whose events carry
// component (e.g. "replicaset-controller") as their source. Nothing is sent
// until StartEventSink is called, normally at the top of Run.
func NewEventRecorder(ctx context.Context, component string) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	return b, b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}

// StartEventSink logs events at V(3) and writes them to the API server as
// core/v1 Events, as upstream controllers do. Call the returned func (from a
// defer in Run) to flush and stop.
func StartEventSink(b record.EventBroadcaster, client clientset.Interface) (stop func()) {
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.Shutdown
}
