package statefulset

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	ctrltestutil "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func TestOrderedReadyScaleUp(t *testing.T) {
	f := newFixture(t, newSet("web", 3))

	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0" {
		t.Fatalf("after first sync: pods %q, want only web-0", got)
	}
	// The claim is created before its pod.
	if ops := f.store.opsSnapshot(); len(ops) != 2 || ops[0] != "create claim datadir-web-0" || ops[1] != "create pod web-0" {
		t.Fatalf("ops %v", ops)
	}
	events := f.takeEvents()
	wantEvents := []string{
		"Normal SuccessfulCreate Create Claim datadir-web-0 Pod web-0 in StatefulSet web success",
		"Normal SuccessfulCreate Create Pod web-0 in StatefulSet web successful",
	}
	if !slices.Equal(events, wantEvents) {
		t.Errorf("events %q, want %q", events, wantEvents)
	}

	// web-0 pending, then running but not ready: nothing more happens.
	f.mustSync("web")
	f.markPhase("web-0", v1.PodRunning)
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0" {
		t.Fatalf("pods %q while web-0 is not ready", got)
	}
	f.markRunningReady("web-0")
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0,web-1" {
		t.Fatalf("pods %q once web-0 is ready", got)
	}
	f.converge("web")
	if got := f.podNames("web"); got != "web-0,web-1,web-2" {
		t.Fatalf("pods %q", got)
	}
	set := f.getSet("web")
	st := set.Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.CurrentReplicas != 3 || st.UpdatedReplicas != 3 ||
		st.ObservedGeneration != 1 || st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision || st.CollisionCount == nil || *st.CollisionCount != 0 {
		t.Errorf("status %+v", st)
	}
	for _, p := range f.pods("web") {
		if getPodRevision(p) != st.UpdateRevision {
			t.Errorf("%s at revision %s", p.Name, getPodRevision(p))
		}
	}
}

func TestStartOrdinal(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.Ordinals = &apps.StatefulSetOrdinals{Start: 3}
	f := newFixture(t, set)
	f.converge("web")
	if got := f.podNames("web"); got != "web-3,web-4" {
		t.Fatalf("pods %q", got)
	}
	if f.pod("web-3").Labels[apps.PodIndexLabel] != "3" || f.claim("datadir-web-4").Name == "" {
		t.Error("index label or claim")
	}
	// Moving the start condemns the pods outside the new range.
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Ordinals.Start = 4 })
	f.converge("web")
	if got := f.podNames("web"); got != "web-4,web-5" {
		t.Errorf("after moving start: pods %q", got)
	}
}

func TestParallelScaleUpAndDown(t *testing.T) {
	set := newSet("web", 4)
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	f := newFixture(t, set)
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0,web-1,web-2,web-3" {
		t.Fatalf("one parallel sync created %q", got)
	}
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0" {
		t.Errorf("one parallel sync scaled down to %q", got)
	}
}

func TestParallelCreateFailureStopsBatches(t *testing.T) {
	set := newSet("web", 8)
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	set.Spec.VolumeClaimTemplates = nil
	f := newFixture(t, set)
	f.store.fail["create pod"] = errors.New("quota exceeded")
	if err := f.sync("web"); err == nil {
		t.Fatal("expected the sync to fail")
	}
	// Slow start: the first batch of one failed, so no other create was tried.
	failed := 0
	for _, e := range f.takeEvents() {
		if strings.HasPrefix(e, "Warning FailedCreate Create Pod web-") {
			failed++
			if !strings.HasSuffix(e, "in StatefulSet web failed error: quota exceeded") {
				t.Errorf("event %q", e)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d failed creates, want 1", failed)
	}
}

func TestOrderedReadyScaleDown(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.converge("web")
	f.store.gracefulDelete = true
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })

	f.mustSync("web")
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2"}) {
		t.Fatalf("deletes %v, want web-2 first", got)
	}
	// web-2 is terminating: scale-down waits for it.
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); len(got) != 1 {
		t.Fatalf("deleted %v while web-2 terminates", got)
	}
	if err := f.store.pods.Delete(f.pod("web-2")); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2", "delete pod web-1"}) {
		t.Fatalf("deletes %v", got)
	}
	if e := f.takeEvents(); !slices.Contains(e, "Normal SuccessfulDelete Delete Pod web-1 in StatefulSet web successful") {
		t.Errorf("events %q", e)
	}
	// Claims are retained by default.
	for _, c := range []string{"datadir-web-1", "datadir-web-2"} {
		if f.claim(c).DeletionTimestamp != nil || len(f.claim(c).OwnerReferences) != 0 {
			t.Errorf("claim %s touched", c)
		}
	}
}

