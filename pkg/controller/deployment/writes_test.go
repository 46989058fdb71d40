package deployment

import (
	"fmt"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// From nothing to 10 ready pods, status is written once per observable
// change and never twice in one pass (upstream: ~18 attempts).
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	d := newDeployment(10)
	f := newFixture(t, d)
	total := 0
	count := func(step string) {
		acts := f.mustSync(d)
		n := len(statusUpdates(acts))
		if n > 1 {
			t.Fatalf("%s: %d status writes in one pass: %s", step, n, describe(acts))
		}
		total += n
		// The informer delivers what was written.
		d = f.refreshDeployment()
	}
	count("create")
	for ready := int32(0); ready <= 10; ready++ {
		d = f.settle(func(*apps.ReplicaSet) int32 { return ready })
		count("ready")
		// The same state again: nothing to write.
		before := total
		count("again")
		if total != before {
			t.Fatalf("ready=%d: rewrote an unchanged status", ready)
		}
	}
	d = f.refreshDeployment()
	if d.Status.ReadyReplicas != 10 || d.Status.AvailableReplicas != 10 {
		t.Fatalf("status %+v", d.Status)
	}
	// create + ready 0..10 (settle at 0 adds replicas=10) = at most 12.
	if total > 12 {
		t.Errorf("%d status writes", total)
	}
	t.Logf("%d status writes to reach 10 ready replicas", total)
}

// A new ReplicaSet whose annotations or minReadySeconds lag is updated once
// per pass, not once per lookup (upstream updates it twice, the second time
// with a stale resourceVersion).
func TestExistingNewReplicaSetUpdatedOnce(t *testing.T) {
	d := newDeployment(3)
	d.Spec.MinReadySeconds = 5
	d.Annotations = map[string]string{"team": "a"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	f := newFixture(t, d, rs)
	acts := f.mustSync(d)
	ups := rsUpdates(acts)
	n := 0
	for _, a := range acts {
		if a.GetVerb() == "update" && a.GetResource().Resource == "replicasets" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("ReplicaSet updates: %s", describe(acts))
	}
	got := ups[rs.Name]
	if got.Spec.MinReadySeconds != 5 || got.Annotations["team"] != "a" || got.Annotations[util.RevisionAnnotation] != "1" {
		t.Errorf("update %+v %v", got.Spec.MinReadySeconds, got.Annotations)
	}
	st := statusUpdates(acts)
	if len(st) != 1 || st[0].Annotations[util.RevisionAnnotation] != "1" {
		t.Fatalf("status writes: %s", describe(acts))
	}
}

// A pass that fails after changing the status still writes it, as upstream
// (which writes such changes as soon as it makes them).
func TestPendingStatusFlushedOnError(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	d.Status.Conditions = []apps.DeploymentCondition{*util.NewDeploymentCondition(t0, apps.DeploymentProgressing, v1.ConditionUnknown, util.PausedDeployReason, "Deployment is paused")}
	rs := ownedRS(d, d.Spec.Template, 1, 1, t0)
	f := newFixture(t, d, rs)
	f.client.PrependReactor("update", "replicasets", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("boom")
	})
	acts, err := f.sync(d)
	if err == nil {
		t.Fatal("expected the update error")
	}
	st := statusUpdates(acts)
	if len(st) != 1 {
		t.Fatalf("status not flushed: %s", describe(acts))
	}
	expectCondition(t, st[0].Status, apps.DeploymentProgressing, v1.ConditionUnknown, util.ResumedDeployReason, "Deployment is resumed")
}

func TestTerminatingReplicasGate(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.Status.TerminatingReplicas = ptr.To[int32](2)
	f := newFixture(t, d, rs)
	st := statusUpdates(f.mustSync(d))
	if len(st) != 1 || st[0].Status.TerminatingReplicas == nil || *st[0].Status.TerminatingReplicas != 2 {
		t.Fatalf("terminatingReplicas not reported: %+v", st)
	}
	f.dc.terminatingReplicas = func() bool { return false }
	st = statusUpdates(f.mustSync(d))
	if len(st) != 1 || st[0].Status.TerminatingReplicas != nil {
		t.Fatalf("terminatingReplicas reported with the gate off: %+v", st)
	}
}
