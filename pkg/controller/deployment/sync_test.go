package deployment

import (
	"fmt"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

func scaledDeployment(replicas, surge int32) *apps.Deployment {
	d := newDeployment(replicas)
	s, u := intstr.FromInt32(surge), intstr.FromInt32(0)
	d.Spec.Strategy.RollingUpdate = &apps.RollingUpdateDeployment{MaxSurge: &s, MaxUnavailable: &u}
	return d
}

// plainRS is a ReplicaSet of size replicas, annotated as made when the
// Deployment had prev replicas and prevMax maximum.
func plainRS(name string, replicas int32, created time.Time, prev, prevMax int32) *apps.ReplicaSet {
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name), CreationTimestamp: metav1.NewTime(created),
			Annotations: map[string]string{
				util.DesiredReplicasAnnotation: fmt.Sprint(prev),
				util.MaxReplicasAnnotation:     fmt.Sprint(prevMax),
			},
		},
		Spec: apps.ReplicaSetSpec{Replicas: ptr.To(replicas)},
	}
}

// Proportional scaling: the cases (inputs and outcomes) of upstream's
// TestScale, including leftover distribution.
func TestProportionalScale(t *testing.T) {
	newT, oldT, olderT := t0, t0.Add(-time.Hour), t0.Add(-2*time.Hour)
	type rsSpec struct {
		name    string
		size    int32
		created time.Time
	}
	tests := []struct {
		name                    string
		replicas, surge         int32
		prevReplicas, prevSurge int32
		newRS                   *rsSpec
		old                     []rsSpec
		want                    map[string]int32
	}{
		{"scale up single", 12, 0, 10, 0, &rsSpec{"v1", 10, newT}, nil, map[string]int32{"v1": 12}},
		{"scale down single", 5, 0, 10, 0, &rsSpec{"v1", 10, newT}, nil, map[string]int32{"v1": 5}},
		{"5 -> 10", 10, 0, 5, 0, &rsSpec{"v2", 2, newT}, []rsSpec{{"v1", 3, oldT}}, map[string]int32{"v2": 4, "v1": 6}},
		{"5 -> 3", 3, 0, 5, 0, &rsSpec{"v2", 2, newT}, []rsSpec{{"v1", 3, oldT}}, map[string]int32{"v2": 1, "v1": 2}},
		{"9 -> 4", 4, 0, 9, 0, &rsSpec{"v2", 8, newT}, []rsSpec{{"v1", 1, oldT}}, map[string]int32{"v2": 4, "v1": 0}},
		{"7 -> 10", 10, 0, 7, 0, &rsSpec{"v3", 2, newT}, []rsSpec{{"v2", 3, oldT}, {"v1", 2, olderT}}, map[string]int32{"v3": 3, "v2": 4, "v1": 3}},
		{"13 -> 8", 8, 0, 13, 0, &rsSpec{"v3", 2, newT}, []rsSpec{{"v2", 8, oldT}, {"v1", 3, olderT}}, map[string]int32{"v3": 1, "v2": 5, "v1": 2}},
		{"leftover up goes to newest of equals", 4, 0, 3, 0, &rsSpec{"v3", 1, newT}, []rsSpec{{"v2", 1, oldT}, {"v1", 1, olderT}}, map[string]int32{"v3": 2, "v2": 1, "v1": 1}},
		{"leftover down comes from oldest of equals", 2, 0, 3, 0, &rsSpec{"v3", 1, newT}, []rsSpec{{"v2", 1, oldT}, {"v1", 1, olderT}}, map[string]int32{"v3": 1, "v2": 1, "v1": 0}},
		{"no new rs 4 -> 5", 5, 0, 4, 0, nil, []rsSpec{{"v2", 2, oldT}, {"v1", 2, olderT}}, map[string]int32{"v2": 3, "v1": 2}},
		{"6 -> 0", 0, 0, 6, 0, &rsSpec{"v3", 3, newT}, []rsSpec{{"v2", 2, oldT}, {"v1", 1, olderT}}, map[string]int32{"v3": 0, "v2": 0, "v1": 0}},
		{"0 -> 6 picks the new rs", 6, 0, 6, 0, &rsSpec{"v3", 0, newT}, []rsSpec{{"v2", 0, oldT}, {"v1", 0, olderT}}, map[string]int32{"v3": 6, "v2": 0, "v1": 0}},
		{"surge pods", 20, 2, 10, 2, &rsSpec{"v2", 6, newT}, []rsSpec{{"v1", 6, oldT}}, map[string]int32{"v2": 11, "v1": 11}},
		{"surge and size change", 50, 6, 10, 3, &rsSpec{"v2", 5, newT}, []rsSpec{{"v1", 8, oldT}}, map[string]int32{"v2": 22, "v1": 34}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := scaledDeployment(tc.replicas, tc.surge)
			prevMax := tc.prevReplicas + tc.prevSurge
			objs := []runtime.Object{d}
			var newRS *apps.ReplicaSet
			if tc.newRS != nil {
				newRS = plainRS(tc.newRS.name, tc.newRS.size, tc.newRS.created, tc.prevReplicas, prevMax)
				objs = append(objs, newRS)
			}
			var oldRSs []*apps.ReplicaSet
			for _, o := range tc.old {
				rs := plainRS(o.name, o.size, o.created, tc.prevReplicas, prevMax)
				oldRSs = append(oldRSs, rs)
				objs = append(objs, rs)
			}
			f := newFixture(t, objs...)
			p := &syncPass{dc: f.dc, d: d}
			f.client.ClearActions()
			if err := p.scale(f.ctx, newRS, oldRSs); err != nil {
				t.Fatal(err)
			}
			got := map[string]int32{}
			for name, rs := range f.replicaSets() {
				got[name] = *rs.Spec.Replicas
			}
			for name, want := range tc.want {
				if got[name] != want {
					t.Errorf("%s: %d, want %d (all: %v)", name, got[name], want, got)
				}
			}
			// Every ReplicaSet touched records the new size and maximum.
			for name, rs := range rsUpdates(writes(f.client.Actions())) {
				if rs.Annotations[util.DesiredReplicasAnnotation] != fmt.Sprint(tc.replicas) ||
					rs.Annotations[util.MaxReplicasAnnotation] != fmt.Sprint(tc.replicas+util.MaxSurge(*d)) {
					t.Errorf("%s annotations %v", name, rs.Annotations)
				}
			}
		})
	}
}