func TestScaleDownWaitsForUnhealthyPredecessor(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	// web-0 is not ready: OrderedReady scale-down must wait.
	f.markPhase("web-0", v1.PodPending)
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); len(got) != 0 {
		t.Fatalf("deleted %v while web-0 is unhealthy", got)
	}
	f.markRunningReady("web-0")
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2"}) {
		t.Fatalf("deletes %v", got)
	}
}

func TestScaleDownDeletesFirstUnhealthyCondemnedPod(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	// web-1, the lowest condemned pod, is unhealthy. web-2 still goes
	// first, and then web-1 is deleted although not ready: as the first
	// unhealthy pod it would otherwise block the scale-down forever.
	f.markPhase("web-1", v1.PodPending)
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2"}) {
		t.Fatalf("deletes %v", got)
	}
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2", "delete pod web-1"}) {
		t.Fatalf("the unhealthy condemned pod must be deleted: %v", got)
	}
}

func TestFailedPodIsRecreated(t *testing.T) {
	f := newFixture(t, newSet("web", 2))
	f.converge("web")
	oldUID := f.pod("web-0").UID
	f.markPhase("web-0", v1.PodFailed)
	f.takeEvents()
	f.mustSync("web")
	if _, err := f.store.GetPod(testNS, "web-0"); err == nil {
		t.Fatal("failed pod not deleted")
	}
	if e := f.takeEvents(); !slices.Contains(e, "Normal SuccessfulDelete Delete Pod web-0 in StatefulSet web successful") {
		t.Errorf("events %q", e)
	}
	f.mustSync("web")
	if p := f.pod("web-0"); p.UID == oldUID {
		t.Error("web-0 not recreated")
	}
	// Succeeded pods are replaced too.
	f.converge("web")
	f.markPhase("web-1", v1.PodSucceeded)
	f.mustSync("web")
	if _, err := f.store.GetPod(testNS, "web-1"); err == nil {
		t.Error("succeeded pod not deleted")
	}
}

func TestTerminatingPodBlocksOrderedReady(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.mustSync("web")
	f.markRunningReady("web-0")
	f.updatePodStatus("web-0", func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) })
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0" {
		t.Errorf("created %q while web-0 terminates", got)
	}
}

func TestRollingUpdateReverseOrder(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.converge("web")
	oldRev := f.getSet("web").Status.CurrentRevision
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })

	var order []string
	for i := 0; i < 50 && f.getSet("web").Status.CurrentRevision == oldRev; i++ {
		before := len(f.opsMatching("delete pod"))
		f.mustSync("web")
		if del := f.opsMatching("delete pod"); len(del) > before {
			order = append(order, strings.TrimPrefix(del[len(del)-1], "delete pod "))
			// One pod at a time: the sync that deleted cannot also create.
			if len(del)-before != 1 {
				t.Fatalf("deleted %d pods in one sync", len(del)-before)
			}
		}
		for _, p := range f.pods("web") {
			if p.Status.Phase == v1.PodPending {
				f.markRunningReady(p.Name)
			}
		}
	}
	if !slices.Equal(order, []string{"web-2", "web-1", "web-0"}) {
		t.Errorf("update order %v", order)
	}
	st := f.getSet("web").Status
	if st.CurrentRevision != st.UpdateRevision || st.CurrentRevision == oldRev || st.UpdatedReplicas != 3 || st.CurrentReplicas != 3 {
		t.Errorf("status %+v", st)
	}
	for _, p := range f.pods("web") {
		if p.Spec.Containers[0].Image != "nginx:2" || getPodRevision(p) != st.UpdateRevision {
			t.Errorf("%s: image %s revision %s", p.Name, p.Spec.Containers[0].Image, getPodRevision(p))
		}
	}
}

