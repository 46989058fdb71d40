// Package fieldloss checks that controllers running over caches trimmed by
// the controller manager's informer transform never lose a byte of the
// objects they write: every field of the stored object survives except the
// ones the controller legitimately changes.
package fieldloss

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	factory := newFactory(c)
	dc, err := deployment.NewController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, deployment.Features{TerminatingReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	dc.WithNamespaceInformer(factory.Core().V1().Namespaces())
	rsc := replicaset.NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, replicaset.BurstReplicas, replicaset.Features{TerminatingReplicas: true, StaleControllerConsistency: true, PodDeletionCost: true})
	rsc.WithNamespaceInformer(factory.Core().V1().Namespaces())
	rm := replication.NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().ReplicationControllers(), c, replicaset.BurstReplicas, replication.Features{PodDeletionCost: true})
	rm.WithNamespaceInformer(factory.Core().V1().Namespaces())
	factory.Start(ctx.Done())
	go dc.Run(ctx, 2)
	go rsc.Run(ctx, 2)
	go rm.Run(ctx, 2)
}

// apply server-side applies obj as manager "fieldloss-test", so the stored
// object carries managedFields the caches drop.
func apply(t *testing.T, c clientset.Interface, resource, ns, name string, obj any) {
	t.Helper()
	group := "apis/apps/v1"
	if resource == "replicationcontrollers" {
		group = "api/v1"
	}
	applyAt(t, c, group+"/namespaces/"+ns+"/"+resource+"/"+name, obj, nil)
}

// applyAt server-side applies obj at path (as "api/v1/nodes/n") as manager
// "fieldloss-test" and decodes the stored object into into, unless nil.
func applyAt(t *testing.T, c clientset.Interface, path string, obj, into any) {
	t.Helper()
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := c.CoreV1().RESTClient().Patch(types.ApplyPatchType).AbsPath(path).
		Param("fieldManager", "fieldloss-test").Param("force", "true").Body(body).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("applying %s: %v", path, err)
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
	}
}

// annotateAt puts a large last-applied annotation, a user annotation and a
// user label (but on EndpointSlices, whose labels the controller owns) on an object a controller created, by server-side apply, before
// the controllers write it again.
func annotateAt(t *testing.T, c clientset.Interface, path, apiVersion, kind, ns, name string) {
	t.Helper()
	meta := map[string]any{"name": name,
		"annotations": map[string]string{lastApplied: big, "example.com/note": "keep me"}}
	if kind != "EndpointSlice" {
		meta["labels"] = map[string]string{"example.com/user": "yes"}
	}
	if ns != "" {
		meta["namespace"] = ns
	}
	applyAt(t, c, path, map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}, nil)
}

// foreignManagedFields keeps the entries of managers other than the
// controllers (whose own entries change legitimately), without the fields
// at paths the controllers take over.
func foreignManagedFields(m metav1.ObjectMeta, taken [][]string) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range m.ManagedFields {
		if e.Manager == "fieldloss-test" {
			e.Time = nil
			if e.FieldsV1 != nil && len(taken) > 0 {
				e.FieldsV1 = metav1.NewFieldsV1(string(withoutFields(e.FieldsV1.GetRawBytes(), taken)))
			}
			out = append(out, e)
		}
	}
	return out
}

// withoutFields drops paths from a FieldsV1 set, and the parents left empty.
func withoutFields(raw []byte, paths [][]string) []byte {
	var set map[string]any
	if err := json.Unmarshal(raw, &set); err != nil {
		return raw
	}
	for _, p := range paths {
		dropPath(set, p)
	}
	out, err := json.Marshal(set)
	if err != nil {
		return raw
	}
	return out
}

func dropPath(set map[string]any, path []string) {
	if len(path) == 0 {
		return
	}
	if len(path) == 1 {
		delete(set, path[0])
		return
	}
	child, ok := set[path[0]].(map[string]any)
	if !ok {
		return
	}
	dropPath(child, path[1:])
	if len(child) == 0 {
		delete(set, path[0])
	}
}

// owned is what a controller legitimately changes in an object's metadata.
type owned struct {
	// annotations and labels: keys, or prefixes ending in "/", it maintains.
	annotations, labels []string
	finalizers          bool
	ownerReferences     bool
	// fields: paths in other managers' managedFields (as "f:spec",
	// "f:taints") of atomic fields the controller writes whole, so takes
	// over.
	fields [][]string
}