// A scaling event during a rollout goes through sync, not the rollout.
func TestScalingEventDuringRollout(t *testing.T) {
	prev := newDeployment(10) // surge 3
	d := newDeployment(15)    // surge 4: max 19
	d.Annotations = map[string]string{util.RevisionAnnotation: "2"}
	old := ownedRS(prev, webTemplate("nginx:old"), 8, 1, t0.Add(-time.Hour))
	newRS := ownedRS(prev, d.Spec.Template, 5, 2, t0)
	f := newFixture(t, d, old, newRS)
	acts := f.mustSync(d)
	ups := rsUpdates(acts)
	// 13 -> 19: old 8*19/13=11.7 -> 12, new 5*19/13=7.3 -> 7.
	if ups[old.Name] == nil || *ups[old.Name].Spec.Replicas != 12 || ups[newRS.Name] == nil || *ups[newRS.Name].Spec.Replicas != 7 {
		t.Fatalf("got %s", describe(acts))
	}
	if len(rsCreates(acts)) != 0 {
		t.Fatal("scaling event must not roll out")
	}
}

// Old ReplicaSets beyond revisionHistoryLimit are deleted oldest first, but
// only when fully scaled down and not already being deleted.
func TestCleanupByRevisionHistoryLimit(t *testing.T) {
	d := newDeployment(3)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	d.Annotations = map[string]string{util.RevisionAnnotation: "7"}
	cur := ownedRS(d, d.Spec.Template, 3, 7, t0)
	d.Status = apps.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	objs := []runtime.Object{d, cur}
	old := map[int]*apps.ReplicaSet{}
	for rev := 1; rev <= 6; rev++ {
		rs := ownedRS(d, webTemplate(fmt.Sprintf("nginx:%d", rev)), 0, rev, t0.Add(-time.Duration(10-rev)*time.Hour))
		old[rev] = rs
		objs = append(objs, rs)
	}
	// rev 2 still has a pod going away; rev 3 is already being deleted and
	// does not count; rev 4's controller has not observed its scale-down.
	old[2].Status.Replicas = 1
	now := metav1.NewTime(t0)
	old[3].DeletionTimestamp = &now
	old[3].Finalizers = []string{"x"}
	old[4].Generation = 2
	f := newFixture(t, objs...)
	acts := f.mustSync(d)
	var deleted []string
	for _, a := range acts {
		if a.GetVerb() == "delete" {
			deleted = append(deleted, a.(interface{ GetName() string }).GetName())
		}
	}
	// Alive old: 1,2,4,5,6 -> 3 over the limit: revs 1,2,4; 2 and 4 are skipped.
	if len(deleted) != 1 || deleted[0] != old[1].Name {
		t.Fatalf("deleted %v, want only rev 1 (%s)", deleted, old[1].Name)
	}
}