func TestRollingUpdateWaitsForUpdatedPod(t *testing.T) {
	f := newFixture(t, newSet("web", 3))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	f.mustSync("web") // deletes web-2
	f.mustSync("web") // recreates web-2 at the new revision
	if p := f.pod("web-2"); p.Spec.Containers[0].Image != "nginx:2" {
		t.Fatalf("web-2 image %s", p.Spec.Containers[0].Image)
	}
	for i := 0; i < 3; i++ {
		f.mustSync("web")
	}
	if got := f.opsMatching("delete pod"); len(got) != 1 {
		t.Errorf("deleted %v while the updated web-2 is not ready", got)
	}
	st := f.getSet("web").Status
	if st.UpdatedReplicas != 1 || st.CurrentReplicas != 2 || st.CurrentRevision == st.UpdateRevision {
		t.Errorf("status mid-update %+v", st)
	}
}

func TestRollingUpdatePartition(t *testing.T) {
	set := newSet("web", 4)
	f := newFixture(t, set)
	f.converge("web")
	oldRev := f.getSet("web").Status.CurrentRevision
	f.setSpec("web", func(s *apps.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
	})
	f.converge("web")
	st := f.getSet("web").Status
	for _, p := range f.pods("web") {
		wantNew := getOrdinal(p) >= 2
		if (getPodRevision(p) == st.UpdateRevision) != wantNew {
			t.Errorf("%s at %s (update %s)", p.Name, getPodRevision(p), st.UpdateRevision)
		}
	}
	if st.CurrentRevision != oldRev || st.UpdatedReplicas != 2 || st.CurrentReplicas != 2 {
		t.Errorf("partitioned status %+v", st)
	}
	// A pod below the partition that is deleted comes back at the current revision.
	if err := f.store.pods.Delete(f.pod("web-0")); err != nil {
		t.Fatal(err)
	}
	f.converge("web")
	if getPodRevision(f.pod("web-0")) != oldRev {
		t.Error("web-0 recreated at the update revision")
	}
	// Lowering the partition finishes the rollout.
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0) })
	f.converge("web")
	st = f.getSet("web").Status
	if st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas != 4 {
		t.Errorf("status %+v", st)
	}
}

func TestRollingUpdateMaxUnavailable(t *testing.T) {
	for _, policy := range []apps.PodManagementPolicyType{apps.OrderedReadyPodManagement, apps.ParallelPodManagement} {
		t.Run(string(policy), func(t *testing.T) {
			set := newSet("web", 5)
			set.Spec.PodManagementPolicy = policy
			set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			f := newFixture(t, set)
			f.converge("web")
			f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
			f.store.gracefulDelete = true
			f.mustSync("web")
			if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-4", "delete pod web-3"}) {
				t.Fatalf("first wave %v", got)
			}
			// Two terminating pods use the whole budget.
			f.mustSync("web")
			if got := f.opsMatching("delete pod"); len(got) != 2 {
				t.Fatalf("deleted beyond maxUnavailable: %v", got)
			}
			// An OrderedReady sync stops at the first terminating pod, before
			// the rolling update recounts; a Parallel one recounts.
			wantUnavailable := 0.0
			if policy == apps.ParallelPodManagement {
				wantUnavailable = 2
			}
			if v := gaugeValue(t, unavailableReplicasGauge, testNS, "web", string(policy)); v != wantUnavailable {
				t.Errorf("unavailable replicas gauge %v", v)
			}
			if v := gaugeValue(t, maxUnavailableGauge, testNS, "web", string(policy)); v != 2 {
				t.Errorf("max unavailable gauge %v", v)
			}
		})
	}
}

func TestMaxUnavailablePercentage(t *testing.T) {
	set := newSet("web", 10)
	for value, want := range map[string]int{"25%": 2, "5%": 1, "100%": 10} {
		set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString(value))
		got, err := effectiveMaxUnavailable(set)
		if err != nil || got != want {
			t.Errorf("%s of 10: %d (%v), want %d", value, got, err, want)
		}
	}
	set.Spec.UpdateStrategy.RollingUpdate = nil
	if got, _ := effectiveMaxUnavailable(set); got != 1 {
		t.Errorf("default %d", got)
	}
}

