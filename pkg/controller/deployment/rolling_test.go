package deployment

import (
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// A rolling update of 10 replicas with 25%/25% (surge 3, unavailable 2):
// each step stays within 13 pods and 8 available, in upstream's order.
func TestRollingUpdateSteps(t *testing.T) {
	d := newDeployment(10)
	oldTemplate := webTemplate("nginx:old")
	old := ownedRS(d, oldTemplate, 10, 1, t0.Add(-time.Hour))
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	f := newFixture(t, d, old)
	newName := "web-5fc9f4bf66"

	// Pass 1: create the new ReplicaSet at the surge (3), and since old pods
	// are all available, scale the old one down by maxUnavailable (2).
	acts := f.mustSync(d)
	created := rsCreates(acts)
	if len(created) != 1 || created[0].Name != newName || *created[0].Spec.Replicas != 3 || created[0].Annotations[util.RevisionAnnotation] != "2" {
		t.Fatalf("pass 1: %s", describe(acts))
	}
	if up := rsUpdates(acts)[old.Name]; up == nil || *up.Spec.Replicas != 8 {
		t.Fatalf("pass 1: old not scaled to 8: %s", describe(acts))
	}
	wantEvents := []string{
		"Normal ScalingReplicaSet Scaled up replica set web-5fc9f4bf66 from 0 to 3",
		"Normal ScalingReplicaSet Scaled down replica set " + old.Name + " from 10 to 8",
	}
	if ev := f.events(); len(ev) != 2 || ev[0] != wantEvents[0] || ev[1] != wantEvents[1] {
		t.Fatalf("events %q", ev)
	}

	// Play it out: new pods become available one pass after they are made.
	newAvail := int32(0)
	for step := 0; step < 20; step++ {
		d = f.settle(func(rs *apps.ReplicaSet) int32 {
			if rs.Name == newName {
				return newAvail
			}
			return *rs.Spec.Replicas
		})
		rss := f.replicaSets()
		total := *rss[newName].Spec.Replicas + *rss[old.Name].Spec.Replicas
		available := rss[newName].Status.AvailableReplicas + rss[old.Name].Status.AvailableReplicas
		if total > 13 || available < 8 {
			t.Fatalf("step %d: total %d available %d", step, total, available)
		}
		if *rss[newName].Spec.Replicas == 10 && *rss[old.Name].Spec.Replicas == 0 && newAvail == 10 {
			break
		}
		f.mustSync(d)
		newAvail = *rss[newName].Spec.Replicas
	}
	d = f.settle(func(rs *apps.ReplicaSet) int32 { return *rs.Spec.Replicas })
	f.mustSync(d)
	d = f.refreshDeployment()
	if d.Status.UpdatedReplicas != 10 || d.Status.AvailableReplicas != 10 || d.Status.Replicas != 10 {
		t.Fatalf("final status %+v", d.Status)
	}
	expectCondition(t, d.Status, apps.DeploymentProgressing, v1.ConditionTrue, util.NewRSAvailableReason, `ReplicaSet "web-5fc9f4bf66" has successfully progressed.`)
	expectCondition(t, d.Status, apps.DeploymentAvailable, v1.ConditionTrue, util.MinimumReplicasAvailable, "Deployment has minimum availability.")
	if d.Annotations[util.RevisionAnnotation] != "2" {
		t.Errorf("deployment revision %q", d.Annotations[util.RevisionAnnotation])
	}
	// Steady state: nothing more to write.
	if acts := f.mustSync(d); len(acts) != 0 {
		t.Fatalf("steady state wrote %s", describe(acts))
	}
}

// Unavailable pods of the new ReplicaSet block further scale-down, and
// unhealthy old replicas are removed first.
func TestReconcileOldReplicaSets(t *testing.T) {
	tests := []struct {
		name                string
		oldReplicas, oldAvl int32
		newReplicas, newAvl int32
		wantOld             int32
	}{
		{"new unavailable blocks", 8, 8, 5, 0, 8},
		{"new available frees budget", 8, 8, 5, 5, 3},
		{"new unavailable leaves no budget", 8, 6, 5, 0, 8},
		{"unhealthy old go first, then available", 8, 6, 5, 3, 5},
		{"only unhealthy removed at min availability", 10, 8, 3, 0, 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment(10)
			d.Annotations = map[string]string{util.RevisionAnnotation: "2"}
			old := ownedRS(d, webTemplate("nginx:old"), tc.oldReplicas, 1, t0.Add(-time.Hour))
			old.Status.AvailableReplicas = tc.oldAvl
			newRS := ownedRS(d, d.Spec.Template, tc.newReplicas, 2, t0)
			newRS.Status.AvailableReplicas = tc.newAvl
			f := newFixture(t, d, old, newRS)
			acts := f.mustSync(d)
			got := *old.Spec.Replicas
			if up := rsUpdates(acts)[old.Name]; up != nil {
				got = *up.Spec.Replicas
			}
			if got != tc.wantOld {
				t.Fatalf("old scaled to %d, want %d (%s)", got, tc.wantOld, describe(acts))
			}
		})
	}
}
