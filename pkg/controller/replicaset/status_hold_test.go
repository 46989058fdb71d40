package replicaset

import (
	"context"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// Intermediate counts written within StatusMinInterval of the previous write
// are held back and come back later; the settled state is written at once.
func TestIntermediateStatusIsCoalesced(t *testing.T) {
	rs := newRS("web", 3)
	// Scaled from 1 to 3 (a new ReplicaSet's first pods are held: see
	// TestFirstPodsWrittenWithAvailability).
	rs.Generation, rs.Status.ObservedGeneration, rs.Status.Replicas = 2, 1, 1
	rs.Status.TerminatingReplicas = ptr.To(int32(0))
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: ptr.To(true)}}
	f := newFixture(t, BurstReplicas, rs, newPod("p1", rs))
	clk := f.onFakeClock()
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec

	// First write (new generation observed): at once.
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "")
	f.statusWritten("ns/web")

	// A second pod shows up 100ms later: intermediate, held back.
	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	f.addToCache(newPod("p2", rs))
	rec.after = nil
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "held back")
	if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval-100*time.Millisecond {
		t.Fatalf("requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval-100*time.Millisecond)
	}

	// When the interval is over, the latest counts are written.
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "")
	if got := f.lastStatus().Status.Replicas; got != 2 {
		t.Fatalf("status.replicas %d, want 2", got)
	}
	f.addToCache(f.lastStatus())

	// Right after that write one pod becomes available. With no older
	// ReplicaSet still holding replicas, nothing steps on that: held.
	clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "held back")
	// An older sibling with replicas: a rollout steps on availability, so
	// the change waits only RolloutStepStatusInterval (from this sync, the
	// first to see it during the rollout), not the full interval.
	old := newRS("web-old", 2)
	old.OwnerReferences = rs.OwnerReferences
	f.addToCache(old)
	rec.after = nil
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "held for the rollout step interval")
	if want := RolloutStepStatusInterval; len(rec.after) != 1 || rec.after[0] != want {
		t.Fatalf("requeued after %v, want [%v]", rec.after, want)
	}
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(3, "availability change after the step interval")
	if got := f.lastStatus().Status.AvailableReplicas; got != 1 {
		t.Fatalf("status.availableReplicas %d, want 1", got)
	}
	f.addToCache(f.lastStatus())

	// Right after that, every pod becomes available: settled, so written
	// at once.
	clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	f.addToCache(newPod("p3", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(4, "settled state at once")
	if st := f.lastStatus().Status; st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 {
		t.Fatalf("status %+v, want 3/3/3", st)
	}
}

// With the interval at 0 (upstream's behaviour) every change is written.
func TestNoCoalescingWithZeroInterval(t *testing.T) {
	rs := newRS("web", 3)
	rs.Status.TerminatingReplicas = ptr.To(int32(0))
	f := newFixture(t, BurstReplicas, rs, newPod("p1", rs))
	f.rsc.opts.StatusMinInterval = 0
	f.mustSync("ns/web")
	f.statusWritten("ns/web")
	f.addToCache(newPod("p2", rs))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "")
}

func klogBackground() klog.Logger { return klog.Background() }

// syncCreatingHeld syncs key, which must create want pods and write no
// status, requeued for the whole step hold.
func (f *fixture) syncCreatingHeld(rec *recordingQueue, key string, want int, why string) {
	f.t.Helper()
	f.mustSync(key)
	if len(f.pc.Templates) != want {
		f.t.Fatalf("created %d pods, want %d", len(f.pc.Templates), want)
	}
	f.wantStatusWrites(0, why)
	if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval {
		f.t.Fatalf("requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval)
	}
}

// holdRunsOut: rs's first sync holds its status (written so far: written);
// StatusMinInterval later, with one pod not yet available, the generation
// and that pod are written.
func (f *fixture) holdRunsOut(clk *clocktesting.FakePassiveClock, rs *apps.ReplicaSet, written int) {
	f.t.Helper()
	key := rs.Namespace + "/" + rs.Name
	f.mustSync(key)
	f.wantStatusWrites(written, "held")
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval))
	f.addToCache(newPod(rs.Name+"-p1", rs, unscheduled))
	f.mustSync(key)
	f.wantStatusWrites(written+1, "hold over")
	if st := f.lastStatus().Status; st.ObservedGeneration != 1 || st.Replicas != 1 {
		f.t.Fatalf("status %+v, want generation 1 observed and 1 replica", st)
	}
}