// Without the MaxUnavailableStatefulSet feature, one pod at a time.
func TestRollOneAtATime(t *testing.T) {
	set := newSet("web", 3)
	f := newFixture(t, set)
	f.converge("web")
	updated := f.getSet("web").DeepCopy()
	updated.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	revs := f.revisions("web")
	cur := revs[0]
	upd, err := newRevision(updated, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &round{set: updated, current: cur, update: upd, replicas: f.pods("web"), now: metav1.NewTime(f.clock.Now())}
	status := &apps.StatefulSetStatus{CurrentReplicas: 3}
	if _, err := f.ssc.control.rollOneAtATime(f.ctx, r, status); err != nil {
		t.Fatal(err)
	}
	if got := f.opsMatching("delete pod"); !slices.Equal(got, []string{"delete pod web-2"}) || status.CurrentReplicas != 2 {
		t.Errorf("deletes %v currentReplicas %d", got, status.CurrentReplicas)
	}
}

func TestOnDeleteUpdate(t *testing.T) {
	set := newSet("web", 3)
	set.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.OnDeleteStatefulSetStrategyType}
	f := newFixture(t, set)
	f.converge("web")
	oldRev := f.getSet("web").Status.CurrentRevision
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	f.converge("web")
	if got := f.opsMatching("delete pod"); len(got) != 0 {
		t.Fatalf("OnDelete deleted %v", got)
	}
	st := f.getSet("web").Status
	if st.CurrentRevision != oldRev || st.UpdateRevision == oldRev || st.UpdatedReplicas != 0 || st.CurrentReplicas != 3 {
		t.Errorf("status %+v", st)
	}
	// A pod the user deletes comes back at the update revision.
	if err := f.store.pods.Delete(f.pod("web-1")); err != nil {
		t.Fatal(err)
	}
	f.converge("web")
	if p := f.pod("web-1"); getPodRevision(p) != st.UpdateRevision || p.Spec.Containers[0].Image != "nginx:2" {
		t.Errorf("web-1 at %s", getPodRevision(p))
	}
	if st := f.getSet("web").Status; st.UpdatedReplicas != 1 || st.CurrentReplicas != 2 {
		t.Errorf("status %+v", st)
	}
}

func TestMinReadySeconds(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.MinReadySeconds = 30
	f := newFixture(t, set)
	f.mustSync("web")
	f.markRunningReady("web-0")
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0" {
		t.Fatalf("created %q before web-0 was available", got)
	}
	st := f.getSet("web").Status
	if st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Errorf("status %+v", st)
	}
	f.clock.Step(30 * time.Second)
	f.mustSync("web")
	if got := f.podNames("web"); got != "web-0,web-1" {
		t.Fatalf("pods %q once web-0 is available", got)
	}
	if st := f.getSet("web").Status; st.AvailableReplicas != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	f := newFixture(t, newSet("web", 2))
	f.converge("web")
	writes := f.status.count()
	for i := 0; i < 3; i++ {
		f.mustSync("web")
	}
	if f.status.count() != writes {
		t.Errorf("%d status writes for no change", f.status.count()-writes)
	}
	if ops := len(f.store.opsSnapshot()); ops != 4 {
		t.Errorf("%d pod/claim writes for 2 replicas, want 4 (2 claims, 2 pods): %v", ops, f.store.opsSnapshot())
	}
	// A new generation alone is written.
	f.setSpec("web", func(s *apps.StatefulSet) { s.Labels = map[string]string{"x": "y"} })
	f.mustSync("web")
	if f.status.count() != writes+1 || f.getSet("web").Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration not written")
	}
}

func TestCountPods(t *testing.T) {
	cur := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "cur"}}
	upd := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "upd"}}
	now := metav1.NewTime(time.Unix(1000, 0))
	pod := func(rev string, phase v1.PodPhase, readySince *time.Time, deleting bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{apps.StatefulSetRevisionLabel: rev}}}
		p.Status.Phase = phase
		if readySince != nil {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(*readySince)}}
		}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	long := now.Add(-time.Minute)
	short := now.Add(-time.Second)
	pods := []*v1.Pod{
		pod("cur", "", nil, false),                // not created: nothing
		pod("cur", v1.PodPending, nil, false),     // replica, current
		pod("cur", v1.PodRunning, &long, false),   // ready, available, current
		pod("upd", v1.PodRunning, &short, false),  // ready, not available, updated
		pod("upd", v1.PodRunning, &long, true),    // terminating: replica, ready, available, no revision
		pod("other", v1.PodRunning, &long, false), // a third revision
		pod("upd", v1.PodFailed, nil, false),      // replica, updated
		pod("cur", v1.PodPending, &long, false),   // ready condition but not running: not ready
	}
	var st apps.StatefulSetStatus
	countPods(&st, 10, cur, upd, now, pods[:4], pods[4:])
	want := apps.StatefulSetStatus{Replicas: 7, ReadyReplicas: 4, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 2}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("got %+v\nwant %+v", st, want)
	}
}

