package deployment

import (
	"math"
	"strconv"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after []time.Duration
}

func (r *recordingQueue) AddAfter(key string, d time.Duration) { r.after = append(r.after, d) }

// recordRequeues swaps the controller's queue for one that records the
// delays of AddAfter instead of waiting them.
func (f *fixture) recordRequeues() *recordingQueue {
	rec := &recordingQueue{TypedRateLimitingInterface: f.dc.queue}
	f.dc.queue = rec
	return rec
}

// Counts that change within DefaultStatusMinInterval of the last write wait
// for the interval; the completed rollout is written at once.
func TestIntermediateStatusCoalesced(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	rec := f.recordRequeues()

	if n := len(statusUpdates(f.mustSync(d))); n != 1 {
		t.Fatalf("first pass: %d status writes, want 1", n)
	}
	// Progressing turns from NewReplicaSetCreated to ReplicaSetUpdated as
	// counts change: both reasons say the rollout goes on, so it waits too.
	for _, available := range []int32{1, 3} {
		d = f.settle(func(*apps.ReplicaSet) int32 { return available })
		rec.after = nil
		if acts := f.mustSync(d); len(statusUpdates(acts)) != 0 {
			t.Fatalf("%d available: intermediate state right after a write: %s", available, describe(acts))
		}
		if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval {
			t.Fatalf("requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval)
		}
	}

	f.clock.Step(DefaultStatusMinInterval)
	acts := f.mustSync(d)
	u := statusUpdates(acts)
	if len(u) != 1 || u[0].Status.AvailableReplicas != 3 {
		t.Fatalf("after the interval: %s", describe(acts))
	}
	expectCondition(t, u[0].Status, apps.DeploymentProgressing, v1.ConditionTrue, util.ReplicaSetUpdatedReason, "")

	d = f.settle(func(*apps.ReplicaSet) int32 { return 10 })
	acts = f.mustSync(d)
	if u := statusUpdates(acts); len(u) != 1 || u[0].Status.AvailableReplicas != 10 {
		t.Fatalf("complete rollout not written at once: %s", describe(acts))
	}
}

// Condition changes other than the rollout going on are written at once:
// Available turning true with the counts, right after a write.
func TestAvailableConditionWrittenAtOnce(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	f.mustSync(d)
	d = f.settle(func(*apps.ReplicaSet) int32 { return 8 })
	acts := f.mustSync(d)
	u := statusUpdates(acts)
	if len(u) != 1 {
		t.Fatalf("minimum availability reached: %s", describe(acts))
	}
	expectCondition(t, u[0].Status, apps.DeploymentAvailable, v1.ConditionTrue, util.MinimumReplicasAvailable, "")
}

// Without the interval (upstream's behaviour) the intermediate state is
// written at once: the control for the test above.
func TestIntermediateStatusWrittenWithZeroInterval(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	f.dc.statusMinInterval = 0
	f.mustSync(d)
	d = f.settle(func(*apps.ReplicaSet) int32 { return 3 })
	if n := len(statusUpdates(f.mustSync(d))); n != 1 {
		t.Fatalf("%d status writes, want 1", n)
	}
}

// A sync from a cache still holding the version our status write replaced
// does nothing (its write would conflict); once the cache shows the write,
// syncs resume.
func TestSyncSkippedWhileCacheBehindOwnWrite(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	f.dc.statusMinInterval = 0
	f.client.PrependReactor("update", "deployments", bumpResourceVersion())
	if n := len(statusUpdates(f.mustSync(d))); n != 1 {
		t.Fatalf("first pass: %d status writes, want 1", n)
	}
	// The RS gets pods; the cache still has the Deployment as it was.
	list, _ := f.client.AppsV1().ReplicaSets("default").List(f.ctx, metav1.ListOptions{})
	for i := range list.Items {
		rs := &list.Items[i]
		rs.Status = apps.ReplicaSetStatus{Replicas: 10, FullyLabeledReplicas: 10, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1}
		f.addToCache(rs)
	}
	f.client.ClearActions()
	if err := f.dc.syncDeployment(f.ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if acts := f.client.Actions(); len(acts) != 0 {
		t.Fatalf("stale cache: made calls %s", describe(acts))
	}
	f.refreshDeployment()
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 || u[0].Status.AvailableReplicas != 2 {
		t.Fatalf("after the cache caught up: %d status writes", len(u))
	}
}

// In a namespace being deleted no ReplicaSet is created (the API server
// would refuse it); in a live namespace it is.
func TestNothingCreatedInTerminatingNamespace(t *testing.T) {
	for _, terminating := range []bool{false, true} {
		ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}}
		if terminating {
			now := metav1.Now()
			ns.DeletionTimestamp = &now
			ns.Status.Phase = v1.NamespaceTerminating
		}
		d := newDeployment(3)
		f := newFixture(t, d)
		f.dc.WithNamespaceInformer(f.factory.Core().V1().Namespaces())
		if err := f.factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns); err != nil {
			t.Fatal(err)
		}
		created := len(rsCreates(f.mustSync(d)))
		if terminating && created != 0 {
			t.Fatalf("terminating namespace: created %d ReplicaSets", created)
		}
		if !terminating && created != 1 {
			t.Fatalf("live namespace: created %d ReplicaSets, want 1", created)
		}
	}
}

