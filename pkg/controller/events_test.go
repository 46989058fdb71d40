package controller

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Events in a namespace being deleted are not sent; in a live one they are.
func TestEventSinkSkipsTerminatingNamespaces(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	idx := factory.Core().V1().Namespaces().Informer().GetIndexer()
	now := metav1.Now()
	_ = idx.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}})
	_ = idx.Add(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}})
	SetEventNamespaceLister(factory.Core().V1().Namespaces().Lister())
	t.Cleanup(func() { eventNamespaces.Store(nil) })

	sink := &terminatingNamespaceFilter{EventSinkImpl: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}}
	for _, ns := range []string{"live", "going"} {
		e := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: ns}}
		if got, err := sink.Create(e); err != nil || got == nil {
			t.Fatalf("%s: %v, %v", ns, got, err)
		}
	}
	var created []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" {
			created = append(created, a.GetNamespace())
		}
	}
	if len(created) != 1 || created[0] != "live" {
		t.Fatalf("events created in %v, want [live]", created)
	}
}
