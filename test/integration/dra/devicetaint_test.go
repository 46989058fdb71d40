package dra

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// createSlice publishes devices dev-0 and dev-1 of driver (cluster
// scoped, removed when the test ends); taints go onto dev-0.
func createSlice(t *testing.T, c clientset.Interface, driver string, taints ...resourceapi.DeviceTaint) *resourceapi.ResourceSlice {
	t.Helper()
	slice, err := c.ResourceV1().ResourceSlices().Create(context.Background(), &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: driver + "-"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: poolName, ResourceSliceCount: 1},
			NodeName: ptr.To(nodeName),
			Devices:  []resourceapi.Device{{Name: "dev-0", Taints: taints}, {Name: "dev-1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
	})
	return slice
}

// scheduledPodWithClaim creates a claim and a pod on the node using it,
// and allocates the device to the claim with the given tolerations.
func scheduledPodWithClaim(t *testing.T, c clientset.Interface, ns, name, driver, device string, tolerations ...resourceapi.DeviceToleration) *v1.Pod {
	t.Helper()
	if _, err := c.ResourceV1().ResourceClaims(ns).Create(context.Background(), &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       claimSpec(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := newPod(name, name)
	spec.Spec.NodeName = nodeName
	pod := createPod(t, c, ns, spec)
	allocate(t, c, ns, name, driver, device, tolerations, pod)
	return pod
}

// evicted reports whether the pod is being deleted with the condition the
// controller sets before deleting.
func evicted(ctx context.Context, c clientset.Interface, ns, name string) (bool, error) {
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if pod.DeletionTimestamp == nil {
		return false, nil
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == v1.DisruptionTarget && cond.Status == v1.ConditionTrue &&
			cond.Reason == "DeletionByDeviceTaintManager" && cond.Message == "Device Taint manager: deleting due to NoExecute taint" {
			return true, nil
		}
	}
	return false, nil
}

func noExecute(key string) resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: key, Value: "true", Effect: resourceapi.DeviceTaintEffectNoExecute}
}

func hasEvent(ctx context.Context, c clientset.Interface, pod *v1.Pod, message string) (bool, error) {
	events, err := c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.UID == pod.UID && e.Reason == "DeviceTaintManagerEviction" && e.Message == message &&
			e.Type == v1.EventTypeNormal && e.Source.Component == "device-taint-eviction-controller" {
			return true, nil
		}
	}
	return false, nil
}

// A NoExecute taint on a device in its ResourceSlice evicts the pod using
// the device, not the pod using its neighbour.
func TestSliceTaintEvicts(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "taint-slice")
	driver := "driver-" + ns
	createSlice(t, c, driver, noExecute("broken"))
	victim := scheduledPodWithClaim(t, c, ns, "victim", driver, "dev-0")
	bystander := scheduledPodWithClaim(t, c, ns, "bystander", driver, "dev-1")
	runEvictionController(t, c)

	framework.Eventually(t, 30*time.Second, "pod evicted", func(ctx context.Context) (bool, error) {
		return evicted(ctx, c, ns, victim.Name)
	})
	framework.Eventually(t, 30*time.Second, "eviction event", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, c, victim, "Marking for deletion")
	})
	if p := getPod(t, c, ns, bystander.Name); p.DeletionTimestamp != nil {
		t.Error("pod on an untainted device was evicted")
	}
}

// tolerationSeconds delays the eviction; a toleration without it prevents it.
func TestTolerations(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "taint-toleration")
	driver := "driver-" + ns
	createSlice(t, c, driver, noExecute("broken"))
	toleration := resourceapi.DeviceToleration{Key: "broken", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}
	delayed := toleration
	delayed.TolerationSeconds = ptr.To[int64](8)
	start := time.Now()
	patient := scheduledPodWithClaim(t, c, ns, "patient", driver, "dev-0", delayed)
	immune := scheduledPodWithClaim(t, c, ns, "immune", driver, "dev-0", toleration)
	runEvictionController(t, c)

	holdsFor(t, 4*time.Second, "tolerating pod still there", func() bool {
		p := getPod(t, c, ns, patient.Name)
		return p.DeletionTimestamp == nil
	})
	framework.Eventually(t, 30*time.Second, "pod evicted after tolerationSeconds", func(ctx context.Context) (bool, error) {
		return evicted(ctx, c, ns, patient.Name)
	})
	// The taint was added when the slice was created, before start.
	if elapsed := time.Since(start); elapsed < 7*time.Second {
		t.Errorf("evicted after %v, before the 8s toleration ran out", elapsed)
	}
	holdsFor(t, 2*time.Second, "pod tolerating forever still there", func() bool {
		return getPod(t, c, ns, immune.Name).DeletionTimestamp == nil
	})
}

