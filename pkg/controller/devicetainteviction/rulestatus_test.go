package devicetainteviction

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// feed puts objects into the informer stores and through the handlers,
// without running the controller.
func (f *fixture) feed(objs ...runtime.Object) {
	f.t.Helper()
	f.tc.mu.Lock()
	defer f.tc.mu.Unlock()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Pod:
			err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
			f.tc.handlePodChange(nil, o)
		case *resourceapi.ResourceClaim:
			err = f.factory.Resource().V1().ResourceClaims().Informer().GetIndexer().Add(o)
			f.tc.handleClaimChange(nil, o)
		case *resourceapi.ResourceSlice:
			err = f.factory.Resource().V1().ResourceSlices().Informer().GetIndexer().Add(o)
			f.tc.handleSliceChange(nil, o)
		case *resourceapi.DeviceTaintRule:
			err = f.factory.Resource().V1().DeviceTaintRules().Informer().GetIndexer().Add(o)
			f.tc.handleRuleChange(nil, o)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) ruleCondition(name string) *metav1.Condition {
	f.t.Helper()
	r, err := f.client.ResourceV1().DeviceTaintRules().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range r.Status.Conditions {
		if r.Status.Conditions[i].Type == resourceapi.DeviceTaintConditionEvictionInProgress {
			return &r.Status.Conditions[i]
		}
	}
	return nil
}

func inNamespace(namespace string, objs ...runtime.Object) []runtime.Object {
	for _, obj := range objs {
		m := obj.(metav1.Object)
		m.SetNamespace(namespace)
		m.SetUID(types.UID(namespace + "-" + string(m.GetUID())))
		if claim, ok := obj.(*resourceapi.ResourceClaim); ok {
			for i := range claim.Status.ReservedFor {
				claim.Status.ReservedFor[i].UID = types.UID(namespace + "-" + string(claim.Status.ReservedFor[i].UID))
			}
		}
	}
	return objs
}

func TestRuleStatusConditions(t *testing.T) {
	now := time.Now()
	podObjs := func(namespace string, devices ...string) []runtime.Object {
		pod := scheduledPod("web", "claim")
		return inNamespace(namespace, pod, claimFor("claim", devices, pod))
	}
	for name, tc := range map[string]struct {
		rule        *resourceapi.DeviceTaintRule
		objs        []runtime.Object
		evicted     int64
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		"pending-one": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", now),
			objs:       podObjs("a", "dev-0"),
			wantStatus: metav1.ConditionTrue, wantReason: "PodsPendingEviction",
			wantMessage: "1 pod needs to be evicted in 1 namespace.",
		},
		"pending-many": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", now),
			objs:       append(append(podObjs("a", "dev-0"), podObjs("b", "dev-0")...), podObjs("c", "dev-1")...),
			evicted:    1,
			wantStatus: metav1.ConditionTrue, wantReason: "PodsPendingEviction",
			wantMessage: "2 pods need to be evicted in 2 different namespaces. 1 pod evicted since starting the controller.",
		},
		"not-started": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", now),
			objs:       podObjs("a", "dev-1"),
			wantStatus: metav1.ConditionFalse, wantReason: "NotStarted",
		},
		"completed": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", now),
			evicted:    3,
			wantStatus: metav1.ConditionFalse, wantReason: "Completed",
			wantMessage: "3 pods evicted since starting the controller.",
		},
		"none-effect": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNone, "dev-0", now),
			objs:       append([]runtime.Object{slice("s", 1, 2)}, podObjs("a", "dev-0")...),
			wantStatus: metav1.ConditionFalse, wantReason: "NoEffect",
			wantMessage: "1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
		},
		"none-effect-nothing": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNone, "dev-9", now),
			objs:       append([]runtime.Object{slice("s", 1, 2)}, podObjs("a", "dev-0")...),
			wantStatus: metav1.ConditionFalse, wantReason: "NoEffect",
			wantMessage: "0 published devices selected. 0 allocated devices selected. 0 pods would be evicted in 0 different namespaces if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
		},
		"no-schedule": {
			rule:       rule("r", resourceapi.DeviceTaintEffectNoSchedule, "dev-0", now),
			objs:       podObjs("a", "dev-0"),
			wantStatus: metav1.ConditionFalse, wantReason: "OtherEffect",
			wantMessage: "Eviction only happens for the NoExecute effect.",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, defaultFeatures(), tc.rule)
			f.feed(tc.objs...)
			f.feed(tc.rule)
			f.tc.ruleEvictions[tc.rule.UID] = tc.evicted
			if _, err := f.tc.maybeUpdateRuleStatus(f.ctx, refOf(tc.rule)); err != nil {
				t.Fatal(err)
			}
			c := f.ruleCondition("r")
			if c == nil {
				t.Fatal("no condition")
			}
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message != tc.wantMessage || c.ObservedGeneration != 1 || c.LastTransitionTime.IsZero() {
				t.Errorf("condition %+v, want %s %s %q", c, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
			// A None rule must not evict anybody for real.
			if len(f.tc.deleteAt) != 0 && tc.rule.Spec.Taint.Effect != resourceapi.DeviceTaintEffectNoExecute {
				t.Errorf("pods scheduled for eviction: %v", f.tc.deleteAt)
			}
		})
	}
}

