package controller

import (
	"context"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewEventRecorder returns a broadcaster and a recorder whose events carry
// component (e.g. "replicaset-controller") as their source. Nothing is sent
// until StartEventSink is called, normally at the top of Run.
func NewEventRecorder(ctx context.Context, component string) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	return b, b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}

// eventNamespaces, once set, shows which namespaces are being deleted.
var eventNamespaces atomic.Pointer[corelisters.NamespaceLister]

// SetEventNamespaceLister makes every event sink started by StartEventSink
// drop new events in namespaces being deleted: the API server refuses them
// (403) anyway, and controllers' events often trail their work into a
// namespace's deletion.
func SetEventNamespaceLister(l corelisters.NamespaceLister) {
	eventNamespaces.Store(&l)
}

// StartEventSink logs events at V(3) and writes them to the API server as
// core/v1 Events, as upstream controllers do. Call the returned func (from a
// defer in Run) to flush and stop.
func StartEventSink(b record.EventBroadcaster, client clientset.Interface) (stop func()) {
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(&terminatingNamespaceFilter{EventSinkImpl: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}})
	return b.Shutdown
}

// terminatingNamespaceFilter skips creating events in namespaces being
// deleted, answering as if created (the recorder then treats them as sent).
type terminatingNamespaceFilter struct {
	*typedcorev1.EventSinkImpl
}

func (f *terminatingNamespaceFilter) Create(e *v1.Event) (*v1.Event, error) {
	if l := eventNamespaces.Load(); l != nil && NamespaceTerminating(*l, e.Namespace) {
		return e, nil
	}
	return f.EventSinkImpl.Create(e)
}
