package namespace

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace/deletion"
)

func TestCountdownWakesWhenLastPodGone(t *testing.T) {
	cached := map[string]int{"ns": 3}
	var woken []string
	c := &podCountdown{waiting: map[string]int{},
		count: func(ns string) int { return cached[ns] },
		wake:  func(ns string) { woken = append(woken, ns) }}
	c.watch("ns")
	for i := 0; i < 3; i++ {
		if len(woken) != 0 {
			t.Fatalf("woken with %d pods still cached", cached["ns"])
		}
		cached["ns"]--
		c.podGone("ns")
		c.podGone("other") // not waiting: ignored
	}
	if len(woken) != 1 || woken[0] != "ns" {
		t.Fatalf("woken %v, want [ns] once the last pod is gone", woken)
	}
	c.podGone("ns") // no longer waiting
	if len(woken) != 1 {
		t.Errorf("woken again after the countdown ended: %v", woken)
	}
}

// Delete events trail the cache: a pass can count fewer pods than events
// still to come. The countdown must not wake while pods remain cached.
func TestCountdownRecountsWhenEventsTrail(t *testing.T) {
	cached := map[string]int{"ns": 2}
	var woken int
	c := &podCountdown{waiting: map[string]int{},
		count: func(ns string) int { return cached[ns] },
		wake:  func(string) { woken++ }}
	// Three pods were cached; one left the cache before the count, its
	// event arrives after it.
	c.watch("ns")
	c.podGone("ns") // the trailing event
	cached["ns"]--
	c.podGone("ns") // countdown reaches zero, but one pod is still cached
	if woken != 0 {
		t.Fatalf("woken with %d pod(s) still cached", cached["ns"])
	}
	cached["ns"]--
	c.podGone("ns")
	if woken != 1 {
		t.Errorf("woken %d times after the last pod, want 1", woken)
	}
}

// Content other than pods (held by finalizers) is left to the poll: a pass
// that finds no pod must not wake the namespace, or passes would run back
// to back.
func TestCountdownWithoutPodsDoesNotWake(t *testing.T) {
	var woken int
	c := &podCountdown{waiting: map[string]int{}, count: func(string) int { return 0 }, wake: func(string) { woken++ }}
	c.watch("ns")
	c.podGone("ns")
	if woken != 0 || len(c.waiting) != 0 {
		t.Errorf("woken %d, waiting %v; want no wake and nothing waiting", woken, c.waiting)
	}
}

// TestRemainingPodsWakeNamespace: a pass that leaves pods terminating waits
// half the estimate, and the namespace is queued again as soon as the
// informer sees the last of its pods deleted.
func TestRemainingPodsWakeNamespace(t *testing.T) {
	now := metav1.Now()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now}}
	nc, q, kube, factory := newTestController(t)
	nc.WakeWhenPodsGone(factory.Core().V1().Pods())
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The fake clientset does not replay events to a watch opened late: the
	// delete below must come after the informer's watch is registered, which
	// the cache being synced does not promise.
	podWatch := make(chan struct{})
	var once sync.Once
	kube.PrependWatchReactor("pods", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w, err := kube.Tracker().Watch(a.GetResource(), a.GetNamespace())
		once.Do(func() { close(podWatch) })
		return true, w, err
	})
	if _, err := kube.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns)
	nc.deleter = &fakeDeleter{err: &deletion.ResourcesRemainingError{Estimate: 30}}

	q.Add("ns")
	if !nc.workLoop().ProcessNextWorkItem(ctx) {
		t.Fatal("queue shut down")
	}
	if got := q.after["ns"]; got != 16*time.Second {
		t.Fatalf("AddAfter %v, want 16s", got)
	}
	// recordingQueue.AddAfter also adds at once; drain that so what follows
	// can only come from the wake-up.
	key, _ := q.Get()
	q.Done(key)
	if q.Len() != 0 {
		t.Fatalf("queue holds %d keys before the pod is deleted", q.Len())
	}
	<-podWatch
	if err := kube.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Blocks until the wake-up queues the namespace (go test's timeout
	// catches a wake-up that never comes).
	if k, _ := q.Get(); k != "ns" {
		t.Errorf("woke %q, want ns", k)
	}
}