// withoutStatusHolds: every status change is written at once, as upstream
// does, for tests of what the status says rather than when.
func (f *fixture) withoutStatusHolds() { f.rsc.opts.StatusMinInterval = 0 }

// onFakeClock puts the controller on a fake clock and returns it.
func (f *fixture) onFakeClock() *clocktesting.FakePassiveClock {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	f.rsc.clock = clk
	return clk
}

// mustSync syncs key and fails the test on an error.
func (f *fixture) mustSync(key string) {
	f.t.Helper()
	if err := f.sync(key); err != nil {
		f.t.Fatal(err)
	}
}

// wantStatusWrites fails the test unless want status writes were made;
// why says what the count shows.
func (f *fixture) wantStatusWrites(want int, why string) {
	f.t.Helper()
	if n := len(f.statusUpdates()); n != want {
		f.t.Fatalf("status writes %d, want %d %s", n, want, why)
	}
}

// statusWritten feeds the last status write back into the cache and
// settles key's expectations, as the watch events would.
func (f *fixture) statusWritten(key string) {
	f.addToCache(f.lastStatus())
	f.rsc.expectations.DeleteExpectations(klogBackground(), key)
}

// No pods are created and no status is written in a namespace being
// deleted; in a live one they are.
func TestNoPodsCreatedInTerminatingNamespace(t *testing.T) {
	for _, terminating := range []bool{false, true} {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}}
		if terminating {
			now := metav1.Now()
			ns.DeletionTimestamp = &now
			ns.Status.Phase = v1.NamespaceTerminating
		}
		f := newFixture(t, BurstReplicas, newRS("web", 3))
		f.withoutStatusHolds()
		f.rsc.WithNamespaceInformer(f.factory.Core().V1().Namespaces())
		if err := f.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns); err != nil {
			t.Fatal(err)
		}
		if err := f.sync("ns/web"); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 3, true: 0}[terminating]; len(f.pc.Templates) != want {
			t.Fatalf("terminating=%v: created %d pods, want %d", terminating, len(f.pc.Templates), want)
		}
		// Nor is the status written there: the pods and the owner are going.
		if want := map[bool]int{false: 1, true: 0}[terminating]; len(f.statusUpdates()) != want {
			t.Fatalf("terminating=%v: %d status writes, want %d", terminating, len(f.statusUpdates()), want)
		}
	}
}

// newRolloutStepFixture: ReplicaSet web (3 replicas wanted, generation 1 not
// yet observed, no pods) of a Deployment whose older ReplicaSet still has
// replicas, on a fake clock.
func newRolloutStepFixture(t *testing.T) (*fixture, *apps.ReplicaSet, *clocktesting.FakePassiveClock) {
	return newRolloutStepFixtureWanting(t, "")
}

// newRolloutStepFixtureWanting: as newRolloutStepFixture, web carrying
// desired as its desired-replicas annotation (none if empty).
func newRolloutStepFixtureWanting(t *testing.T, desired string) (*fixture, *apps.ReplicaSet, *clocktesting.FakePassiveClock) {
	rs := newRS("web", 3)
	if desired != "" {
		rs.Annotations = map[string]string{util.DesiredReplicasAnnotation: desired}
	}
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: ptr.To(true)}}
	old := newRS("web-old", 2)
	old.OwnerReferences = rs.OwnerReferences
	f := newFixture(t, BurstReplicas, rs, old)
	clk := f.onFakeClock()
	return f, rs, clk
}

// A new ReplicaSet with no sibling (a new Deployment's first, or one of
// its own): its first status write waits for its first pods'
// availability instead of reporting the generation with no pods, then the
// pods, then their availability; bounded by StatusMinInterval.
func TestFirstPodsWrittenWithAvailability(t *testing.T) {
	rs, slow := newRS("web", 3), newRS("slow", 2)
	f := newFixture(t, BurstReplicas, rs, slow)
	clk := f.onFakeClock()
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec

	f.syncCreatingHeld(rec, "ns/web", 3, "first pods: held for their availability")

	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	for _, name := range []string{"p1", "p2", "p3"} {
		f.addToCache(newPod(name, rs, readySince(time.Hour)))
	}
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "every replica available")
	if st := f.lastStatus().Status; st.ObservedGeneration != 1 || st.Replicas != 3 || st.AvailableReplicas != 3 {
		t.Fatalf("status %+v, want generation 1 observed, 3 replicas, 3 available", st)
	}

	// Bounded: pods that are not available within the interval don't keep
	// the generation back.
	f.holdRunsOut(clk, slow, 1)
}