// bumpResourceVersion makes the fake apiserver give each written Deployment
// a new resourceVersion, as the real one does.
func bumpResourceVersion() core.ReactionFunc {
	n := 100
	return func(a core.Action) (bool, runtime.Object, error) {
		if u, ok := a.(core.UpdateAction); ok {
			if obj, ok := u.GetObject().(*apps.Deployment); ok {
				n++
				obj.ResourceVersion = strconv.Itoa(n)
			}
		}
		return false, nil, nil
	}
}

// A sync looks only at the Deployment's own ReplicaSets and the namespace's
// orphans, not at every ReplicaSet of the namespace.
func TestClaimCandidatesOwnAndOrphansOnly(t *testing.T) {
	d := newDeployment(1)
	other := newDeployment(1)
	other.Name, other.UID = "other", "other-uid"
	own := ownedRS(d, webTemplate("a"), 1, 1, t0)
	foreign := ownedRS(other, webTemplate("b"), 1, 1, t0)
	orphan := ownedRS(d, webTemplate("c"), 1, 1, t0)
	orphan.OwnerReferences = nil
	elsewhere := ownedRS(d, webTemplate("d"), 1, 1, t0)
	elsewhere.OwnerReferences = nil
	elsewhere.Namespace = "elsewhere"
	f := newFixture(t, d, other, own, foreign, orphan, elsewhere)
	got, err := f.dc.claimCandidates(d)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, rs := range got {
		names[rs.Namespace+"/"+rs.Name] = true
	}
	want := map[string]bool{"default/" + own.Name: true, "default/" + orphan.Name: true}
	if len(names) != len(want) || !names["default/"+own.Name] || !names["default/"+orphan.Name] {
		t.Fatalf("candidates %v, want %v", names, want)
	}
}

// Every replica available again while evicted pods still terminate (their
// node is unreachable): written at once, not held for the interval.
func TestFullyAvailableWithTerminatingPodsWrittenAtOnce(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	f.mustSync(d)
	d = f.settle(func(*apps.ReplicaSet) int32 { return 10 })
	f.mustSync(d)

	// A pod evicted: 9 available, 1 terminating (written: the last write
	// is an interval old).
	f.clock.Step(DefaultStatusMinInterval)
	d = f.withTerminating(9, 1)
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 || u[0].Status.AvailableReplicas != 9 {
		t.Fatalf("eviction: status writes %v", u)
	}
	// Positive control: another intermediate change right after waits.
	f.clock.Step(10 * time.Millisecond)
	d = f.withTerminating(8, 2)
	if acts := f.mustSync(d); len(statusUpdates(acts)) != 0 {
		t.Fatalf("intermediate state right after a write: %s", describe(acts))
	}
	// The replacements are available; the evicted pods still terminate.
	f.clock.Step(10 * time.Millisecond)
	d = f.withTerminating(10, 2)
	acts := f.mustSync(d)
	u := statusUpdates(acts)
	if len(u) != 1 || u[0].Status.AvailableReplicas != 10 || ptr.Deref(u[0].Status.TerminatingReplicas, 0) != 2 {
		t.Fatalf("fully available with terminating pods not written at once: %s", describe(acts))
	}
}

// withTerminating gives the ReplicaSet available replicas and terminating
// ones, as after an eviction, and returns the Deployment.
func (f *fixture) withTerminating(available, terminating int32) *apps.Deployment {
	f.t.Helper()
	return f.settleWithTerminating(func(*apps.ReplicaSet) int32 { return available }, terminating)
}

// Each intermediate write of a rollout doubles the wait before the next,
// up to MaxStatusInterval; a write that cannot wait starts over.
func TestIntermediateIntervalDoublesPerRollout(t *testing.T) {
	d := newDeployment(20)
	f := newFixture(t, d)
	rec := f.recordRequeues()
	f.mustSync(d)
	// The first intermediate write (the rollout under way).
	f.clock.Step(DefaultStatusMinInterval)
	d = f.settle(func(*apps.ReplicaSet) int32 { return 1 })
	if n := len(statusUpdates(f.mustSync(d))); n != 1 {
		t.Fatalf("past the interval: %d status writes, want 1", n)
	}

	available := int32(1)
	// Each step: the wait the next intermediate state is held for.
	for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 60 * time.Second} {
		available++
		rec.after = nil
		n := available
		d = f.settle(func(*apps.ReplicaSet) int32 { return n })
		if acts := f.mustSync(d); len(statusUpdates(acts)) != 0 {
			t.Fatalf("available %d: written right after the last write: %s", n, describe(acts))
		}
		if len(rec.after) != 1 || rec.after[0] != want {
			t.Fatalf("available %d: requeued after %v, want [%v]", n, rec.after, want)
		}
		f.clock.Step(want)
		if u := statusUpdates(f.mustSync(d)); len(u) != 1 || u[0].Status.AvailableReplicas != n {
			t.Fatalf("available %d: not written once the hold is over: %v", n, u)
		}
	}

	// A condition change is written at once and starts the doubling over.
	f.clock.Step(time.Second)
	d = f.withTerminating(20, 0)
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 {
		t.Fatalf("complete rollout: %d status writes, want 1", len(u))
	}
	f.clock.Step(time.Second)
	d = f.withTerminating(19, 1)
	rec.after = nil
	if acts := f.mustSync(d); len(statusUpdates(acts)) != 0 {
		t.Fatalf("intermediate state right after a write: %s", describe(acts))
	}
	if len(rec.after) != 1 || rec.after[0] != DefaultStatusMinInterval-time.Second {
		t.Fatalf("after a write that could not wait: requeued after %v, want [%v]", rec.after, DefaultStatusMinInterval-time.Second)
	}
}