func TestCompleteUpdate(t *testing.T) {
	set := newSet("web", 2)
	st := &apps.StatefulSetStatus{Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2, CurrentReplicas: 0, CurrentRevision: "a", UpdateRevision: "b"}
	completeUpdate(set, st, metav1.Now(), false)
	if st.CurrentRevision != "b" || st.CurrentReplicas != 2 {
		t.Errorf("complete: %+v", st)
	}
	st = &apps.StatefulSetStatus{Replicas: 2, ReadyReplicas: 1, UpdatedReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}
	completeUpdate(set, st, metav1.Now(), false)
	if st.CurrentRevision != "a" {
		t.Error("completed with a pod not ready")
	}
}

func TestRecreateStrategyDisabled(t *testing.T) {
	set := newSet("web", 1)
	set.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.RecreateStatefulSetStrategyType}
	f := newFixture(t, set)
	if err := f.sync("web"); err == nil {
		t.Fatal("expected an error")
	}
	want := "Warning UnknownStrategy statefulset default/web uses Recreate strategy but feature gate StatefulSetRecreateStrategy is disabled"
	if e := f.takeEvents(); !slices.Equal(e, []string{want}) {
		t.Errorf("events %q", e)
	}
	if len(f.store.opsSnapshot()) != 0 || f.status.count() != 0 {
		t.Error("wrote something")
	}
}

// With the gate on the same set syncs: its pod is created.
func TestRecreateStrategyEnabled(t *testing.T) {
	set := newSet("web", 1)
	set.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.RecreateStatefulSetStrategyType}
	f := newFixture(t, set)
	f.ssc.control.features.StatefulSetRecreateStrategy = true
	if err := f.sync("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.opsMatching("create pod"); len(got) != 1 {
		t.Errorf("created %v, want the one pod", got)
	}
}

func TestSetBeingDeletedOnlyReportsStatus(t *testing.T) {
	set := newSet("web", 2)
	f := newFixture(t, set)
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) {
		s.DeletionTimestamp = ptr.To(metav1.Now())
		s.Spec.Replicas = ptr.To[int32](0)
	})
	f.mustSync("web")
	if got := f.opsMatching("delete pod"); len(got) != 0 {
		t.Errorf("deleted %v from a set being deleted", got)
	}
	if f.getSet("web").Status.ObservedGeneration != 2 {
		t.Error("status not reported")
	}
}

func TestBadInputNoWrites(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.Template.Labels = map[string]string{"app": "bar"}
	f := newFixture(t, set)
	if err := f.sync("web"); err != nil {
		t.Fatalf("a bad set must not be retried: %v", err)
	}
	if len(f.store.opsSnapshot()) != 0 {
		t.Error("created pods for a set whose selector does not match its template")
	}
	if e := f.takeEvents(); len(e) != 1 || !strings.HasPrefix(e[0], "Warning SelectorMismatch") {
		t.Errorf("events %q", e)
	}

	bad := newSet("bad", 1)
	bad.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	f = newFixture(t, bad)
	if err := f.sync("bad"); err != nil {
		t.Errorf("invalid selector: %v", err)
	}
	// A missing set is no error either.
	if err := f.sync("gone"); err != nil {
		t.Errorf("missing set: %v", err)
	}
}

func TestPodCreateErrors(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	f.store.fail["create claim"] = errors.New("no storage")
	if err := f.sync("web"); err == nil {
		t.Fatal("expected an error")
	}
	want := []string{
		"Warning FailedCreate Create Claim datadir-web-0 for Pod web-0 in StatefulSet web failed error: no storage",
		"Warning FailedCreate Create Pod web-0 in StatefulSet web failed error: failed to create PVC datadir-web-0: no storage",
	}
	if e := f.takeEvents(); !slices.Equal(e, want) {
		t.Errorf("events %q\nwant %q", e, want)
	}
	if f.podNames("web") != "" {
		t.Error("pod created without its claim")
	}
}

func TestClaimBeingDeletedBlocksPod(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	claim := claimsFor(f.getSet("web"), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}})[0]
	claim.DeletionTimestamp = ptr.To(metav1.Now())
	if err := f.store.claims.Add(&claim); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("web"); err == nil || !strings.Contains(err.Error(), "pvc datadir-web-0 is being deleted") {
		t.Errorf("error %v", err)
	}
	if f.podNames("web") != "" {
		t.Error("pod created on a claim being deleted")
	}
}

