package deployment

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// stuckRollout: new ReplicaSet at 3 with nothing available, the status as
// the last pass wrote it, Progressing last updated at t0.
func stuckRollout() (*apps.Deployment, *apps.ReplicaSet) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.Status.AvailableReplicas, rs.Status.ReadyReplicas = 0, 0
	d.Status = apps.DeploymentStatus{
		ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, UnavailableReplicas: 3,
		TerminatingReplicas: ptr.To[int32](0),
		Conditions: []apps.DeploymentCondition{
			*util.NewDeploymentCondition(t0, apps.DeploymentProgressing, v1.ConditionTrue, util.ReplicaSetUpdatedReason, `ReplicaSet "web-5fc9f4bf66" is progressing.`),
			*util.NewDeploymentCondition(t0, apps.DeploymentAvailable, v1.ConditionFalse, util.MinimumReplicasUnavailable, "Deployment does not have minimum availability."),
		},
	}
	return d, rs
}

func TestProgressDeadlineExceeded(t *testing.T) {
	d, rs := stuckRollout()
	f := newFixture(t, d, rs)

	// Within the deadline and no progress: nothing to write.
	f.clock.SetTime(t0.Add(5 * time.Minute))
	if acts := f.mustSync(d); len(acts) != 0 {
		t.Fatalf("wrote %s", describe(acts))
	}
	// Past it: ProgressDeadlineExceeded.
	f.clock.SetTime(t0.Add(601 * time.Second))
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write past the deadline")
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionFalse, util.TimedOutReason, `ReplicaSet "web-5fc9f4bf66" has timed out progressing.`)

	// Timed out stays timed out (and a paused check does not hide it).
	d = f.refreshDeployment()
	f.clock.SetTime(t0.Add(time.Hour))
	if acts := f.mustSync(d); len(acts) != 0 {
		t.Fatalf("wrote %s", describe(acts))
	}
	// Progress after the timeout reports progressing again.
	f.addToCache(func() *apps.ReplicaSet {
		r := rs.DeepCopy()
		r.Status.ReadyReplicas, r.Status.AvailableReplicas = 1, 1
		return r
	}())
	st = statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write on progress")
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionTrue, util.ReplicaSetUpdatedReason, `ReplicaSet "web-5fc9f4bf66" is progressing.`)
}

// Progress refreshes lastUpdateTime but keeps lastTransitionTime.
func TestProgressingConditionTimes(t *testing.T) {
	d, rs := stuckRollout()
	rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 1, 1
	f := newFixture(t, d, rs)
	now := t0.Add(time.Minute)
	f.clock.SetTime(now)
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write")
	}
	c := util.GetDeploymentCondition(st[0].Status, apps.DeploymentProgressing)
	if !c.LastUpdateTime.Time.Equal(now) || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("times: update %v transition %v", c.LastUpdateTime, c.LastTransitionTime)
	}
}

func TestRolloutCompleteConditions(t *testing.T) {
	d, rs := stuckRollout()
	rs.Status.ReadyReplicas, rs.Status.AvailableReplicas = 3, 3
	f := newFixture(t, d, rs)
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write")
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionTrue, util.NewRSAvailableReason, `ReplicaSet "web-5fc9f4bf66" has successfully progressed.`)
	expectCondition(t, st[0].Status, apps.DeploymentAvailable, v1.ConditionTrue, util.MinimumReplicasAvailable, "Deployment has minimum availability.")
	if s := st[0].Status; s.AvailableReplicas != 3 || s.ReadyReplicas != 3 || s.UnavailableReplicas != 0 {
		t.Errorf("status %+v", s)
	}
}

// Without a deadline there is no Progressing condition at all.
func TestNoProgressDeadline(t *testing.T) {
	d := newDeployment(2)
	d.Spec.ProgressDeadlineSeconds = nil
	f := newFixture(t, d)
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 {
		t.Fatal("no status write")
	}
	if c := util.GetDeploymentCondition(st[0].Status, apps.DeploymentProgressing); c != nil {
		t.Errorf("unexpected Progressing %+v", c)
	}
}

func TestRequeueStuckDeployment(t *testing.T) {
	d, rs := stuckRollout()
	f := newFixture(t, d, rs)
	p := &syncPass{dc: f.dc, d: d}
	status := p.calculateStatus([]*apps.ReplicaSet{rs}, rs)

	f.clock.SetTime(t0.Add(3 * time.Minute))
	if got := f.dc.requeueStuckDeployment(f.ctx, d, status); got != 7*time.Minute {
		t.Errorf("after = %v, want 7m", got)
	}
	f.clock.SetTime(t0.Add(10 * time.Minute))
	if got := f.dc.requeueStuckDeployment(f.ctx, d, status); got != 0 {
		t.Errorf("after = %v, want 0 (now)", got)
	}
	noDeadline := d.DeepCopy()
	noDeadline.Spec.ProgressDeadlineSeconds = nil
	if got := f.dc.requeueStuckDeployment(f.ctx, noDeadline, status); got != -1 {
		t.Errorf("no deadline: %v", got)
	}
}
