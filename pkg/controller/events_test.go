package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clienttesting "k8s.io/client-go/testing"
)

// waitFor polls cond until it holds; the deadline only turns a hang into a
// failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func podRef(ns, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

// hookedEvents runs beforeCreate ahead of each event create, outside the
// fake clientset, which serves one call at a time.
type hookedEvents struct {
	typedcorev1.EventInterface
	beforeCreate func()
}

func (h *hookedEvents) CreateWithEventNamespaceWithContext(ctx context.Context, e *v1.Event) (*v1.Event, error) {
	h.beforeCreate()
	return h.EventInterface.CreateWithEventNamespaceWithContext(ctx, e)
}

func countCreates(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "events" {
			n++
		}
	}
	return n
}

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

	sink := newQueuedEventSink(client.CoreV1().Events(""), 1, 10, time.Millisecond)
	defer sink.stop()
	// "going" first: one writer keeps the order, so once "live" is written
	// the other has been dealt with.
	for _, ns := range []string{"going", "live"} {
		e := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: ns}}
		if got, err := sink.Create(e); err != nil || got == nil {
			t.Fatalf("%s: %v, %v", ns, got, err)
		}
	}
	waitFor(t, "the live namespace's event", func() bool { return countCreates(client) > 0 })
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

// Events about different objects are written side by side: each write here
// waits until eventWriters of them are in flight, which a sink writing one
// event at a time never reaches.
func TestEventWritesRunSideBySide(t *testing.T) {
	client := fake.NewClientset()
	var inFlight atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	events := &hookedEvents{EventInterface: client.CoreV1().Events(""), beforeCreate: func() {
		if inFlight.Add(1) == eventWriters {
			once.Do(func() { close(all) })
		}
		<-all
	}}
	b, recorder := NewEventRecorder(context.Background(), "test-controller")
	stop := startEventSink(b, events)
	defer stop()

	// One object per writer, so that no two writes queue behind each other.
	s := &queuedEventSink{queues: make([]chan *eventWrite, eventWriters)}
	taken := map[int]bool{}
	for i := 0; len(taken) < eventWriters; i++ {
		pod := podRef("ns", fmt.Sprintf("pod-%d", i))
		e := &v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if w := s.writerFor(e); !taken[w] {
			taken[w] = true
			recorder.Event(pod, v1.EventTypeNormal, "Tested", "side by side")
		}
	}
	waitFor(t, fmt.Sprintf("%d event writes in flight at once", eventWriters), func() bool { return countCreates(client) == eventWriters })
}

// A burst of 3,000 events over about three seconds, with writes of 10 ms
// each: a sink writing one at a time falls more than 2,000 events behind,
// past the broadcaster's queues, which then drop the rest; this one keeps
// up and writes every event.
func TestEventBurstIsWrittenInFull(t *testing.T) {
	const objects, perObject = 1000, 3
	client := fake.NewClientset()
	var written atomic.Int32
	events := &hookedEvents{EventInterface: client.CoreV1().Events(""), beforeCreate: func() {
		time.Sleep(10 * time.Millisecond)
		written.Add(1)
	}}
	b, recorder := NewEventRecorder(context.Background(), "test-controller")
	stop := startEventSink(b, events)
	defer stop()

	for i := range objects {
		pod := podRef("ns", fmt.Sprintf("pod-%d", i))
		for r := range perObject {
			recorder.Eventf(pod, v1.EventTypeNormal, fmt.Sprintf("Reason%d", r), "event %d of %s", r, pod.Name)
			time.Sleep(time.Millisecond)
		}
	}
	want := int32(objects * perObject)
	var last int32
	steady := 0
	// Done when every event is written, or when no write has come for a
	// while: then some were dropped.
	waitFor(t, "the burst's writes to end", func() bool {
		n := written.Load()
		if n == want {
			return true
		}
		if n == last {
			steady++
		} else {
			last, steady = n, 0
		}
		return steady > 400 // 2 s without a write
	})
	if n := written.Load(); n != want {
		t.Fatalf("%d of %d events written", n, want)
	}
}

// An event repeated is one create and then count patches; they go in that
// order, even with creates slower than patches, so the stored event ends
// with the full count.
func TestRepeatedEventIsCreatedThenCounted(t *testing.T) {
	client := fake.NewClientset()
	events := &hookedEvents{EventInterface: client.CoreV1().Events(""), beforeCreate: func() { time.Sleep(20 * time.Millisecond) }}
	b, recorder := NewEventRecorder(context.Background(), "test-controller")
	stop := startEventSink(b, events)
	defer stop()

	const repeats = 10
	pod := podRef("ns", "web-0")
	// Other objects' events around it keep the other writers busy.
	for i := range repeats {
		recorder.Event(podRef("ns", fmt.Sprintf("other-%d", i)), v1.EventTypeNormal, "Other", "elsewhere")
		recorder.Event(pod, v1.EventTypeWarning, "FailedMount", "volume not ready")
	}
	var stored *v1.Event
	waitFor(t, "the event's count to reach all repeats", func() bool {
		list, _ := client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "events"}, schema.GroupVersionKind{Version: "v1", Kind: "Event"}, "ns")
		for _, e := range list.(*v1.EventList).Items {
			if e.InvolvedObject.Name == pod.Name {
				stored = e.DeepCopy()
				return e.Count == repeats
			}
		}
		return false
	})
	var verbs []string
	for _, a := range client.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			if a.GetObject().(*v1.Event).Name == stored.Name {
				verbs = append(verbs, "create")
			}
		case clienttesting.PatchAction:
			if a.GetName() == stored.Name {
				verbs = append(verbs, "patch")
			}
		}
	}
	want := []string{"create"}
	for range repeats - 1 {
		want = append(want, "patch")
	}
	if fmt.Sprint(verbs) != fmt.Sprint(want) {
		t.Fatalf("writes of the repeated event: %v, want one create then %d patches", verbs, repeats-1)
	}
}

// A write that reached no server is retried; one the server refused is not.
func TestEventWriteRetries(t *testing.T) {
	client := fake.NewClientset()
	var unreachable, refused atomic.Int32
	client.PrependReactor("create", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.(clienttesting.CreateAction).GetObject().(*v1.Event).Name {
		case "unreachable":
			if unreachable.Add(1) < 3 {
				return true, nil, errors.New("connection refused")
			}
		case "refused":
			refused.Add(1)
			return true, nil, apierrors.NewBadRequest("no")
		}
		return false, nil, nil
	})
	sink := newQueuedEventSink(client.CoreV1().Events(""), 1, 10, time.Millisecond)
	defer sink.stop()
	for _, name := range []string{"refused", "unreachable"} {
		_, _ = sink.Create(&v1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}})
	}
	waitFor(t, "the retried event", func() bool {
		_, err := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "events"}, "ns", "unreachable")
		return err == nil
	})
	if n := unreachable.Load(); n != 3 {
		t.Errorf("unreachable server: %d tries, want 3", n)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("refused event: %d tries, want 1", n)
	}
}
