// Package fieldloss checks that controllers running over caches trimmed by
// the controller manager's informer transform never lose a byte of the
// objects they write: every field of the stored object survives except the
// ones the controller legitimately changes.
package fieldloss

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replication"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// big is a 64 KiB annotation value, like a large last-applied configuration.
var big = strings.Repeat("x", 64<<10)

func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTransform(app.InformerTransform))
	dc, err := deployment.NewDeploymentController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c)
	if err != nil {
		t.Fatal(err)
	}
	dc.WithNamespaceInformer(factory.Core().V1().Namespaces())
	rsc := replicaset.NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, replicaset.BurstReplicas)
	rm := replication.NewReplicationManager(ctx, factory.Core().V1().Pods(), factory.Core().V1().ReplicationControllers(), c, replicaset.BurstReplicas)
	factory.Start(ctx.Done())
	go dc.Run(ctx, 2)
	go rsc.Run(ctx, 2)
	go rm.Run(ctx, 2)
}

// apply server-side applies obj as manager "fieldloss-test", so the stored
// object carries managedFields the caches drop.
func apply(t *testing.T, c clientset.Interface, resource, ns, name string, obj any) {
	t.Helper()
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	group := "apis/apps/v1"
	if resource == "replicationcontrollers" {
		group = "api/v1"
	}
	err = c.CoreV1().RESTClient().Patch(types.ApplyPatchType).AbsPath(group, "namespaces", ns, resource, name).
		Param("fieldManager", "fieldloss-test").Param("force", "true").Body(body).Do(context.Background()).Error()
	if err != nil {
		t.Fatalf("applying %s %s: %v", resource, name, err)
	}
}

// foreignManagedFields keeps the entries of managers other than the
// controllers (whose own entries change legitimately).
func foreignManagedFields(m metav1.ObjectMeta) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range m.ManagedFields {
		if e.Manager == "fieldloss-test" {
			e.Time = nil
			out = append(out, e)
		}
	}
	return out
}

// userAnnotations drops the annotations the Deployment controller maintains.
func userAnnotations(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if !strings.HasPrefix(k, "deployment.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

func sameMeta(t *testing.T, what string, before, after metav1.ObjectMeta) {
	t.Helper()
	for _, p := range metaLoss(before, after) {
		t.Errorf("%s: %s", what, p)
	}
}

// metaLoss lists what after lost or changed of before's metadata, leaving
// out what controllers legitimately change.
func metaLoss(before, after metav1.ObjectMeta) []string {
	var out []string
	if !reflect.DeepEqual(userAnnotations(before.Annotations), userAnnotations(after.Annotations)) {
		out = append(out, fmt.Sprintf("annotations changed: before %d keys, after %d keys", len(before.Annotations), len(after.Annotations)))
	}
	if len(after.Annotations[lastApplied]) != len(before.Annotations[lastApplied]) {
		out = append(out, fmt.Sprintf("%s lost (%d -> %d bytes)", lastApplied, len(before.Annotations[lastApplied]), len(after.Annotations[lastApplied])))
	}
	if !reflect.DeepEqual(before.Labels, after.Labels) {
		out = append(out, fmt.Sprintf("labels %v -> %v", before.Labels, after.Labels))
	}
	if b, a := foreignManagedFields(before), foreignManagedFields(after); !reflect.DeepEqual(b, a) {
		out = append(out, fmt.Sprintf("managedFields of other managers changed:\nbefore %+v\nafter  %+v", b, a))
	}
	if !reflect.DeepEqual(before.Finalizers, after.Finalizers) || !reflect.DeepEqual(before.OwnerReferences, after.OwnerReferences) {
		out = append(out, "finalizers or ownerReferences changed")
	}
	return out
}

// The check itself: a writer that updates an object read from a cache
// trimmed of its annotations loses them, and metaLoss says so.
func TestCheckCatchesTrimmedWriteBack(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-control")
	ctx := context.Background()
	cm := &v1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns, Annotations: map[string]string{lastApplied: big}}}
	body, _ := json.Marshal(cm)
	if err := c.CoreV1().RESTClient().Patch(types.ApplyPatchType).AbsPath("api/v1", "namespaces", ns, "configmaps", "cm").
		Param("fieldManager", "fieldloss-test").Body(body).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	before, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trimmed := before.DeepCopy()
	trimmed.Annotations = nil
	trimmed.ManagedFields = nil
	if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, trimmed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(metaLoss(before.ObjectMeta, after.ObjectMeta)) == 0 {
		t.Fatal("a write-back from a trimmed copy went unnoticed")
	}
}

