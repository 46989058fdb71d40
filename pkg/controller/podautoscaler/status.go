package podautoscaler

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// setCurrentReplicasAndMetricsInStatus refreshes the observed replicas and
// metrics after a failure, keeping the last desired count.
func (a *Controller) setCurrentReplicasAndMetricsInStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, currentReplicas int32, metricStatuses []autoscalingv2.MetricStatus) {
	a.setStatus(hpa, currentReplicas, hpa.Status.DesiredReplicas, metricStatuses, false)
}

// setStatus rebuilds the status from this reconciliation, keeping the
// conditions and, unless it rescaled now, the last scale time.
func (a *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, currentReplicas, desiredReplicas int32, metricStatuses []autoscalingv2.MetricStatus, rescale bool) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: currentReplicas,
		DesiredReplicas: desiredReplicas,
		LastScaleTime:   hpa.Status.LastScaleTime,
		CurrentMetrics:  metricStatuses,
		Conditions:      hpa.Status.Conditions,
	}
	if a.features.HPAGeneration {
		generation := hpa.Generation
		hpa.Status.ObservedGeneration = &generation
	}
	if rescale {
		now := metav1.NewTime(a.clock.Now())
		hpa.Status.LastScaleTime = &now
	}
}

// updateStatusIfNeeded writes the HPA's status unless it equals
// oldStatus.
func (a *Controller) updateStatusIfNeeded(ctx context.Context, oldStatus *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(oldStatus, &hpa.Status) {
		return nil
	}
	return a.updateStatus(ctx, hpa)
}

func (a *Controller) updateStatus(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	updated, err := a.hpaNamespacer.HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{})
	if err != nil {
		a.eventRecorder.Event(hpa, v1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	a.consistency.WroteAt(types.NamespacedName{Namespace: updated.Namespace, Name: updated.Name}, updated.UID, hpaResource, updated.ResourceVersion)
	klog.FromContext(ctx).V(2).Info("Successfully updated status", "HPA", klog.KObj(hpa))
	return nil
}

// tolerancesForHpa returns the controller's tolerance, overridden per
// direction by the HPA's behavior when it sets one.
func (a *Controller) tolerancesForHpa(hpa *autoscalingv2.HorizontalPodAutoscaler) Tolerances {
	t := Tolerances{scaleDown: a.tolerance, scaleUp: a.tolerance}
	b := hpa.Spec.Behavior
	if b == nil || !a.features.HPAConfigurableTolerance {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.scaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.scaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// setCondition sets a condition of the HPA, adding it if missing. The
// transition time moves only when the status changes. message is a format
// string for args.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, conditionType autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, message string, args ...interface{}) {
	hpa.Status.Conditions = setConditionInList(hpa.Status.Conditions, conditionType, status, reason, message, args...)
}

func setConditionInList(list []autoscalingv2.HorizontalPodAutoscalerCondition, conditionType autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, message string, args ...interface{}) []autoscalingv2.HorizontalPodAutoscalerCondition {
	i := 0
	for i < len(list) && list[i].Type != conditionType {
		i++
	}
	if i == len(list) {
		list = append(list, autoscalingv2.HorizontalPodAutoscalerCondition{Type: conditionType})
	}
	c := &list[i]
	if c.Status != status {
		c.LastTransitionTime = metav1.Now()
	}
	c.Status = status
	c.Reason = reason
	c.Message = fmt.Sprintf(message, args...)
	return list
}

func removeCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, conditionType autoscalingv2.HorizontalPodAutoscalerConditionType) {
	kept := hpa.Status.Conditions[:0]
	for _, c := range hpa.Status.Conditions {
		if c.Type != conditionType {
			kept = append(kept, c)
		}
	}
	hpa.Status.Conditions = kept
}

// conditionTrue reports whether the HPA has the condition with status True.
func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, conditionType autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == conditionType {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// fillBehaviorDefaults completes a partial behavior the way the API server
// defaults it, so an object that skipped defaulting (a client that bypassed
// the API server, say) cannot crash the controller.
func fillBehaviorDefaults(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	b := hpa.Spec.Behavior
	if b == nil {
		return
	}
	b.ScaleUp = fillRules(b.ScaleUp, defaultScaleUpRules())
	b.ScaleDown = fillRules(b.ScaleDown, defaultScaleDownRules())
}

func fillRules(from, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if from == nil {
		return defaults
	}
	if from.SelectPolicy == nil {
		from.SelectPolicy = defaults.SelectPolicy
	}
	if from.StabilizationWindowSeconds == nil {
		from.StabilizationWindowSeconds = defaults.StabilizationWindowSeconds
	}
	if from.Policies == nil {
		from.Policies = defaults.Policies
	}
	return from
}

// defaultScaleUpRules are the API defaults: no stabilization, and per 15s
// the larger of +4 pods and +100%.
func defaultScaleUpRules() *autoscalingv2.HPAScalingRules {
	window := int32(0)
	policy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: &window,
		SelectPolicy:               &policy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}

// defaultScaleDownRules are the API defaults: -100% per 15s; the window is
// left to the controller's flag.
func defaultScaleDownRules() *autoscalingv2.HPAScalingRules {
	policy := autoscalingv2.MaxChangePolicySelect
	return &autoscalingv2.HPAScalingRules{
		SelectPolicy: &policy,
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
}