func TestPendingPodGetsMissingClaim(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	f.mustSync("web")
	if err := f.store.claims.Delete(f.claim("datadir-web-0")); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	if f.claim("datadir-web-0") == nil {
		t.Error("claim not recreated for the pending pod")
	}
}

func TestIdentityRepaired(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	f.converge("web")
	f.updatePodStatus("web-0", func(p *v1.Pod) { delete(p.Labels, apps.StatefulSetPodNameLabel) })
	f.mustSync("web")
	if f.pod("web-0").Labels[apps.StatefulSetPodNameLabel] != "web-0" {
		t.Error("identity label not restored")
	}
	if got := f.opsMatching("update pod"); len(got) != 1 {
		t.Errorf("updates %v", got)
	}
	if e := f.takeEvents(); !slices.Contains(e, "Normal SuccessfulUpdate Update Pod web-0 in StatefulSet web successful") {
		t.Errorf("events %q", e)
	}
}

func TestEventsAfterFullLifecycle(t *testing.T) {
	f := newFixture(t, newSet("web", 2))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](0) })
	f.converge("web")
	var reasons []string
	for _, e := range f.takeEvents() {
		reasons = append(reasons, strings.Fields(e)[1])
	}
	want := fmt.Sprint([]string{"SuccessfulCreate", "SuccessfulCreate", "SuccessfulCreate", "SuccessfulCreate", "SuccessfulDelete", "SuccessfulDelete"})
	if fmt.Sprint(reasons) != want {
		t.Errorf("reasons %v", reasons)
	}
}

