package devicetainteviction

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
)

func TestEvictPodUsingTaintedDevice(t *testing.T) {
	pod := scheduledPod("web", "claim")
	f := newFixture(t, defaultFeatures(), pod, claimFor("claim", []string{"dev-0"}, pod),
		slice("s", 1, 2, taint("broken", resourceapi.DeviceTaintEffectNoExecute, time.Now())))
	before, _ := testutil.GetCounterMetricValue(podDeletions)
	f.run()

	f.eventually("pod deleted", 10*time.Second, func() bool { return f.deleted("web") })

	var patched, deletedWithUID bool
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetResource().Resource == "pods" && p.GetSubresource() == "status" {
			var patch struct {
				Metadata struct{ UID types.UID }
				Status   v1.PodStatus
			}
			if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
				t.Fatal(err)
			}
			patched = patch.Metadata.UID == pod.UID && len(patch.Status.Conditions) == 1 &&
				patch.Status.Conditions[0].Type == v1.DisruptionTarget &&
				patch.Status.Conditions[0].Status == v1.ConditionTrue &&
				patch.Status.Conditions[0].Reason == "DeletionByDeviceTaintManager" &&
				patch.Status.Conditions[0].Message == "Device Taint manager: deleting due to NoExecute taint"
			if p.GetPatchType() != types.StrategicMergePatchType {
				t.Errorf("status patch type %s", p.GetPatchType())
			}
		}
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetResource().Resource == "pods" {
			if !patched {
				t.Error("pod deleted before its DisruptionTarget condition was set")
			}
			pre := d.GetDeleteOptions().Preconditions
			deletedWithUID = pre != nil && pre.UID != nil && *pre.UID == pod.UID
		}
	}
	if !patched || !deletedWithUID {
		t.Errorf("condition patched %v, deleted with UID precondition %v", patched, deletedWithUID)
	}
	f.eventually("event", 10*time.Second, func() bool {
		return f.hasEvent("web", "DeviceTaintManagerEviction", "Marking for deletion")
	})
	// The counter moves once the delete call has returned, which can be
	// after the fake client recorded it.
	f.eventually("pod_deletions_total to count the eviction", 10*time.Second, func() bool {
		after, _ := testutil.GetCounterMetricValue(podDeletions)
		return after == before+1
	})
}

func TestTolerationSecondsDelayEviction(t *testing.T) {
	pod := scheduledPod("web", "claim")
	claim := tolerate(claimFor("claim", []string{"dev-0"}, pod), resourceapi.DeviceToleration{
		Key: "broken", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2),
	})
	added := time.Now()
	f := newFixture(t, defaultFeatures(), pod, claim, slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, added)))
	f.run()
	f.never("early deletion", time.Second, func() bool { return f.deleted("web") })
	f.eventually("deletion after tolerationSeconds", 10*time.Second, func() bool { return f.deleted("web") })
	if elapsed := time.Since(added); elapsed < 2*time.Second {
		t.Errorf("deleted after %v, before tolerationSeconds", elapsed)
	}
}

func TestNoEviction(t *testing.T) {
	now := time.Now()
	pod := scheduledPod("web", "claim")
	forever := resourceapi.DeviceToleration{Key: "broken", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute}
	replaced := pod.DeepCopy()
	replaced.UID = "new-uid"
	unscheduled := pod.DeepCopy()
	unscheduled.Spec.NodeName = ""
	for name, objs := range map[string][]runtime.Object{
		"tolerated-forever": {pod, tolerate(claimFor("claim", []string{"dev-0"}, pod), forever), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now))},
		"no-schedule-only":  {pod, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoSchedule, now))},
		"none-effect":       {pod, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNone, now))},
		"other-device":      {pod, claimFor("claim", []string{"dev-1"}, pod), slice("s", 1, 2, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now))},
		"not-scheduled":     {unscheduled, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now))},
		"not-reserved":      {pod, claimFor("claim", []string{"dev-0"}), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now))},
		"pod-replaced":      {replaced, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now))},
		"old-generation":    {pod, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, now)), slice("s2", 2, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, defaultFeatures(), objs...)
			f.run()
			f.never("deletion", 500*time.Millisecond, func() bool { return f.deleted("web") })
		})
	}
}

