package disruption

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// drain returns the keys waiting in q.
func drain(q workqueue.TypedRateLimitingInterface[string]) []string {
	return testutil.Drain[string](q)
}

func expectKeys(t *testing.T, q workqueue.TypedRateLimitingInterface[string], want ...string) {
	t.Helper()
	got := drain(q)
	if len(got) != len(want) {
		t.Fatalf("queued %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("queued %q, want %q", got, want)
		}
	}
}

// Every PDB event, a tombstone included, queues the budget.
func TestPDBEventsEnqueue(t *testing.T) {
	f := newFixture(t)
	log := klog.Background()
	pdb := minAvailablePDB("pdb", intstr.FromInt32(1))
	f.dc.addPDB(log, pdb)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.updatePDB(log, pdb)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.deletePDB(log, pdb)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.deletePDB(log, cache.DeletedFinalStateUnknown{Key: "default/pdb", Obj: pdb})
	expectKeys(t, f.dc.queue, "default/pdb")
}

// Pod events queue the budget selecting the pod, and nothing else.
func TestPodEventsEnqueueTheirBudget(t *testing.T) {
	f := newFixture(t)
	log := klog.Background()
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)))
	p := readyPod("p")
	stranger := readyPod("stranger")
	stranger.Labels = map[string]string{"app": "db"}

	f.dc.addPod(log, p)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.updatePod(log, p)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.deletePod(log, p)
	expectKeys(t, f.dc.queue, "default/pdb")
	f.dc.deletePod(log, cache.DeletedFinalStateUnknown{Key: "default/p", Obj: p})
	expectKeys(t, f.dc.queue, "default/pdb")

	f.dc.addPod(log, stranger)
	f.dc.updatePod(log, stranger)
	f.dc.deletePod(log, stranger)
	expectKeys(t, f.dc.queue)
	if evs := f.events(); len(evs) != 0 {
		t.Fatalf("unexpected events %q", evs)
	}
}

// A pod selected by several budgets wakes one of them and gets a warning
// naming it.
func TestPodWithSeveralBudgets(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("a", intstr.FromInt32(1)), minAvailablePDB("b", intstr.FromInt32(1)))
	f.dc.addPod(klog.Background(), readyPod("p"))
	keys := drain(f.dc.queue)
	if len(keys) != 1 {
		t.Fatalf("queued %q, want one budget", keys)
	}
	chosen := strings.TrimPrefix(keys[0], "default/")
	f.expectEvent(`Warning MultiplePodDisruptionBudgets Pod "default"/"p" matches multiple PodDisruptionBudgets.  Chose "` + chosen + `" arbitrarily.`)
}

// A pod with a True DisruptionTarget condition is queued for the stale
// check when the condition would become stale.
func TestPodWithDisruptionTargetQueuedForStaleCheck(t *testing.T) {
	f := newFixture(t)
	f.dc.updatePod(klog.Background(), podWithDisruptionTarget(f, 0))
	f.dc.addPod(klog.Background(), readyPod("plain"))
	f.clock.Step(stalePodDisruptionTimeout - time.Second)
	if f.dc.stalePodDisruptionQueue.Len() != 0 {
		t.Fatal("queued before the timeout")
	}
	f.clock.Step(time.Second)
	testutil.WaitFor(t, "the stale check to be queued", func() bool { return f.dc.stalePodDisruptionQueue.Len() == 1 })
	expectKeys(t, f.dc.stalePodDisruptionQueue, "default/victim")
}

// The recheck mover hands due keys to the sync queue, rate limited.
func TestRecheckMovesKeyToSyncQueue(t *testing.T) {
	f := newFixture(t)
	f.dc.recheckQueue.Add("default/pdb")
	if !f.dc.processNextRecheckItem() {
		t.Fatal("recheck queue shut down")
	}
	if f.dc.queue.NumRequeues("default/pdb") != 1 {
		t.Fatal("key was not added rate limited")
	}
	// The first rate-limited add waits the base backoff of 5ms.
	f.clock.Step(5 * time.Millisecond)
	testutil.WaitFor(t, "the key in the sync queue", func() bool { return f.dc.queue.Len() == 1 })
	expectKeys(t, f.dc.queue, "default/pdb")

	f.dc.recheckQueue.ShutDown()
	if f.dc.processNextRecheckItem() {
		t.Fatal("mover kept going after shutdown")
	}
}