// A NoExecute DeviceTaintRule evicts like a slice taint and reports it in
// its EvictionInProgress condition; removing a pending rule cancels.
func TestDeviceTaintRule(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "taint-rule")
	driver := "driver-" + ns
	ctx := context.Background()
	createSlice(t, c, driver)
	victim := scheduledPodWithClaim(t, c, ns, "victim", driver, "dev-0")
	patient := scheduledPodWithClaim(t, c, ns, "patient", driver, "dev-1", resourceapi.DeviceToleration{
		Key: "maintenance", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](3600),
	})
	runEvictionController(t, c)

	newRule := func(name, device string) *resourceapi.DeviceTaintRule {
		rule, err := c.ResourceV1().DeviceTaintRules().Create(ctx, &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To(poolName), Device: ptr.To(device)},
				Taint:          noExecute("maintenance"),
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.ResourceV1().DeviceTaintRules().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return rule
	}
	condition := func(ctx context.Context, name string) (*metav1.Condition, error) {
		rule, err := c.ResourceV1().DeviceTaintRules().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for i := range rule.Status.Conditions {
			if rule.Status.Conditions[i].Type == resourceapi.DeviceTaintConditionEvictionInProgress {
				return &rule.Status.Conditions[i], nil
			}
		}
		return nil, nil
	}

	evictRule := newRule(ns+"-evict", "dev-0")
	framework.Eventually(t, 30*time.Second, "pod evicted by rule", func(ctx context.Context) (bool, error) {
		return evicted(ctx, c, ns, victim.Name)
	})
	// After the eviction the status is refreshed (at most every 10s).
	framework.Eventually(t, 45*time.Second, "rule status Completed", func(ctx context.Context) (bool, error) {
		cond, err := condition(ctx, evictRule.Name)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == "Completed" &&
			cond.Message == "1 pod evicted since starting the controller." && cond.ObservedGeneration == evictRule.Generation, err
	})

	pendingRule := newRule(ns+"-pending", "dev-1")
	framework.Eventually(t, 30*time.Second, "rule status PodsPendingEviction", func(ctx context.Context) (bool, error) {
		cond, err := condition(ctx, pendingRule.Name)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "PodsPendingEviction" &&
			cond.Message == "1 pod needs to be evicted in 1 namespace.", err
	})
	var managed bool
	if rule, err := c.ResourceV1().DeviceTaintRules().Get(ctx, pendingRule.Name, metav1.GetOptions{}); err == nil {
		for _, m := range rule.ManagedFields {
			managed = managed || m.Manager == "device-taint-eviction-controller" && m.Subresource == "status"
		}
	}
	if !managed {
		t.Error("rule status not applied with the controller's name as field manager")
	}
	if err := c.ResourceV1().DeviceTaintRules().Delete(ctx, pendingRule.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "eviction cancelled", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, c, patient, "Cancelling deletion")
	})
	if p := getPod(t, c, ns, patient.Name); p.DeletionTimestamp != nil {
		t.Error("tolerating pod evicted")
	}

	// A rule with the None effect only tells what it would do.
	dryRun, err := c.ResourceV1().DeviceTaintRules().Create(ctx, &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-dry-run"},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver)},
			Taint:          resourceapi.DeviceTaint{Key: "maintenance", Effect: resourceapi.DeviceTaintEffectNone},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.ResourceV1().DeviceTaintRules().Delete(context.Background(), dryRun.Name, metav1.DeleteOptions{})
	})
	framework.Eventually(t, 30*time.Second, "None rule status", func(ctx context.Context) (bool, error) {
		cond, err := condition(ctx, dryRun.Name)
		return cond != nil && cond.Reason == "NoEffect" &&
			cond.Message == "2 published devices selected. 2 allocated devices selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.", err
	})
	if p := getPod(t, c, ns, patient.Name); p.DeletionTimestamp != nil {
		t.Error("None rule evicted")
	}
}