// deploymentOwned is what the Deployment controller maintains.
var deploymentOwned = owned{annotations: []string{"deployment.kubernetes.io/"}}

func ownedKey(k string, keys []string) bool {
	for _, o := range keys {
		if k == o || (strings.HasSuffix(o, "/") && strings.HasPrefix(k, o)) {
			return true
		}
	}
	return false
}

// without drops the keys a controller maintains.
func without(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !ownedKey(k, keys) {
			out[k] = v
		}
	}
	return out
}

func sameMeta(t *testing.T, what string, before, after metav1.ObjectMeta, own ...owned) {
	t.Helper()
	for _, p := range metaLoss(before, after, own...) {
		t.Errorf("%s: %s", what, p)
	}
}

// metaLoss lists what after lost or changed of before's metadata, leaving
// out what controllers legitimately change (the Deployment controller's
// annotations, and whatever own lists).
func metaLoss(before, after metav1.ObjectMeta, own ...owned) []string {
	o := deploymentOwned
	for _, x := range own {
		o.annotations = append(o.annotations, x.annotations...)
		o.labels = append(o.labels, x.labels...)
		o.finalizers = o.finalizers || x.finalizers
		o.ownerReferences = o.ownerReferences || x.ownerReferences
		o.fields = append(o.fields, x.fields...)
	}
	var out []string
	if b, a := without(before.Annotations, o.annotations), without(after.Annotations, o.annotations); !reflect.DeepEqual(b, a) {
		out = append(out, fmt.Sprintf("annotations changed: before %d keys, after %d keys (%s)", len(b), len(a), diffKeys(b, a)))
	}
	if len(after.Annotations[lastApplied]) != len(before.Annotations[lastApplied]) {
		out = append(out, fmt.Sprintf("%s lost (%d -> %d bytes)", lastApplied, len(before.Annotations[lastApplied]), len(after.Annotations[lastApplied])))
	}
	if b, a := without(before.Labels, o.labels), without(after.Labels, o.labels); !reflect.DeepEqual(b, a) {
		out = append(out, fmt.Sprintf("labels %v -> %v", b, a))
	}
	if b, a := foreignManagedFields(before, o.fields), foreignManagedFields(after, o.fields); !reflect.DeepEqual(b, a) {
		out = append(out, fmt.Sprintf("managedFields of other managers changed:\nbefore %+v\nafter  %+v", b, a))
	}
	if !o.finalizers && !reflect.DeepEqual(before.Finalizers, after.Finalizers) {
		out = append(out, fmt.Sprintf("finalizers %v -> %v", before.Finalizers, after.Finalizers))
	}
	if !o.ownerReferences && !reflect.DeepEqual(before.OwnerReferences, after.OwnerReferences) {
		out = append(out, "ownerReferences changed")
	}
	return out
}

// diffKeys names the keys whose values differ (not the values: one may
// be 64 KiB).
func diffKeys(b, a map[string]string) string {
	var keys []string
	for k, v := range b {
		if av, ok := a[k]; !ok || av != v {
			keys = append(keys, k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, k)
		}
	}
	return strings.Join(keys, ", ")
}

// newFactory builds informers trimmed exactly like the controller
// manager's (cmd/kube-controller-manager/app).
func newFactory(c clientset.Interface) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTransform(transform))
}

// transform is app.InformerTransform. With FIELDLOSS_TRIM_LAST_APPLIED=1
// it also drops the last-applied annotation, to see which writers would
// lose it if the controller manager's transform did so (today: those that
// Update or UpdateStatus a cached copy).
func transform(obj interface{}) (interface{}, error) {
	obj, err := app.InformerTransform(obj)
	if err != nil || os.Getenv("FIELDLOSS_TRIM_LAST_APPLIED") != "1" {
		return obj, err
	}
	if a, ok := obj.(metav1.Object); ok {
		if an := a.GetAnnotations(); an[lastApplied] != "" {
			delete(an, lastApplied)
			a.SetAnnotations(an)
		}
	}
	return obj, nil
}

// testContext ends when the test does, stopping its controllers.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
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
