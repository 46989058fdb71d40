package deployment

import (
	"context"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// The deprecated rollback annotation: revision 0 means the previous one.
func TestRollbackAnnotation(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "2", apps.DeprecatedRollbackTo: "0"}
	oldTemplate := webTemplate("nginx:old")
	old := ownedRS(d, oldTemplate, 0, 1, t0.Add(-time.Hour))
	old.Annotations["kubernetes.io/change-cause"] = "first"
	cur := ownedRS(d, d.Spec.Template, 3, 2, t0)
	f := newFixture(t, d, old, cur)
	acts := f.mustSync(d)
	var updated *apps.Deployment
	for _, a := range acts {
		if a.GetVerb() == "update" && a.GetResource().Resource == "deployments" && a.GetSubresource() == "" {
			updated = a.(core.UpdateAction).GetObject().(*apps.Deployment)
		}
	}
	if updated == nil {
		t.Fatalf("no spec update: %s", describe(acts))
	}
	if _, ok := updated.Annotations[apps.DeprecatedRollbackTo]; ok {
		t.Error("rollback request not cleared")
	}
	if updated.Spec.Template.Spec.Containers[0].Image != "nginx:old" || updated.Spec.Template.Labels[apps.DefaultDeploymentUniqueLabelKey] != "" {
		t.Errorf("template not rolled back: %+v", updated.Spec.Template)
	}
	if updated.Annotations["kubernetes.io/change-cause"] != "first" || updated.Annotations[util.RevisionAnnotation] != "2" {
		t.Errorf("annotations %v", updated.Annotations)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != `Normal DeploymentRollback Rolled back deployment "web" to revision 1` {
		t.Errorf("events %q", ev)
	}
}

func TestRollbackRevisionNotFound(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1", apps.DeprecatedRollbackTo: "9"}
	cur := ownedRS(d, d.Spec.Template, 3, 1, t0)
	f := newFixture(t, d, cur)
	f.mustSync(d)
	if ev := f.events(); len(ev) != 1 || ev[0] != "Warning DeploymentRollbackRevisionNotFound Unable to find the revision to rollback to." {
		t.Errorf("events %q", ev)
	}
}

// Run wires informers, handlers and workers: a new Deployment gets its
// ReplicaSet through the real event path.
func TestRunCreatesReplicaSet(t *testing.T) {
	d := newDeployment(3)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	f.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		f.dc.Run(ctx, 2)
		close(done)
	}()
	if _, err := f.client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "ReplicaSet never created", func(ctx context.Context) (bool, error) {
		_, err := f.client.AppsV1().ReplicaSets("default").Get(ctx, "web-5fc9f4bf66", metav1.GetOptions{})
		return err == nil, nil
	})
	cancel()
	<-done
	f.factory.Shutdown()
}