// Paused: no rollout, a Progressing=Unknown DeploymentPaused condition,
// proportional scaling still applies; resuming says DeploymentResumed.
func TestPaused(t *testing.T) {
	d := newDeployment(10)
	d.Spec.Paused = true
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	old := ownedRS(d, webTemplate("nginx:old"), 10, 1, t0)
	f := newFixture(t, d, old)
	acts := f.mustSync(d)
	if len(rsCreates(acts)) != 0 || len(rsUpdates(acts)) != 0 {
		t.Fatalf("paused deployment rolled out: %s", describe(acts))
	}
	// As upstream: the pause is written on its own, then the status.
	st := statusUpdates(acts)
	if len(st) != 2 {
		t.Fatalf("status writes: %s", describe(acts))
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionUnknown, util.PausedDeployReason, "Deployment is paused")
	expectCondition(t, st[1].Status, apps.DeploymentProgressing, v1.ConditionUnknown, util.PausedDeployReason, "Deployment is paused")

	// Scale while paused, mid-rollout: proportional.
	d = f.refreshDeployment()
	d.Spec.Replicas = ptr.To[int32](15)
	d.Spec.Template = webTemplate("nginx:new")
	prev := newDeployment(10)
	newRS := ownedRS(prev, d.Spec.Template, 5, 2, t0.Add(time.Minute))
	old8 := old.DeepCopy()
	old8.Spec.Replicas = ptr.To[int32](8)
	old8.Annotations[util.MaxReplicasAnnotation] = "13"
	for _, o := range []runtime.Object{d, newRS, old8} {
		if err := f.client.Tracker().Add(o); err != nil {
			if err := f.client.Tracker().Update(apps.SchemeGroupVersion.WithResource(resourceOf(o)), o, "default"); err != nil {
				t.Fatal(err)
			}
		}
		f.addToCache(o)
	}
	acts = f.mustSync(d)
	ups := rsUpdates(acts)
	if ups[old.Name] == nil || *ups[old.Name].Spec.Replicas != 12 || ups[newRS.Name] == nil || *ups[newRS.Name].Spec.Replicas != 7 {
		t.Fatalf("paused scale: %s", describe(acts))
	}

	// Resume.
	d = f.settle(func(rs *apps.ReplicaSet) int32 { return *rs.Spec.Replicas })
	d.Spec.Paused = false
	f.addToCache(d)
	acts = f.mustSync(d)
	// The resume is written first, on its own, as upstream does.
	st = statusUpdates(acts)
	if len(st) < 1 {
		t.Fatalf("status writes on resume: %s", describe(acts))
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionUnknown, util.ResumedDeployReason, "Deployment is resumed")
}

func resourceOf(o runtime.Object) string {
	if _, ok := o.(*apps.Deployment); ok {
		return "deployments"
	}
	return "replicasets"
}

// A ReplicaSet's ReplicaFailure condition is lifted onto the Deployment.
func TestReplicaFailureCondition(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.Status.AvailableReplicas, rs.Status.ReadyReplicas, rs.Status.Replicas = 0, 0, 0
	rs.Status.Conditions = []apps.ReplicaSetCondition{{
		Type: apps.ReplicaSetReplicaFailure, Status: v1.ConditionTrue, Reason: "FailedCreate",
		Message: "pods \"web-5fc9f4bf66-\" is forbidden: exceeded quota", LastTransitionTime: metav1.NewTime(t0),
	}}
	f := newFixture(t, d, rs)
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write")
	}
	expectCondition(t, st[0].Status, apps.DeploymentReplicaFailure, v1.ConditionTrue, "FailedCreate", rs.Status.Conditions[0].Message)
}