// The Recreate strategy (alpha, gated) deletes every old pod first and
// reports progress in the Progressing condition.
func TestRecreateOldPods(t *testing.T) {
	set := newSet("web", 2)
	f := newFixture(t, set)
	f.converge("web")
	f.store.gracefulDelete = true
	pods := f.pods("web")
	cur := f.revisions("web")[0]
	changed := f.getSet("web").DeepCopy()
	changed.Spec.UpdateStrategy = apps.StatefulSetUpdateStrategy{Type: apps.RecreateStatefulSetStrategyType}
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	upd, err := newRevision(changed, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(f.clock.Now())
	r := &round{set: changed, current: cur, update: upd, replicas: pods, now: now}
	status := &apps.StatefulSetStatus{}
	done, err := f.ssc.control.recreateOldPods(f.ctx, r, status)
	if err != nil || done {
		t.Fatalf("done=%v err=%v", done, err)
	}
	if got := f.opsMatching("delete pod"); len(got) != 2 {
		t.Errorf("deleted %v, want both old pods at once", got)
	}
	cond := findCondition(status, apps.StatefulSetProgressing)
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != RecreateInProgressReason || cond.Message != "Deleting old revision pods" {
		t.Fatalf("condition %+v", cond)
	}
	// Terminating old pods still hold the strategy back, without new deletes.
	r.replicas = f.pods("web")
	if done, _ := f.ssc.control.recreateOldPods(f.ctx, r, status); done || len(f.opsMatching("delete pod")) != 2 {
		t.Error("went on while old pods terminate")
	}
	// Gone: done.
	r.replicas = nil
	if done, _ := f.ssc.control.recreateOldPods(f.ctx, r, status); !done {
		t.Error("not done once the old pods are gone")
	}
	// The transition time is kept while the status stays True.
	before := cond.LastTransitionTime
	setProgressing(status, v1.ConditionTrue, RecreateInProgressReason, "Waiting for new-revision pods to be created", metav1.NewTime(now.Add(time.Minute)))
	if c := findCondition(status, apps.StatefulSetProgressing); c.LastTransitionTime != before || c.Message != "Waiting for new-revision pods to be created" {
		t.Errorf("condition %+v", c)
	}
	setProgressing(status, v1.ConditionFalse, RecreateCompletedReason, "All pods recreated successfully", metav1.NewTime(now.Add(time.Hour)))
	if c := findCondition(status, apps.StatefulSetProgressing); c.LastTransitionTime.Equal(&before) || len(status.Conditions) != 1 {
		t.Errorf("condition %+v", c)
	}
}

func TestUpdatePodRetriesConflict(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	f.converge("web")
	f.updatePodStatus("web-0", func(p *v1.Pod) { delete(p.Labels, apps.StatefulSetPodNameLabel) })
	f.store.failOnce["update pod"] = apierrors.NewConflict(podsResource, "web-0", errors.New("stale"))
	f.takeEvents()
	f.mustSync("web")
	if f.pod("web-0").Labels[apps.StatefulSetPodNameLabel] != "web-0" {
		t.Error("not repaired after a conflict")
	}
	if e := f.takeEvents(); !slices.Equal(e, []string{"Normal SuccessfulUpdate Update Pod web-0 in StatefulSet web successful"}) {
		t.Errorf("events %q", e)
	}
	// A failure that is not a conflict is reported.
	f.updatePodStatus("web-0", func(p *v1.Pod) { delete(p.Labels, apps.StatefulSetPodNameLabel) })
	f.store.failOnce["update pod"] = errors.New("boom")
	if err := f.sync("web"); err == nil {
		t.Fatal("expected an error")
	}
	if e := f.takeEvents(); !slices.Equal(e, []string{"Warning FailedUpdate Update Pod web-0 in StatefulSet web failed error: boom"}) {
		t.Errorf("events %q", e)
	}
}

func TestDeleteFailureReported(t *testing.T) {
	f := newFixture(t, newSet("web", 2))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	f.store.fail["delete pod"] = errors.New("forbidden")
	f.takeEvents()
	if err := f.sync("web"); err == nil {
		t.Fatal("expected an error")
	}
	if e := f.takeEvents(); !slices.Equal(e, []string{"Warning FailedDelete Delete Pod web-1 in StatefulSet web failed error: forbidden"}) {
		t.Errorf("events %q", e)
	}
	// The status is still written when the pods could not be reconciled.
	if st := f.getSet("web").Status; st.ObservedGeneration != 2 {
		t.Errorf("status %+v", st)
	}
}

func TestRollOneAtATimeWaitsForAvailability(t *testing.T) {
	set := newSet("web", 3)
	f := newFixture(t, set)
	f.converge("web")
	live := f.getSet("web")
	cur := f.revisions("web")[0]
	// web-2 already runs the update revision but is not ready yet.
	f.updatePodStatus("web-2", func(p *v1.Pod) {
		p.Labels[apps.StatefulSetRevisionLabel] = "web-new"
		p.Status.Conditions = nil
	})
	upd := cur.DeepCopy()
	upd.Name = "web-new"
	r := &round{set: live, current: cur, update: upd, replicas: f.pods("web"), now: metav1.NewTime(f.clock.Now())}
	if _, err := f.ssc.control.rollOneAtATime(f.ctx, r, &apps.StatefulSetStatus{}); err != nil {
		t.Fatal(err)
	}
	if got := f.opsMatching("delete pod"); len(got) != 0 {
		t.Errorf("deleted %v while the updated web-2 is unavailable", got)
	}
	// Partition 2 stops below web-2 entirely.
	f.markRunningReady("web-2")
	live = live.DeepCopy()
	live.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](2)
	r.set, r.replicas = live, f.pods("web")
	if _, err := f.ssc.control.rollOneAtATime(f.ctx, r, &apps.StatefulSetStatus{}); err != nil {
		t.Fatal(err)
	}
	if got := f.opsMatching("delete pod"); len(got) != 0 {
		t.Errorf("deleted %v below the partition", got)
	}
}

// A set with ready but not yet available pods is synced again when the
// first of them becomes available.
func TestAvailabilityRequeue(t *testing.T) {
	set := newSet("web", 1)
	set.Spec.MinReadySeconds = 30
	f := newFixture(t, set)
	f.ssc.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: f.clock})
	defer f.ssc.queue.ShutDown()
	f.mustSync("web")
	f.markRunningReadyAt("web-0", f.clock.Now().Add(-10*time.Second))
	f.mustSync("web")
	if n := f.ssc.queue.Len(); n != 0 {
		t.Fatalf("queued %d before the pod is available", n)
	}
	// Due 20s later; nothing at 19s.
	f.clock.Step(19 * time.Second)
	if n := f.ssc.queue.Len(); n != 0 {
		t.Fatalf("queued %d too early", n)
	}
	f.clock.Step(time.Second)
	ctrltestutil.WaitFor(t, "the availability check queued", func() bool { return f.ssc.queue.Len() == 1 })
}
