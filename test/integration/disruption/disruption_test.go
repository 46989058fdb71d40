// Package disruption tests the PodDisruptionBudget controller against a
// real apiserver, including the eviction subresource that consumes the
// status it writes.
package disruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/disruption"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

var appLabels = map[string]string{"app": "guarded"}

// startTest gives a test a fresh namespace and a disruption controller
// running in-process until the test ends. staleTimeout is how long a
// DisruptionTarget condition may stay before it is reset.
func startTest(t *testing.T, nsPrefix string, staleTimeout time.Duration) (clientset.Interface, string, context.Context) {
	t.Helper()
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, nsPrefix)

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(c.Discovery()))
	scaleClient, err := scale.NewForConfig(cp.Config, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(c.Discovery()))
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	dc := disruption.NewControllerInternal(ctx,
		factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets(),
		c, mapper, scaleClient, c.Discovery(), clock.RealClock{}, staleTimeout)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { dc.Run(ctx, 1); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return c, ns, ctx
}

// createReadyPod creates a pod with the guarded labels (and owners) and
// marks it Running and Ready as a kubelet would.
func createReadyPod(ctx context.Context, t *testing.T, c clientset.Interface, ns, name string, owners ...metav1.OwnerReference) *v1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: appLabels, OwnerReferences: owners},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err = framework.Kubelet{Client: c}.MarkRunningReady(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func createPDB(ctx context.Context, t *testing.T, c clientset.Interface, ns string, minAvailable, maxUnavailable *intstr.IntOrString) {
	t.Helper()
	_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:   minAvailable,
			MaxUnavailable: maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: appLabels},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

type counts struct{ allowed, current, desired, expected int32 }

// waitStatus waits until the budget's status, for its current generation,
// has the given counters and returns it.
func waitStatus(t *testing.T, c clientset.Interface, ns string, want counts) *policyv1.PodDisruptionBudget {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("PDB status %+v", want), func(ctx context.Context) (bool, error) {
		var err error
		pdb, err = c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := pdb.Status
		got := counts{st.DisruptionsAllowed, st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods}
		return st.ObservedGeneration == pdb.Generation && got == want, nil
	})
	return pdb
}

func expectCondition(t *testing.T, pdb *policyv1.PodDisruptionBudget, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || cond.Status != status || cond.Reason != reason || cond.ObservedGeneration != pdb.Generation {
		t.Fatalf("DisruptionAllowed condition = %+v, want %s/%s at generation %d", cond, status, reason, pdb.Generation)
	}
	return cond
}

// waitEvent waits for an event with reason about the budget and returns it.
func waitEvent(t *testing.T, c clientset.Interface, ns, reason string) v1.Event {
	t.Helper()
	var ev v1.Event
	framework.Eventually(t, 30*time.Second, "event "+reason, func(ctx context.Context) (bool, error) {
		l, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pdb,reason=" + reason})
		if err != nil || len(l.Items) == 0 {
			return false, err
		}
		ev = l.Items[0]
		return true, nil
	})
	return ev
}

func newReplicaSet(ctx context.Context, t *testing.T, c clientset.Interface, ns string, replicas int32) *appsv1.ReplicaSet {
	t.Helper()
	// No ReplicaSet controller runs here: the pods are made by the test.
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rs"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: appLabels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: appLabels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// An integer minAvailable over ready pods without controllers: every
// selected pod is expected, disruptions beyond minAvailable are allowed.
func TestMinAvailableIntegerOverReadyPods(t *testing.T) {
	c, ns, ctx := startTest(t, "pdb-min-int", time.Minute)
	for i := range 3 {
		createReadyPod(ctx, t, c, ns, fmt.Sprintf("p%d", i))
	}
	createPDB(ctx, t, c, ns, ptr.To(intstr.FromInt32(2)), nil)
	pdb := waitStatus(t, c, ns, counts{allowed: 1, current: 3, desired: 2, expected: 3})
	expectCondition(t, pdb, metav1.ConditionTrue, policyv1.SufficientPodsReason)
	if len(pdb.Status.DisruptedPods) != 0 {
		t.Fatalf("disruptedPods = %v", pdb.Status.DisruptedPods)
	}

	// A spec change is observed with the new generation.
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(3))
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb = waitStatus(t, c, ns, counts{allowed: 0, current: 3, desired: 3, expected: 3})
	expectCondition(t, pdb, metav1.ConditionFalse, policyv1.InsufficientPodsReason)
}