// The doubled interval stays under a tenth of a short progress deadline, so
// held progress cannot push a timeout far past upstream's.
func TestHoldIntervalCappedByProgressDeadline(t *testing.T) {
	dc := &Controller{statusMinInterval: DefaultStatusMinInterval}
	d := newDeployment(10)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](120)
	for n, want := range []time.Duration{5 * time.Second, 10 * time.Second, 12 * time.Second, 12 * time.Second} {
		if got := dc.holdInterval(d, n); got != want {
			t.Errorf("deadline 120 s, %d intermediate writes: %v, want %v", n, got, want)
		}
	}
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](math.MaxInt32)
	if got := dc.holdInterval(d, 10); got != MaxStatusInterval {
		t.Errorf("no deadline: %v, want %v", got, MaxStatusInterval)
	}
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](10)
	if got := dc.holdInterval(d, 3); got != DefaultStatusMinInterval {
		t.Errorf("deadline 10 s: %v, want the base %v", got, DefaultStatusMinInterval)
	}
}

// Pods going away after the rollout is complete: a change of the
// terminating count alone waits TerminatingStatusInterval, while another
// count changing waits only the usual interval, and the last terminating
// pod gone is written at once.
func TestTerminatingOnlyChangeHeld(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	rec := f.recordRequeues()
	f.mustSync(d)
	d = f.withTerminating(10, 3)
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 || ptr.Deref(u[0].Status.TerminatingReplicas, 0) != 3 {
		t.Fatalf("complete rollout with 3 terminating: status writes %v", u)
	}

	f.clock.Step(DefaultStatusMinInterval)
	d = f.withTerminating(10, 1)
	rec.after = nil
	if acts := f.mustSync(d); len(statusUpdates(acts)) != 0 {
		t.Fatalf("terminating count alone, past the usual interval: %s", describe(acts))
	}
	if want := TerminatingStatusInterval - DefaultStatusMinInterval; len(rec.after) != 1 || rec.after[0] != want {
		t.Fatalf("requeued after %v, want [%v]", rec.after, want)
	}
	// Positive control: a pod no longer available as well is written.
	d = f.withTerminating(9, 1)
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 || u[0].Status.AvailableReplicas != 9 {
		t.Fatalf("availability changed past the usual interval: status writes %v", u)
	}
	f.clock.Step(time.Second)
	d = f.withTerminating(10, 0)
	if u := statusUpdates(f.mustSync(d)); len(u) != 1 || ptr.Deref(u[0].Status.TerminatingReplicas, -1) != 0 {
		t.Fatalf("settled: status writes %v", u)
	}
}

// A sync before the cache shows the ReplicaSet the last one created does
// nothing (it would only create it again and get a 409) until the cache
// shows it or CreatedCacheWait is over.
func TestSyncWaitsForCreatedReplicaSetInCache(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	rec := f.recordRequeues()
	if acts := f.mustSync(d); len(rsCreates(acts)) != 1 {
		t.Fatalf("first pass: %s", describe(acts))
	}
	d = f.refreshDeployment()
	f.clock.Step(time.Second)
	if acts := f.mustSync(d); len(acts) != 0 {
		t.Fatalf("cache without the created ReplicaSet: %s", describe(acts))
	}
	if want := CreatedCacheWait - time.Second; len(rec.after) != 1 || rec.after[0] != want {
		t.Fatalf("requeued after %v, want [%v]", rec.after, want)
	}
	// Once the wait is over the pass runs: it tries the create again (and,
	// with the cache still behind, fails to the queue).
	f.clock.Step(CreatedCacheWait)
	if acts, _ := f.sync(d); len(rsCreates(acts)) != 1 {
		t.Fatalf("after the wait: %s, want the create tried again", describe(acts))
	}

	// The cache showing it ends a wait at once.
	var name string
	for n, rs := range f.replicaSets() {
		name = n
		f.addToCache(rs)
	}
	f.dc.noteCreated("default/web", d.UID, name, f.clock.Now())
	if acts := f.mustSync(d); len(rsCreates(acts)) != 0 {
		t.Fatalf("cache shows the ReplicaSet: %s", describe(acts))
	}
	if wait := f.dc.awaitCreated("default/web", d, nil, f.clock.Now()); wait != 0 {
		t.Fatalf("still waiting %v for a ReplicaSet the cache showed", wait)
	}
}