func TestCancelEvictionWhenTaintRemoved(t *testing.T) {
	pod := scheduledPod("web", "claim")
	claim := tolerate(claimFor("claim", []string{"dev-0"}, pod), resourceapi.DeviceToleration{
		Key: "broken", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2),
	})
	tainted := slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, time.Now()))
	f := newFixture(t, defaultFeatures(), pod, claim, tainted)
	f.run()
	f.eventually("eviction scheduled", 5*time.Second, func() bool {
		f.tc.mu.Lock()
		defer f.tc.mu.Unlock()
		_, ok := f.tc.deleteAt[refOf(pod)]
		return ok
	})
	untainted := tainted.DeepCopy()
	untainted.Spec.Devices[0].Taints = nil
	if _, err := f.client.ResourceV1().ResourceSlices().Update(f.ctx, untainted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("cancel event", 5*time.Second, func() bool {
		return f.hasEvent("web", "DeviceTaintManagerEviction", "Cancelling deletion")
	})
	f.never("deletion", 2500*time.Millisecond, func() bool { return f.deleted("web") })
}

func TestEvictExtendedResourceClaim(t *testing.T) {
	pod := scheduledPod("web")
	pod.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "web-extended-resources-abc"}
	claim := claimFor("web-extended-resources-abc", []string{"dev-0"}, pod)
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: ptr.To(true)}}
	foreign := claim.DeepCopy()
	foreign.OwnerReferences[0].UID = "other"

	f := newFixture(t, defaultFeatures(), pod, foreign, slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, time.Now())))
	f.run()
	f.never("deletion for a claim of another pod", 500*time.Millisecond, func() bool { return f.deleted("web") })

	f = newFixture(t, defaultFeatures(), pod, claim, slice("s", 1, 1, taint("broken", resourceapi.DeviceTaintEffectNoExecute, time.Now())))
	f.run()
	f.eventually("deletion", 5*time.Second, func() bool { return f.deleted("web") })
}

func TestRuleEviction(t *testing.T) {
	pod := scheduledPod("web", "claim")
	f := newFixture(t, defaultFeatures(), pod, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1),
		rule("maintenance", resourceapi.DeviceTaintEffectNoExecute, "dev-0", time.Now()))
	f.run()
	f.eventually("pod deleted", 10*time.Second, func() bool { return f.deleted("web") })

	// The status is written once at once, before any eviction.
	f.eventually("rule status", 10*time.Second, func() bool {
		r, err := f.client.ResourceV1().DeviceTaintRules().Get(f.ctx, "maintenance", metav1.GetOptions{})
		return err == nil && len(r.Status.Conditions) == 1
	})
	r, _ := f.client.ResourceV1().DeviceTaintRules().Get(f.ctx, "maintenance", metav1.GetOptions{})
	c := r.Status.Conditions[0]
	if c.Type != "EvictionInProgress" || c.Status != metav1.ConditionTrue || c.Reason != "PodsPendingEviction" ||
		c.Message != "1 pod needs to be evicted in 1 namespace." || c.ObservedGeneration != 1 {
		t.Errorf("condition %+v", c)
	}
	f.tc.mu.Lock()
	n := f.tc.ruleEvictions["maintenance-uid"]
	f.tc.mu.Unlock()
	if n != 1 {
		t.Errorf("rule evictions %d, want 1", n)
	}
}

func TestRulesDisabled(t *testing.T) {
	pod := scheduledPod("web", "claim")
	f := newFixture(t, Features{}, pod, claimFor("claim", []string{"dev-0"}, pod), slice("s", 1, 1),
		rule("maintenance", resourceapi.DeviceTaintEffectNoExecute, "dev-0", time.Now()))
	f.run()
	f.never("deletion", 500*time.Millisecond, func() bool { return f.deleted("web") })
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource == "devicetaintrules" {
			t.Errorf("DeviceTaintRules used although disabled: %s", a.GetVerb())
		}
	}
}

func (f *fixture) hasEvent(podName, reason, message string) bool {
	list, err := f.client.CoreV1().Events(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == podName && e.Reason == reason && strings.Contains(e.Message, message) &&
			e.Type == v1.EventTypeNormal && e.Source.Component == ctrlName && e.InvolvedObject.UID == types.UID(podName+"-uid") {
			return true
		}
	}
	return false
}