// A rollout step scales a ReplicaSet up while an older sibling still has
// replicas: the observed generation and the new pod count wait for the new
// pods' availability and go out with it, in one write.
func TestRolloutScaleUpWritesOnceWithAvailability(t *testing.T) {
	f, rs, clk := newRolloutStepFixture(t)
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec

	// The step's sync creates the pods; generation 1 is not reported yet.
	f.syncCreatingHeld(rec, "ns/web", 3, "held for availability")

	// The pods show up, not ready yet: only the pod count changed, still held
	// (counted from the first hold).
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	for _, name := range []string{"p1", "p2", "p3"} {
		f.addToCache(newPod(name, rs, unscheduled))
	}
	rec.after = nil
	f.mustSync("ns/web")
	f.wantStatusWrites(0, "held for availability")
	if want := DefaultStatusMinInterval - 300*time.Millisecond; len(rec.after) != 1 || rec.after[0] != want {
		t.Fatalf("requeued after %v, want [%v]", rec.after, want)
	}

	// Two become available: held a moment longer for the rest of their
	// batch.
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	rec.after = nil
	f.mustSync("ns/web")
	f.wantStatusWrites(0, "held for the rest of the batch")
	if len(rec.after) != 1 || rec.after[0] != RolloutStepStatusInterval {
		t.Fatalf("requeued after %v, want [%v]", rec.after, RolloutStepStatusInterval)
	}

	// The third is not available when that is over: one write with all of
	// it.
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "")
	if st := f.lastStatus().Status; st.ObservedGeneration != 1 || st.Replicas != 3 || st.AvailableReplicas != 2 {
		t.Fatalf("status %+v, want generation 1 observed, 3 replicas, 2 available", st)
	}
}

// The pods of a rollout step becoming available a moment apart make one
// status write (and so one step of the Deployment), not one each.
func TestRolloutScaleUpBatchWrittenOnce(t *testing.T) {
	f, rs, clk := newRolloutStepFixture(t)
	f.mustSync("ns/web")
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.addToCache(newPod("p2", rs, unscheduled))
	f.addToCache(newPod("p3", rs, unscheduled))
	f.mustSync("ns/web")
	f.wantStatusWrites(0, "first pod of the batch available: held for the rest")

	// The rest 100ms later: every replica available, written at once.
	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	f.addToCache(newPod("p3", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "")
	if st := f.lastStatus().Status; st.ObservedGeneration != 1 || st.AvailableReplicas != 3 {
		t.Fatalf("status %+v, want generation 1 observed, 3 available", st)
	}
}

// Long after the last write, an availability change a rollout steps on
// still waits RolloutStepStatusInterval from the first sync that sees it:
// pods becoming available within it go out together.
func TestRolloutAvailabilityChangeWaitsForItsBatch(t *testing.T) {
	f, rs, clk := newRolloutStepFixture(t)
	for _, name := range []string{"p1", "p2", "p3"} {
		f.addToCache(newPod(name, rs, unscheduled))
	}
	f.mustSync("ns/web")
	f.wantStatusWrites(0, "step hold")
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "step hold over: generation and pods written")
	f.statusWritten("ns/web")

	clk.SetTime(clk.Now().Add(time.Minute))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "one of three available: held for its batch")
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval / 2))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "two of three available, within the batch interval: held")
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval / 2))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "batch interval over")
	if got := f.lastStatus().Status.AvailableReplicas; got != 2 {
		t.Fatalf("status.availableReplicas %d, want 2", got)
	}
}

// availabilityGainHeld: web's generation and pods are written (all three
// unready), then one pod becomes available long after; the write of that
// gain is held, and requeued after wantRequeue.
func availabilityGainHeld(f *fixture, rs *apps.ReplicaSet, clk *clocktesting.FakePassiveClock, wantRequeue time.Duration) {
	f.t.Helper()
	for _, name := range []string{"p1", "p2", "p3"} {
		f.addToCache(newPod(name, rs, unscheduled))
	}
	f.mustSync("ns/web")
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "step hold over: generation and pods written")
	f.statusWritten("ns/web")

	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec
	clk.SetTime(clk.Now().Add(time.Minute))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "one of three available: held")
	if len(rec.after) != 1 || rec.after[0] != wantRequeue {
		f.t.Fatalf("requeued after %v, want [%v]", rec.after, wantRequeue)
	}
}