// Pods going unready lower currentHealthy and the allowance; ready again
// restores them.
func TestUnreadyPodsLowerHealthy(t *testing.T) {
	c, ns, ctx := startTest(t, "pdb-unready", time.Minute)
	var pods []*v1.Pod
	for i := range 3 {
		pods = append(pods, createReadyPod(ctx, t, c, ns, fmt.Sprintf("p%d", i)))
	}
	createPDB(ctx, t, c, ns, ptr.To(intstr.FromInt32(2)), nil)
	waitStatus(t, c, ns, counts{allowed: 1, current: 3, desired: 2, expected: 3})

	p := pods[0].DeepCopy()
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			p.Status.Conditions[i].Status = v1.ConditionFalse
		}
	}
	p, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb := waitStatus(t, c, ns, counts{allowed: 0, current: 2, desired: 2, expected: 3})
	expectCondition(t, pdb, metav1.ConditionFalse, policyv1.InsufficientPodsReason)

	if _, err := (framework.Kubelet{Client: c}).MarkRunningReady(ctx, p); err != nil {
		t.Fatal(err)
	}
	pdb = waitStatus(t, c, ns, counts{allowed: 1, current: 3, desired: 2, expected: 3})
	expectCondition(t, pdb, metav1.ConditionTrue, policyv1.SufficientPodsReason)
}

