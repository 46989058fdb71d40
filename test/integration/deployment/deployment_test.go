// Package deployment tests the Deployment and ReplicaSet controllers
// together against a real apiserver.
package deployment

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runControllers runs the Deployment and ReplicaSet controllers in-process
// until the test ends.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	dc, err := deployment.NewController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, deployment.Features{TerminatingReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	rsc := replicaset.NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, replicaset.BurstReplicas, replicaset.Features{TerminatingReplicas: true, StaleControllerConsistency: true, PodDeletionCost: true})
	factory.Start(ctx.Done())
	go dc.Run(ctx, 5)
	go rsc.Run(ctx, 5)
}

// startTest gives a test a fresh namespace with both controllers running
// and, with kubelet, every new pod marked Running and Ready; ctx ends with
// the test.
func startTest(t *testing.T, nsPrefix string, kubelet bool) (clientset.Interface, string, context.Context) {
	t.Helper()
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, nsPrefix)
	runControllers(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if kubelet {
		framework.Kubelet{Client: c}.Run(ctx, ns)
	}
	return c, ns, ctx
}

// kubectlDeployment is what `kubectl create deployment <name> --image=nginx
// --replicas=N` sends.
func kubectlDeployment(name string, replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}},
			},
		},
	}
}

func replicaSetsOf(ctx context.Context, c clientset.Interface, ns string, d *appsv1.Deployment) ([]appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	l, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func podsOf(ctx context.Context, c clientset.Interface, ns string, sel map[string]string) ([]v1.Pod, error) {
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// The same template gives the same ReplicaSet name and annotations as
// upstream v1.37.2 (golden values from ../shared/reference/golden.md), and
// the Deployment converges to Available.
func TestDeploymentGoldenNameAndConvergence(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-golden", true)

	d, err := c.AppsV1().Deployments(ns).Create(ctx, kubectlDeployment("web", 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "deployment to be available", func(ctx context.Context) (bool, error) {
		d, err = c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3 && d.Status.Replicas == 3, nil
	})

	rs, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "web-5fc9f4bf66", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ReplicaSet web-5fc9f4bf66 (upstream's name for this template): %v", err)
	}
	want := map[string]string{
		"deployment.kubernetes.io/revision":         "1",
		"deployment.kubernetes.io/desired-replicas": "3",
		"deployment.kubernetes.io/max-replicas":     "4",
	}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("ReplicaSet annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if rs.Labels["pod-template-hash"] != "5fc9f4bf66" {
		t.Errorf("pod-template-hash label = %q", rs.Labels["pod-template-hash"])
	}
	if d.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Errorf("Deployment revision annotation = %q", d.Annotations["deployment.kubernetes.io/revision"])
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" {
		t.Errorf("ReplicaSet controller ref = %+v", ref)
	}
	conds := map[appsv1.DeploymentConditionType]appsv1.DeploymentCondition{}
	for _, cond := range d.Status.Conditions {
		conds[cond.Type] = cond
	}
	if cond := conds[appsv1.DeploymentAvailable]; cond.Status != v1.ConditionTrue || cond.Reason != "MinimumReplicasAvailable" {
		t.Errorf("Available condition = %+v", cond)
	}
	if cond := conds[appsv1.DeploymentProgressing]; cond.Status != v1.ConditionTrue || cond.Reason != "NewReplicaSetAvailable" {
		t.Errorf("Progressing condition = %+v", cond)
	}
	pods, err := podsOf(ctx, c, ns, map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		if p.GenerateName != "web-5fc9f4bf66-" || p.Labels["pod-template-hash"] != "5fc9f4bf66" {
			t.Errorf("pod %s: generateName %q labels %v", p.Name, p.GenerateName, p.Labels)
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Name != rs.Name {
			t.Errorf("pod %s controller ref = %+v", p.Name, ref)
		}
	}
}

// A template change rolls out a new ReplicaSet and scales the old one to
// zero, never going below replicas - maxUnavailable available pods.
func TestDeploymentRollingUpdate(t *testing.T) {
	c, ns, ctx := startTest(t, "deploy-rolling", true)

	d, err := c.AppsV1().Deployments(ns).Create(ctx, kubectlDeployment("roll", 4), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitComplete := func(gen int64) {
		framework.Eventually(t, 90*time.Second, fmt.Sprintf("rollout of generation %d", gen), func(ctx context.Context) (bool, error) {
			d, err = c.AppsV1().Deployments(ns).Get(ctx, "roll", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := d.Status
			return s.ObservedGeneration >= gen && s.UpdatedReplicas == 4 && s.Replicas == 4 && s.AvailableReplicas == 4, nil
		})
	}
	waitComplete(d.Generation)

	// The controller writes status concurrently, so patch rather than update.
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`)
	d, err = c.AppsV1().Deployments(ns).Patch(ctx, "roll", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitComplete(d.Generation)

	rss, err := replicaSetsOf(ctx, c, ns, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(rss) != 2 {
		t.Fatalf("%d ReplicaSets after one update, want 2", len(rss))
	}
	for _, rs := range rss {
		img := rs.Spec.Template.Spec.Containers[0].Image
		switch {
		case img == "nginx:1.27" && *rs.Spec.Replicas == 4 && rs.Annotations["deployment.kubernetes.io/revision"] == "2":
		case img == "nginx" && *rs.Spec.Replicas == 0:
		default:
			t.Errorf("unexpected ReplicaSet %s image %s replicas %d revision %s", rs.Name, img, *rs.Spec.Replicas, rs.Annotations["deployment.kubernetes.io/revision"])
		}
	}
	if d.Annotations["deployment.kubernetes.io/revision"] != "2" {
		t.Errorf("Deployment revision = %q, want 2", d.Annotations["deployment.kubernetes.io/revision"])
	}
}

// A bare ReplicaSet keeps its pod count, adopts matching orphans and
// releases pods whose labels stop matching.
func TestReplicaSetScaleAdoptRelease(t *testing.T) {
	c, ns, ctx := startTest(t, "rs-basic", false)

	lbl := map[string]string{"app": "rs"}
	orphan := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: lbl},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := func(ctx context.Context) (int, bool, error) {
		pods, err := podsOf(ctx, c, ns, lbl)
		if err != nil {
			return 0, false, err
		}
		n, orphanAdopted := 0, false
		for _, p := range pods {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == rs.UID && p.DeletionTimestamp == nil {
				n++
				if p.Name == "orphan" {
					orphanAdopted = true
				}
			}
		}
		return n, orphanAdopted, nil
	}
	framework.Eventually(t, 30*time.Second, "3 owned pods including the adopted orphan", func(ctx context.Context) (bool, error) {
		n, adopted, err := owned(ctx)
		return n == 3 && adopted, err
	})

	// Relabel the orphan: it is released and replaced.
	relabel := []byte(`{"metadata":{"labels":{"app":"elsewhere"}}}`)
	if _, err := c.CoreV1().Pods(ns).Patch(ctx, "orphan", types.MergePatchType, relabel, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "orphan released", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(p) == nil, err
	})
	framework.Eventually(t, 30*time.Second, "replacement pod", func(ctx context.Context) (bool, error) {
		n, _, err := owned(ctx)
		return n == 3, err
	})

	// Scale down to 1.
	scale := []byte(`{"spec":{"replicas":1}}`)
	if _, err := c.AppsV1().ReplicaSets(ns).Patch(ctx, "rs", types.MergePatchType, scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "scale down to 1", func(ctx context.Context) (bool, error) {
		n, _, err := owned(ctx)
		if err != nil || n != 1 {
			return false, err
		}
		got, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "rs", metav1.GetOptions{})
		return err == nil && got.Status.Replicas == 1 && got.Status.ObservedGeneration == got.Generation, err
	})
}