// A ReplicaSet with every replica its Deployment wants: its availability
// gains wait StatusMinInterval from the first sync that saw them, not
// RolloutStepStatusInterval, since they no longer let the rollout create
// pods, only shrink the older ReplicaSet (one step for the last pods
// rather than one each). Every replica available still goes out at once.
func TestRolloutGainAtFullSizeWaitsForTheRest(t *testing.T) {
	f, rs, clk := newRolloutStepFixtureWanting(t, "3")
	availabilityGainHeld(f, rs, clk, DefaultStatusMinInterval)
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "two of three available at the rollout's size: still held")
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval - RolloutStepStatusInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "hold over")
	if got := f.lastStatus().Status.AvailableReplicas; got != 2 {
		t.Fatalf("status.availableReplicas %d, want 2", got)
	}
	f.statusWritten("ns/web")

	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	f.addToCache(newPod("p3", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(3, "every replica available: written at once")
}

// A rollout step scales a ReplicaSet up to its Deployment's size: the
// first of its new pods to become available is held StatusMinInterval for
// the rest, not RolloutStepStatusInterval.
func TestRolloutScaleUpToFullSizeGainWaitsForTheRest(t *testing.T) {
	f, rs, clk := newRolloutStepFixtureWanting(t, "3")
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec
	f.syncCreatingHeld(rec, "ns/web", 3, "held for availability")

	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	f.addToCache(newPod("p1", rs, readySince(time.Hour)))
	f.addToCache(newPod("p2", rs, unscheduled))
	f.addToCache(newPod("p3", rs, unscheduled))
	rec.after = nil
	f.mustSync("ns/web")
	f.wantStatusWrites(0, "first pod available at the rollout's size: held for the rest")
	if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval {
		t.Fatalf("requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval)
	}
}

// Below its Deployment's replicas (more pods to create as the older
// ReplicaSet shrinks), an availability gain waits only
// RolloutStepStatusInterval.
func TestRolloutGainBelowFullSizeWaitsForItsBatchOnly(t *testing.T) {
	f, rs, clk := newRolloutStepFixtureWanting(t, "10")
	availabilityGainHeld(f, rs, clk, RolloutStepStatusInterval)
	clk.SetTime(clk.Now().Add(RolloutStepStatusInterval))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "batch interval over")
}

// The hold is bounded: pods that take longer than StatusMinInterval to become
// available don't keep the observed generation back any longer.
func TestRolloutScaleUpHoldIsBounded(t *testing.T) {
	f, rs, clk := newRolloutStepFixture(t)
	f.holdRunsOut(clk, rs, 0)
}

// Every replica available again while an evicted pod still terminates (its
// node is unreachable): written at once, not held until the terminating
// pod is gone or the interval is over.
func TestFullyAvailableWithTerminatingPodWrittenAtOnce(t *testing.T) {
	rs := newRS("web", 3)
	rs.Status.ObservedGeneration = 1
	rs.Status.TerminatingReplicas = ptr.To(int32(0))
	f := newFixture(t, BurstReplicas, rs,
		newPod("p1", rs, readySince(time.Hour)), newPod("p2", rs, readySince(time.Hour)), newPod("p3", rs),
		newPod("evicted", rs, readySince(time.Hour), terminating))
	clk := f.onFakeClock()
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "")
	f.statusWritten("ns/web")

	// Positive control: another intermediate change right after is held.
	clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	f.addToCache(newPod("p2", rs))
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "intermediate, held")

	clk.SetTime(clk.Now().Add(10 * time.Millisecond))
	f.addToCache(newPod("p2", rs, readySince(time.Hour)))
	f.addToCache(newPod("p3", rs, readySince(time.Hour)))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "fully available at once")
	if st := f.lastStatus().Status; st.AvailableReplicas != 3 || ptr.Deref(st.TerminatingReplicas, 0) != 1 {
		t.Fatalf("status %+v, want 3 available, 1 terminating", st)
	}
}