func TestRuleStatusThrottled(t *testing.T) {
	r := rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", time.Now())
	r.Status.Conditions = []metav1.Condition{{
		Type: resourceapi.DeviceTaintConditionEvictionInProgress, Status: metav1.ConditionFalse, Reason: "Stale",
		ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Now().Add(-3 * time.Second)),
	}}
	f := newFixture(t, defaultFeatures(), r)
	f.feed(r)
	f.client.ClearActions()
	again, err := f.tc.maybeUpdateRuleStatus(f.ctx, refOf(r))
	if err != nil {
		t.Fatal(err)
	}
	if again <= 0 || again > 7*time.Second {
		t.Errorf("retry after %v, want about 7s", again)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Errorf("%d API calls while throttled", n)
	}

	// A new generation is written at once.
	r2 := r.DeepCopy()
	r2.Generation = 2
	f.tc.mu.Lock()
	_ = f.factory.Resource().V1().DeviceTaintRules().Informer().GetIndexer().Update(r2)
	f.tc.mu.Unlock()
	if _, err := f.tc.maybeUpdateRuleStatus(f.ctx, refOf(r2)); err != nil {
		t.Fatal(err)
	}
	if c := f.ruleCondition("r"); c.Reason != "NotStarted" || c.ObservedGeneration != 2 {
		t.Errorf("condition %+v", c)
	}

	// Replaced or deleted rules are left alone.
	other := refOf(r2)
	other.UID = "other"
	if again, err := f.tc.maybeUpdateRuleStatus(f.ctx, other); again != 0 || err != nil {
		t.Errorf("replaced rule: %v %v", again, err)
	}
}

func TestHandlersScheduleAndCancel(t *testing.T) {
	pod := scheduledPod("web", "claim")
	claim := claimFor("claim", []string{"dev-0"}, pod)
	f := newFixture(t, defaultFeatures())
	var evicted, canceled []objectRef
	f.tc.onEvict = func(ref objectRef, _ eviction) { evicted = append(evicted, ref) }
	f.tc.onCancel = func(ref objectRef) { canceled = append(canceled, ref) }
	f.feed(pod, claim, slice("s", 1, 1))
	if len(evicted) != 0 {
		t.Fatalf("evicted without taint: %v", evicted)
	}

	r := rule("r", resourceapi.DeviceTaintEffectNoExecute, "dev-0", time.Now())
	f.feed(r)
	if len(evicted) != 1 || evicted[0] != refOf(pod) {
		t.Fatalf("rule added: evicted %v", evicted)
	}

	// Deallocation cancels.
	f.tc.mu.Lock()
	unallocated := claim.DeepCopy()
	unallocated.Status.Allocation = nil
	unallocated.Status.ReservedFor = nil
	f.tc.handleClaimChange(claim, unallocated)
	f.tc.mu.Unlock()
	if len(canceled) != 1 {
		t.Fatalf("deallocation: canceled %v", canceled)
	}

	// Allocated again, then the rule goes away.
	f.tc.mu.Lock()
	f.tc.handleClaimChange(unallocated, claim)
	f.tc.handleRuleChange(r, nil)
	f.tc.mu.Unlock()
	if len(evicted) != 2 || len(canceled) != 2 {
		t.Fatalf("rule removed: evicted %v canceled %v", evicted, canceled)
	}

	// Pod deletion cancels too.
	f.feed(r)
	f.tc.mu.Lock()
	f.tc.handlePodChange(pod, nil)
	f.tc.mu.Unlock()
	if len(canceled) != 3 {
		t.Fatalf("pod deleted: canceled %v", canceled)
	}
}