// maxUnavailable counts the ReplicaSet's replicas, not the pods that exist;
// a new scale is picked up at the budget's next sync (there is no watch on
// workloads, as upstream).
func TestMaxUnavailableOverReplicaSet(t *testing.T) {
	c, ns, ctx := startTest(t, "pdb-max-rs", time.Minute)
	rs := newReplicaSet(ctx, t, c, ns, 4)
	owner := *metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
	createReadyPod(ctx, t, c, ns, "p0", owner)
	p1 := createReadyPod(ctx, t, c, ns, "p1", owner)
	createPDB(ctx, t, c, ns, nil, ptr.To(intstr.FromInt32(1)))
	pdb := waitStatus(t, c, ns, counts{allowed: 0, current: 2, desired: 3, expected: 4})
	expectCondition(t, pdb, metav1.ConditionFalse, policyv1.InsufficientPodsReason)

	if _, err := c.AppsV1().ReplicaSets(ns).Patch(ctx, "rs", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Any pod event makes the budget sync again. The ReplicaSet informer
	// may lag behind the pod one, so keep touching the pod until the new
	// scale shows.
	touches := 0
	framework.Eventually(t, 30*time.Second, "expectedPods to follow the scale", func(ctx context.Context) (bool, error) {
		touches++
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"touch":"%d"}}}`, touches)
		if _, err := c.CoreV1().Pods(ns).Patch(ctx, p1.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return false, err
		}
		pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb", metav1.GetOptions{})
		return err == nil && pdb.Status.ExpectedPods == 2, err
	})
	pdb = waitStatus(t, c, ns, counts{allowed: 1, current: 2, desired: 1, expected: 2})
	expectCondition(t, pdb, metav1.ConditionTrue, policyv1.SufficientPodsReason)
}

// Percentages are taken of the controller's scale and rounded up.
func TestPercentages(t *testing.T) {
	cases := []struct {
		name                   string
		minAvailable, maxUnav  *intstr.IntOrString
		replicas               int32
		want                   counts
		wantStatus, wantReason string
	}{
		// 50% of 5 rounds up to 3: 4 ready pods allow 1.
		{name: "minAvailable", minAvailable: ptr.To(intstr.FromString("50%")), replicas: 5,
			want: counts{allowed: 1, current: 4, desired: 3, expected: 5}},
		// 30% of 5 rounds up to 2 unavailable: 3 must stay, 4 ready allow 1.
		{name: "maxUnavailable", maxUnav: ptr.To(intstr.FromString("30%")), replicas: 5,
			want: counts{allowed: 1, current: 4, desired: 3, expected: 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ns, ctx := startTest(t, "pdb-percent", time.Minute)
			rs := newReplicaSet(ctx, t, c, ns, tc.replicas)
			owner := *metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
			for i := range 4 {
				createReadyPod(ctx, t, c, ns, fmt.Sprintf("p%d", i), owner)
			}
			createPDB(ctx, t, c, ns, tc.minAvailable, tc.maxUnav)
			pdb := waitStatus(t, c, ns, tc.want)
			expectCondition(t, pdb, metav1.ConditionTrue, policyv1.SufficientPodsReason)
		})
	}
}

// evict asks the eviction subresource to evict name.
func evict(ctx context.Context, c clientset.Interface, ns, name string) error {
	return c.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
}

// The apiserver grants evictions from the status this controller writes:
// allowed while disruptionsAllowed > 0, refused with 429 and a
// DisruptionBudget cause at 0. The eviction's disruptedPods entry is
// cleared once the pod is gone.
func TestEvictionFollowsStatus(t *testing.T) {
	c, ns, ctx := startTest(t, "pdb-evict", time.Minute)
	for i := range 3 {
		createReadyPod(ctx, t, c, ns, fmt.Sprintf("p%d", i))
	}
	createPDB(ctx, t, c, ns, ptr.To(intstr.FromInt32(2)), nil)
	waitStatus(t, c, ns, counts{allowed: 1, current: 3, desired: 2, expected: 3})

	if err := evict(ctx, c, ns, "p0"); err != nil {
		t.Fatalf("eviction with disruptionsAllowed=1: %v", err)
	}
	// The unscheduled pod is deleted at once; the controller recounts.
	pdb := waitStatus(t, c, ns, counts{allowed: 0, current: 2, desired: 2, expected: 2})
	if len(pdb.Status.DisruptedPods) != 0 {
		t.Fatalf("disruptedPods not cleared: %v", pdb.Status.DisruptedPods)
	}
	expectCondition(t, pdb, metav1.ConditionFalse, policyv1.InsufficientPodsReason)

	err := evict(ctx, c, ns, "p1")
	if !apierrors.IsTooManyRequests(err) || !apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause) {
		t.Fatalf("eviction with disruptionsAllowed=0: %v, want 429 with a DisruptionBudget cause", err)
	}
	if _, err := c.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{}); err != nil {
		t.Fatalf("refused eviction removed the pod: %v", err)
	}

	// A new ready pod gives the allowance back.
	createReadyPod(ctx, t, c, ns, "p3")
	waitStatus(t, c, ns, counts{allowed: 1, current: 3, desired: 2, expected: 3})
	if err := evict(ctx, c, ns, "p1"); err != nil {
		t.Fatalf("eviction after recovery: %v", err)
	}
}

// Pods without a controller cannot be counted for a percentage or a
// maxUnavailable: as upstream the budget is not failed (no SyncFailed) but
// allows nothing, and the user gets an UnmanagedPods warning.
func TestUnmanagedPods(t *testing.T) {
	cases := map[string]struct{ minAvailable, maxUnavailable *intstr.IntOrString }{
		"maxUnavailable": {maxUnavailable: ptr.To(intstr.FromInt32(1))},
		"percentage":     {minAvailable: ptr.To(intstr.FromString("50%"))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, ns, ctx := startTest(t, "pdb-unmanaged", time.Minute)
			createReadyPod(ctx, t, c, ns, "p0")
			createReadyPod(ctx, t, c, ns, "p1")
			createPDB(ctx, t, c, ns, tc.minAvailable, tc.maxUnavailable)
			pdb := waitStatus(t, c, ns, counts{allowed: 0, current: 2, desired: 0, expected: 0})
			expectCondition(t, pdb, metav1.ConditionFalse, policyv1.InsufficientPodsReason)
			ev := waitEvent(t, c, ns, "UnmanagedPods")
			if ev.Type != v1.EventTypeWarning || ev.Source.Component != "controllermanager" || ev.InvolvedObject.Kind != "PodDisruptionBudget" {
				t.Fatalf("event = %+v", ev)
			}
			if err := evict(ctx, c, ns, "p0"); !apierrors.IsTooManyRequests(err) {
				t.Fatalf("eviction: %v, want 429", err)
			}
		})
	}
}

// A controller that cannot be resolved makes the sync fail: the budget
// fails safe with DisruptionAllowed=False/SyncFailed.
func TestUnresolvableControllerFailsSafe(t *testing.T) {
	c, ns, ctx := startTest(t, "pdb-syncfailed", time.Minute)
	createReadyPod(ctx, t, c, ns, "p0", metav1.OwnerReference{
		APIVersion: "nothing.example.com/v1", Kind: "Nothing", Name: "n", UID: "1234", Controller: ptr.To(true),
	})
	createPDB(ctx, t, c, ns, nil, ptr.To(intstr.FromInt32(1)))
	var pdb *policyv1.PodDisruptionBudget
	framework.Eventually(t, 30*time.Second, "SyncFailed condition", func(ctx context.Context) (bool, error) {
		var err error
		pdb, err = c.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
		return cond != nil && cond.Reason == policyv1.SyncFailedReason, nil
	})
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond.Status != metav1.ConditionFalse || cond.Message == "" || pdb.Status.DisruptionsAllowed != 0 {
		t.Fatalf("status = %+v", pdb.Status)
	}
	waitEvent(t, c, ns, "CalculateExpectedPodCountFailed")
}

// scaleCRD creates a namespaced custom resource type with a scale
// subresource (spec.replicas) and deletes it when the test ends.
func scaleCRD(ctx context.Context, t *testing.T, dyn dynamic.Interface, disc discovery.DiscoveryInterface) schema.GroupVersionResource {
	t.Helper()
	group := fmt.Sprintf("pdb%d.example.com", time.Now().UnixNano()%1000000)
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "scalables." + group},
		"spec": map[string]interface{}{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": "scalables", "singular": "scalable", "kind": "Scalable", "listKind": "ScalableList"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
				"subresources": map[string]interface{}{"scale": map[string]interface{}{
					"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(framework.CRDGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(framework.CRDGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "scalables"}
	// Served, and listed by discovery with its scale subresource: the
	// controller maps the kind and checks the subresource through it.
	framework.Eventually(t, time.Minute, "CRD to be served and discovered", func(ctx context.Context) (bool, error) {
		if _, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
			return false, nil
		}
		l, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
		if err != nil {
			return false, nil
		}
		for _, r := range l.APIResources {
			if r.Name == "scalables/scale" {
				return true, nil
			}
		}
		return false, nil
	})
	return gvr
}

// A custom controller implementing the scale subresource is counted
// through it.
func TestCustomResourceWithScaleSubresource(t *testing.T) {
	cp := framework.Shared(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The type exists before the controller's RESTMapper first looks.
	gvr := scaleCRD(context.Background(), t, dyn, cp.Client(t).Discovery())
	c, ns, ctx := startTest(t, "pdb-scale", time.Minute)

	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "Scalable",
		"metadata":   map[string]interface{}{"name": "workload"},
		"spec":       map[string]interface{}{"replicas": int64(4)},
	}}
	created, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: gvr.GroupVersion().String(), Kind: "Scalable", Name: "workload", UID: created.GetUID(), Controller: ptr.To(true)}
	for i := range 4 {
		createReadyPod(ctx, t, c, ns, fmt.Sprintf("p%d", i), owner)
	}
	createPDB(ctx, t, c, ns, nil, ptr.To(intstr.FromInt32(2)))
	pdb := waitStatus(t, c, ns, counts{allowed: 2, current: 4, desired: 2, expected: 4})
	expectCondition(t, pdb, metav1.ConditionTrue, policyv1.SufficientPodsReason)
}

// A True DisruptionTarget condition left on a pod that was never deleted is
// set back to False after the timeout; the kubelet's, and those of finished
// pods, are left alone.
func TestStaleDisruptionTarget(t *testing.T) {
	const timeout = 2 * time.Second
	c, ns, ctx := startTest(t, "pdb-stale", timeout)

	withCondition := func(name string, phase v1.PodPhase, reason string) {
		t.Helper()
		pod, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			// Scheduled, so a delete would be graceful and leave the pod.
			Spec: v1.PodSpec{NodeName: "node", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status.Phase = phase
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{
			Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Now(),
		})
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The pods to be left alone come first, so the controller has
	// judged them by the time it resets the stale one.
	withCondition("by-kubelet", v1.PodFailed, v1.PodReasonTerminationByKubelet)
	withCondition("failed", v1.PodFailed, "EvictionByEvictionAPI")
	withCondition("stale", v1.PodRunning, "EvictionByEvictionAPI")

	condition := func(ctx context.Context, name string) (*v1.PodCondition, error) {
		pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == v1.DisruptionTarget {
				return &pod.Status.Conditions[i], nil
			}
		}
		return nil, fmt.Errorf("pod %s has no DisruptionTarget condition", name)
	}
	framework.Eventually(t, 30*time.Second, "stale condition reset", func(ctx context.Context) (bool, error) {
		cond, err := condition(ctx, "stale")
		return err == nil && cond.Status == v1.ConditionFalse, err
	})
	cond, _ := condition(ctx, "stale")
	if cond.Reason != "" || cond.Message != "" || cond.ObservedGeneration != 1 {
		t.Fatalf("reset condition = %+v, want no reason/message and observedGeneration 1", cond)
	}
	for _, name := range []string{"by-kubelet", "failed"} {
		cond, err := condition(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if cond.Status != v1.ConditionTrue {
			t.Errorf("pod %s: condition reset: %+v", name, cond)
		}
	}
}

// Unready pods are judged by the apiserver from currentHealthy and
// desiredHealthy (the controller itself does not read
// unhealthyPodEvictionPolicy): with IfHealthyBudget (the default) one may
// go only while the budget is met; AlwaysAllow lets it go regardless.
func TestUnhealthyPodEvictionPolicy(t *testing.T) {
	cases := map[string]struct {
		policy       *policyv1.UnhealthyPodEvictionPolicyType
		minAvailable int32
		want         counts
		allowUnready bool
	}{
		"IfHealthyBudget, budget met": {
			minAvailable: 2, want: counts{allowed: 0, current: 2, desired: 2, expected: 3}, allowUnready: true,
		},
		"IfHealthyBudget, budget not met": {
			minAvailable: 3, want: counts{allowed: 0, current: 2, desired: 3, expected: 3},
		},
		"AlwaysAllow, budget not met": {
			policy: ptr.To(policyv1.AlwaysAllow), minAvailable: 3, want: counts{allowed: 0, current: 2, desired: 3, expected: 3}, allowUnready: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, ns, ctx := startTest(t, "pdb-unhealthy", time.Minute)
			createReadyPod(ctx, t, c, ns, "ready-0")
			createReadyPod(ctx, t, c, ns, "ready-1")
			unready := createReadyPod(ctx, t, c, ns, "unready")
			for i := range unready.Status.Conditions {
				if unready.Status.Conditions[i].Type == v1.PodReady {
					unready.Status.Conditions[i].Status = v1.ConditionFalse
				}
			}
			if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, unready, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: "pdb"},
				Spec: policyv1.PodDisruptionBudgetSpec{
					MinAvailable:               ptr.To(intstr.FromInt32(tc.minAvailable)),
					Selector:                   &metav1.LabelSelector{MatchLabels: appLabels},
					UnhealthyPodEvictionPolicy: tc.policy,
				},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, c, ns, tc.want)

			if err := evict(ctx, c, ns, "ready-0"); !apierrors.IsTooManyRequests(err) {
				t.Fatalf("evicting a ready pod: %v, want 429", err)
			}
			err = evict(ctx, c, ns, "unready")
			if tc.allowUnready && err != nil {
				t.Fatalf("evicting the unready pod: %v", err)
			}
			if !tc.allowUnready && !apierrors.IsTooManyRequests(err) {
				t.Fatalf("evicting the unready pod: %v, want 429", err)
			}
		})
	}
}
