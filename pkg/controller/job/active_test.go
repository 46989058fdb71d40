package job

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// finished returns pod moved to phase at a new resourceVersion.
func finished(pod *v1.Pod, phase v1.PodPhase) *v1.Pod {
	out := pod.DeepCopy()
	out.Status.Phase = phase
	out.ResourceVersion += "1"
	return out
}

func TestActivePodsCountsRunningPodsPerJob(t *testing.T) {
	a := newActivePods()
	j := newJob("count", ptr.To[int32](3), ptr.To[int32](3), 6)
	other := newJob("other", ptr.To[int32](1), ptr.To[int32](1), 6)
	p1, p2 := newPod(j, v1.PodRunning, -1, time.Now()), newPod(j, v1.PodPending, -1, time.Now())
	done := newPod(j, v1.PodSucceeded, -1, time.Now())
	orphan := newPod(j, v1.PodRunning, -1, time.Now())
	orphan.OwnerReferences = nil
	foreign := newPod(other, v1.PodRunning, -1, time.Now())

	for _, p := range []*v1.Pod{p1, p2, done, orphan, foreign} {
		a.observe(nil, p)
	}
	if got := a.byJob[j.UID]; got != 2 {
		t.Fatalf("active pods of %s = %d, want 2 (finished and orphan pods do not count)", j.Name, got)
	}
	if left := a.observe(p1, finished(p1, v1.PodSucceeded)); left != 1 {
		t.Errorf("after the first pod succeeded: %d left, want 1", left)
	}
	terminating := p2.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.Now())
	if left := a.observe(p2, terminating); left != 0 {
		t.Errorf("after the second pod began terminating: %d left, want 0", left)
	}
	if _, ok := a.byJob[j.UID]; ok {
		t.Errorf("a Job with no active pods keeps an entry")
	}
	if left := a.observe(nil, foreign); left != 2 {
		t.Errorf("the other Job: %d active, want 2", left)
	}
	a.observe(foreign, nil)
	a.observe(podFromEvent(cache.DeletedFinalStateUnknown{Key: "default/x", Obj: foreign}), nil)
	if got := a.byJob[other.UID]; got != 0 {
		t.Errorf("the other Job after its pods were deleted: %d active, want 0", got)
	}
	// A delete of an unknown pod never drives a count below zero.
	a.observe(foreign, nil)
	if got, ok := a.byJob[other.UID]; ok {
		t.Errorf("count went to %d after deleting a pod not counted", got)
	}
}

// The pod that leaves its Job with none running syncs it at once; any
// other pod update waits for the batch period.
func TestLastRunningPodFinishingSyncsAtOnce(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	f := newFixture(t)
	j := newJob("wave", ptr.To[int32](4), ptr.To[int32](2), 6)
	f.addJob(j)
	a, b := newPod(j, v1.PodRunning, -1, f.clock.Now()), newPod(j, v1.PodRunning, -1, f.clock.Now())
	f.addPods(a, b)
	f.jm.podAdded(logger, a)
	f.jm.podAdded(logger, b)
	f.drainAfter(SyncJobBatchPeriod)

	f.jm.podUpdated(logger, a, finished(a, v1.PodSucceeded))
	if n := f.jm.queue.Len(); n != 0 {
		t.Fatalf("one of two pods finished: the Job was queued at once")
	}
	f.drainAfter(SyncJobBatchPeriod) // fails if the update queued nothing

	f.jm.podUpdated(logger, b, finished(b, v1.PodFailed))
	if n := f.jm.queue.Len(); n != 1 {
		t.Fatalf("the last running pod finished: %d keys queued at once, want 1", n)
	}
}

// While the Job's last sync still waits for pods it created to show up,
// a finished pod waits for the batch as before.
func TestLastRunningPodFinishingWaitsForPendingCreations(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	f := newFixture(t)
	j := newJob("pending", ptr.To[int32](4), ptr.To[int32](2), 6)
	f.addJob(j)
	a := newPod(j, v1.PodRunning, -1, f.clock.Now())
	f.addPods(a)
	f.jm.podAdded(logger, a)
	f.drainAfter(SyncJobBatchPeriod)
	if err := f.jm.expectations.ExpectCreations(logger, j.Namespace+"/"+j.Name, 1); err != nil {
		t.Fatal(err)
	}

	f.jm.podUpdated(logger, a, finished(a, v1.PodSucceeded))
	if n := f.jm.queue.Len(); n != 0 {
		t.Fatalf("a creation is still expected: the Job was queued at once")
	}
	f.drainAfter(SyncJobBatchPeriod)
}

// drainAfter moves the fake clock by d, waits for the Job's key and takes
// it off the queue.
func (f *fixture) drainAfter(d time.Duration) {
	f.t.Helper()
	f.clock.Step(d)
	if err := waitFor(func() bool { return f.jm.queue.Len() > 0 }); err != nil {
		f.t.Fatalf("nothing queued %v after the pod event", d)
	}
	key, _ := f.jm.queue.Get()
	f.jm.queue.Done(key)
}