// newScaleDownStepFixture: ReplicaSet web-old of a Deployment, its status
// written at 3 available replicas, scaled down to 1 (generation 2) by a
// rollout step while the newer ReplicaSet web has replicas; on a fake
// clock, with requeues recorded.
func newScaleDownStepFixture(t *testing.T) (*fixture, *apps.ReplicaSet, *clocktesting.FakePassiveClock, *recordingQueue) {
	old := newRS("web-old", 1)
	old.Generation = 2
	old.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: ptr.To(true)}}
	old.Status = apps.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		TerminatingReplicas: ptr.To(int32(0)), ObservedGeneration: 1}
	cur := newRS("web", 3)
	cur.OwnerReferences = old.OwnerReferences
	f := newFixture(t, BurstReplicas, old, cur,
		newPod("p1", old, readySince(time.Hour)), newPod("p2", old, readySince(2*time.Hour)), newPod("p3", old, readySince(3*time.Hour)))
	clk := f.onFakeClock()
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec
	return f, old, clk, rec
}

// A rollout step scales the old ReplicaSet down: the sync that deletes the
// pods does not write the new generation with the old counts; it goes out
// with the deletions, in one write.
func TestRolloutScaleDownWritesOnceWithDeletions(t *testing.T) {
	f, old, clk, rec := newScaleDownStepFixture(t)
	f.mustSync("ns/web-old")
	if len(f.pc.DeletePodName) != 2 {
		t.Fatalf("deleted %v, want 2 pods", f.pc.DeletePodName)
	}
	f.wantStatusWrites(0, "held until the deletions show")
	if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval {
		t.Fatalf("requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval)
	}

	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	for _, name := range f.pc.DeletePodName {
		f.addToCache(newPod(name, old, readySince(time.Hour), terminating))
	}
	f.mustSync("ns/web-old")
	f.wantStatusWrites(1, "")
	st := f.lastStatus().Status
	if st.ObservedGeneration != 2 || st.Replicas != 1 || st.AvailableReplicas != 1 || ptr.Deref(st.TerminatingReplicas, 0) != 2 {
		t.Fatalf("status %+v, want generation 2 observed, 1 replica available, 2 terminating", st)
	}
}

// The scale-down hold is bounded: deletions that take longer than
// StatusMinInterval to show don't keep the observed generation back.
func TestRolloutScaleDownHoldIsBounded(t *testing.T) {
	f, _, clk, _ := newScaleDownStepFixture(t)
	f.mustSync("ns/web-old")
	f.wantStatusWrites(0, "held")
	clk.SetTime(clk.Now().Add(DefaultStatusMinInterval))
	f.mustSync("ns/web-old")
	f.wantStatusWrites(1, "hold over")
	if st := f.lastStatus().Status; st.ObservedGeneration != 2 || st.Replicas != 3 {
		t.Fatalf("status %+v, want generation 2 observed with the 3 pods still seen", st)
	}
}

// Pods going away with nothing else changed is held for
// TerminatingStatusInterval (nothing steps on the terminating count). During
// a rollout that holds even the last of them, which settles the owner at
// its step's count: the rollout steps it down again. Outside a rollout the
// last one settles the owner and is written at once.
func TestTerminatingOnlyChangeHeld(t *testing.T) {
	for _, rollout := range []bool{true, false} {
		f, old, clk, rec := newScaleDownStepFixture(t)
		if !rollout {
			cur, err := f.factory.Apps().V1().ReplicaSets().Lister().ReplicaSets("ns").Get("web")
			if err != nil {
				t.Fatal(err)
			}
			cur = cur.DeepCopy()
			cur.Spec.Replicas = ptr.To(int32(0))
			f.addToCache(cur)
		}
		f.mustSync("ns/web-old")
		deleted := append([]string(nil), f.pc.DeletePodName...)
		for _, name := range deleted {
			f.addToCache(newPod(name, old, readySince(time.Hour), terminating))
		}
		clk.SetTime(clk.Now().Add(100 * time.Millisecond))
		f.mustSync("ns/web-old")
		// Outside a rollout the step is not held: generation first, then
		// the deletions.
		written := map[bool]int{true: 1, false: 2}[rollout]
		f.wantStatusWrites(written, "")
		f.statusWritten("ns/web-old")
		if st := f.lastStatus().Status; ptr.Deref(st.TerminatingReplicas, 0) != 2 {
			t.Fatalf("status %+v, want 2 terminating", st)
		}

		clk.SetTime(clk.Now().Add(3 * time.Second))
		f.removeFromCache(newPod(deleted[0], old))
		rec.after = nil
		f.mustSync("ns/web-old")
		f.wantStatusWrites(written, "terminating count alone, past StatusMinInterval")
		if want := TerminatingStatusInterval - 3*time.Second; len(rec.after) != 1 || rec.after[0] != want {
			t.Fatalf("requeued after %v, want [%v]", rec.after, want)
		}
		f.removeFromCache(newPod(deleted[1], old))
		f.mustSync("ns/web-old")
		if !rollout {
			f.wantStatusWrites(written+1, "outside a rollout, the last terminating pod gone settles it")
			continue
		}
		f.wantStatusWrites(written, "settled at the step's count, still held")
		clk.SetTime(clk.Now().Add(TerminatingStatusInterval - 3*time.Second))
		f.mustSync("ns/web-old")
		f.wantStatusWrites(written+1, "hold over")
		if st := f.lastStatus().Status; st.Replicas != 1 || ptr.Deref(st.TerminatingReplicas, -1) != 0 {
			t.Fatalf("status %+v, want 1 replica, none terminating", st)
		}
	}
}

// The last step's pods going away (the old ReplicaSet at 0 replicas) is the
// final state of the rollout for that ReplicaSet: written at once.
func TestLastStepPodsGoneWrittenAtOnce(t *testing.T) {
	f, old, clk, _ := newScaleDownStepFixture(t)
	old = old.DeepCopy()
	old.Spec.Replicas = ptr.To(int32(0))
	old.Status = apps.ReplicaSetStatus{TerminatingReplicas: ptr.To(int32(1)), ObservedGeneration: 2}
	f.addToCache(old)
	if _, err := f.client.AppsV1().ReplicaSets("ns").UpdateStatus(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"p1", "p2", "p3"} {
		f.removeFromCache(newPod(name, old))
	}
	f.addToCache(newPod("p1", old, terminating))
	f.rsc.noteStatusWrite("ns/web-old", clk.Now())
	f.client.ClearActions()

	clk.SetTime(clk.Now().Add(100 * time.Millisecond))
	f.removeFromCache(newPod("p1", old))
	f.mustSync("ns/web-old")
	f.wantStatusWrites(1, "settled at 0 replicas, at once")
	if st := f.lastStatus().Status; st.Replicas != 0 || ptr.Deref(st.TerminatingReplicas, -1) != 0 {
		t.Fatalf("status %+v, want no replicas, none terminating", st)
	}
}

// removeFromCache takes a pod out of the pod informer's cache, as its
// deletion's watch event would.
func (f *fixture) removeFromCache(p *v1.Pod) {
	f.t.Helper()
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Delete(p); err != nil {
		f.t.Fatal(err)
	}
}

// A loss of availability during a rollout is not held for a batch: long
// after the last write it goes out at once (the Deployment bounds its
// scale-down by the availability it sums).
func TestRolloutAvailabilityLossNotBatched(t *testing.T) {
	f, rs, clk := newRolloutStepFixture(t)
	for _, name := range []string{"p1", "p2", "p3"} {
		f.addToCache(newPod(name, rs, readySince(time.Hour)))
	}
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "every replica available: at once")
	f.statusWritten("ns/web")

	clk.SetTime(clk.Now().Add(time.Minute))
	f.addToCache(newPod("p1", rs))
	f.mustSync("ns/web")
	f.wantStatusWrites(2, "one replica no longer available: at once")
	if got := f.lastStatus().Status.AvailableReplicas; got != 2 {
		t.Fatalf("status.availableReplicas %d, want 2", got)
	}
}

// A rollout step scales a ReplicaSet up while one of its available pods
// stops being available: the loss ends the step hold and goes out at once.
func TestRolloutScaleUpWithAvailabilityLossWrittenAtOnce(t *testing.T) {
	rs := newRS("web", 5)
	rs.Generation = 2
	rs.Status = apps.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "d-uid", Controller: ptr.To(true)}}
	old := newRS("web-old", 2)
	old.OwnerReferences = rs.OwnerReferences
	f := newFixture(t, BurstReplicas, rs, old,
		newPod("p1", rs, readySince(time.Hour)), newPod("p2", rs, readySince(time.Hour)), newPod("p3", rs))
	f.onFakeClock()
	f.mustSync("ns/web")
	f.wantStatusWrites(1, "availability lost during the step: at once")
	if st := f.lastStatus().Status; st.ObservedGeneration != 2 || st.AvailableReplicas != 2 {
		t.Fatalf("status %+v, want generation 2 observed, 2 available", st)
	}
}