// A Deployment carrying a large last-applied annotation and managedFields
// is rolled out, scaled and rolled out again: the Deployment controller
// writes the Deployment's status and updates its ReplicaSets (scale,
// annotations), the ReplicaSet controller writes their status. Nothing but
// the fields they own may change.
func TestDeploymentAndReplicaSetKeepEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss")
	runControllers(t, c)
	ctx := context.Background()
	framework.Kubelet{Client: c}.Run(ctx, ns)

	lbl := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"team": "a"},
			Annotations: map[string]string{lastApplied: big, "example.com/note": "keep me"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
	apply(t, c, "deployments", ns, "web", d)
	waitRolledOut(t, c, ns, 2)
	before, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsBefore := replicaSets(t, c, ns)

	// Scale: the Deployment controller updates the ReplicaSet's spec and
	// annotations from its cache.
	scaled := d.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](3)
	apply(t, c, "deployments", ns, "web", scaled)
	waitRolledOut(t, c, ns, 3)
	after, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Deployment after scaling", before.ObjectMeta, after.ObjectMeta)
	for name, rs := range replicaSets(t, c, ns) {
		if b, ok := rsBefore[name]; ok {
			sameMeta(t, "ReplicaSet "+name+" after scaling", b.ObjectMeta, rs.ObjectMeta)
			if !reflect.DeepEqual(b.Spec.Template, rs.Spec.Template) || !reflect.DeepEqual(b.Spec.Selector, rs.Spec.Selector) {
				t.Errorf("ReplicaSet %s: template or selector changed", name)
			}
		}
	}

	// A new template: the old ReplicaSet is scaled down by Update.
	rsBefore = replicaSets(t, c, ns)
	rolled := scaled.DeepCopy()
	rolled.Spec.Template.Spec.Containers[0].Image = "img:2"
	apply(t, c, "deployments", ns, "web", rolled)
	waitRolledOut(t, c, ns, 3)
	for name, rs := range replicaSets(t, c, ns) {
		if b, ok := rsBefore[name]; ok {
			sameMeta(t, "old ReplicaSet "+name+" after the rollout", b.ObjectMeta, rs.ObjectMeta)
		}
	}
}

// A ReplicationController carrying the same: its controller writes status.
func TestReplicationControllerKeepsEveryField(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "fieldloss-rc")
	runControllers(t, c)
	ctx := context.Background()
	framework.Kubelet{Client: c}.Run(ctx, ns)
	lbl := map[string]string{"app": "rc"}
	rc := &v1.ReplicationController{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ReplicationController"},
		ObjectMeta: metav1.ObjectMeta{Name: "rc", Namespace: ns,
			Annotations: map[string]string{lastApplied: big}},
		Spec: v1.ReplicationControllerSpec{
			Replicas: ptr.To[int32](2),
			Selector: lbl,
			Template: &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
	apply(t, c, "replicationcontrollers", ns, "rc", rc)
	before, err := c.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "2 ready replicas", func(ctx context.Context) (bool, error) {
		cur, err := c.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cur.Status.ReadyReplicas == 2 && cur.Status.AvailableReplicas == 2, nil
	})
	after, err := c.CoreV1().ReplicationControllers(ns).Get(ctx, "rc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "ReplicationController", before.ObjectMeta, after.ObjectMeta)
	if !reflect.DeepEqual(before.Spec, after.Spec) {
		t.Errorf("ReplicationController spec changed")
	}
}

func waitRolledOut(t *testing.T, c clientset.Interface, ns string, replicas int32) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, "the rollout", func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.Replicas == replicas && s.UpdatedReplicas == replicas && s.AvailableReplicas == replicas, nil
	})
}

func replicaSets(t *testing.T, c clientset.Interface, ns string) map[string]appsv1.ReplicaSet {
	t.Helper()
	l, err := c.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range l.Items {
		out[rs.Name] = rs
	}
	return out
}
