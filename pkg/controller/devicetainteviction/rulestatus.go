package devicetainteviction

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/klog/v2"
)

// ruleCounts is what the EvictionInProgress condition reports.
type ruleCounts struct {
	pendingPods, pendingNamespaces int64
	// Only for the None effect: what NoExecute would select.
	sliceDevices, allocatedDevices int64
}

// maybeUpdateRuleStatus sets the rule's EvictionInProgress condition. While
// it changes, it is written at most every ruleStatusPeriod (the
// condition's lastTransitionTime tells when it last was).
func (tc *Controller) maybeUpdateRuleStatus(ctx context.Context, ref objectRef) (time.Duration, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "deviceTaintRule", ref)
	if tc.ruleLister == nil {
		return 0, nil
	}
	tc.mu.Lock()
	rule, err := tc.ruleLister.Get(ref.Name)
	if apierrors.IsNotFound(err) || err == nil && rule.UID != ref.UID {
		tc.mu.Unlock()
		logger.V(5).Info("DeviceTaintRule got deleted or replaced, nothing to do")
		return 0, nil
	}
	if err != nil {
		tc.mu.Unlock()
		return 0, fmt.Errorf("get DeviceTaintRule %s: %w", ref.Name, err)
	}

	var existing metav1.Condition
	now := metav1.Now()
	if i := slices.IndexFunc(rule.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == resourceapi.DeviceTaintConditionEvictionInProgress
	}); i >= 0 {
		existing = rule.Status.Conditions[i]
		// Checked before counting pods, which may be expensive. As a
		// result, "done" shows up only with some delay.
		if since := now.Sub(existing.LastTransitionTime.Time); existing.ObservedGeneration == rule.Generation && since < ruleStatusPeriod {
			tc.mu.Unlock()
			return ruleStatusPeriod - since, nil
		}
	}

	var counts ruleCounts
	switch rule.Spec.Taint.Effect {
	case resourceapi.DeviceTaintEffectNoExecute:
		counts, err = tc.countPending(rule, tc.claims)
	case resourceapi.DeviceTaintEffectNone:
		counts, err = tc.simulateNoExecute(rule)
	}
	evicted := tc.ruleEvictions[rule.UID]
	tc.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("determine pending pods: %w", err)
	}

	cond := ruleCondition(rule, counts, evicted)
	cond.LastTransitionTime = existing.LastTransitionTime
	if cond == existing {
		return 0, nil
	}
	cond.LastTransitionTime = now
	logger.V(4).Info("Calculated new condition", "condition", cond)
	// Applied with the rule's UID, so a replacement rule is not touched.
	apply := resourceac.DeviceTaintRule(rule.Name).WithUID(rule.UID).WithStatus(resourceac.DeviceTaintRuleStatus().WithConditions(
		metav1ac.Condition().
			WithType(cond.Type).
			WithStatus(cond.Status).
			WithReason(cond.Reason).
			WithMessage(cond.Message).
			WithObservedGeneration(cond.ObservedGeneration).
			WithLastTransitionTime(cond.LastTransitionTime)))
	if _, err := tc.client.ResourceV1().DeviceTaintRules().ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: tc.name, Force: true}); err != nil {
		return 0, fmt.Errorf("add condition to DeviceTaintRule status: %w", err)
	}
	// Nothing more until pods get evicted or become due.
	return 0, nil
}

// ruleCondition builds the EvictionInProgress condition (without time).
func ruleCondition(rule *resourceapi.DeviceTaintRule, counts ruleCounts, evicted int64) metav1.Condition {
	cond := metav1.Condition{
		Type:               resourceapi.DeviceTaintConditionEvictionInProgress,
		Status:             metav1.ConditionFalse,
		ObservedGeneration: rule.Generation,
	}
	switch rule.Spec.Taint.Effect {
	case resourceapi.DeviceTaintEffectNoExecute:
		switch {
		case counts.pendingPods > 0:
			cond.Status = metav1.ConditionTrue
			cond.Reason = "PodsPendingEviction"
			cond.Message = plural(counts.pendingPods, "1 pod needs", "%d pods need") + " to be evicted in " +
				plural(counts.pendingNamespaces, "1 namespace.", "%d different namespaces.")
		case evicted > 0:
			cond.Reason = "Completed"
		default:
			cond.Reason = "NotStarted"
		}
	case resourceapi.DeviceTaintEffectNone:
		cond.Reason = "NoEffect"
		cond.Message = plural(counts.sliceDevices, "1 published device", "%d published devices") + " selected. " +
			plural(counts.allocatedDevices, "1 allocated device", "%d allocated devices") + " selected. " +
			plural(counts.pendingPods, "1 pod", "%d pods") + " would be evicted in " +
			plural(counts.pendingNamespaces, "1 namespace", "%d different namespaces") +
			" if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update."
	default:
		cond.Reason = "OtherEffect"
		cond.Message = "Eviction only happens for the NoExecute effect."
	}
	if evicted > 0 {
		if cond.Message != "" {
			cond.Message += " "
		}
		cond.Message += plural(evicted, "1 pod", "%d pods") + " evicted since starting the controller."
	}
	return cond
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}

// countPending counts the pods (not being deleted) and their namespaces
// that are to be evicted, at least partly, because of the rule.
func (tc *Controller) countPending(rule *resourceapi.DeviceTaintRule, claims map[types.NamespacedName]trackedClaim) (ruleCounts, error) {
	pods, err := tc.podLister.List(labels.Everything())
	if err != nil {
		return ruleCounts{}, fmt.Errorf("list pod: %w", err)
	}
	var counts ruleCounts
	namespaces := sets.New[string]()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if e := tc.podEviction(pod, claims); e != nil && e.hasRule(rule) {
			counts.pendingPods++
			namespaces.Insert(pod.Namespace)
		}
	}
	counts.pendingNamespaces = int64(namespaces.Len())
	return counts, nil
}

// simulateNoExecute counts what a rule with the None effect would evict
// if it were NoExecute: only this rule is considered, tolerations apply.
// It also counts the devices the rule selects, published and allocated.
func (tc *Controller) simulateNoExecute(rule *resourceapi.DeviceTaintRule) (ruleCounts, error) {
	asNoExecute := rule.DeepCopy()
	asNoExecute.Spec.Taint.Effect = resourceapi.DeviceTaintEffectNoExecute
	rules := map[string]*resourceapi.DeviceTaintRule{rule.Name: asNoExecute}
	claims := maps.Clone(tc.claims)
	for key, tracked := range claims {
		claims[key] = trackedClaim{claim: tracked.claim, eviction: claimEviction(tracked.claim, tc.pools, rules)}
	}
	counts, err := tc.countPending(rule, claims)
	if err != nil {
		return counts, err
	}

	for key, p := range tc.pools {
		for slice := range p.current {
			for _, device := range slice.Spec.Devices {
				if ruleMatchesDevice(rule, key.driver, key.pool, device.Name) {
					counts.sliceDevices++
				}
			}
		}
	}
	for _, tracked := range tc.claims {
		for _, result := range tracked.claim.Status.Allocation.Devices.Results {
			if ruleMatchesDevice(rule, result.Driver, result.Pool, result.Device) {
				counts.allocatedDevices++
			}
		}
	}
	return counts, nil
}
