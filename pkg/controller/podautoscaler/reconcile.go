package podautoscaler

import (
	"context"
	"errors"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// errSpec marks errors caused by the HPA's spec (wrap it with %w), which
// the metrics report under error="spec" rather than "internal". Its empty
// message leaves the wrapping text unchanged.
var errSpec = errors.New("")

// errorLabelFor classifies err for the metrics.
func errorLabelFor(err error) errorLabel {
	switch {
	case err == nil:
		return errorNone
	case errors.Is(err, errSpec):
		return errorSpec
	default:
		return errorInternal
	}
}

// reconcileAutoscaler brings the HPA's target to the replica count its
// metrics call for and records the outcome in the HPA's status.
func (a *Controller) reconcileAutoscaler(ctx context.Context, hpaShared *autoscalingv2.HorizontalPodAutoscaler, key string) (retErr error) {
	action := actionNone
	start := a.clock.Now()
	defer func() {
		a.monitor.reconciled(action, errorLabelFor(retErr), a.clock.Since(start))
	}()

	// Work on a copy: the informer's object is shared.
	hpa := hpaShared.DeepCopy()
	originalStatus := hpa.Status.DeepCopy()
	fillBehaviorDefaults(hpa)
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)

	scale, targetGR, err := a.getTargetScale(ctx, hpa, originalStatus, reference)
	if err != nil {
		return err
	}
	setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	currentReplicas := scale.Spec.Replicas
	a.recordInitialRecommendation(currentReplicas, key)

	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	scaleToZero := a.features.HPAScaleToZero
	hasObjectOrExternal := hasObjectOrExternalMetrics(hpa)
	// Only a workload this controller scaled to zero is scaled back up
	// from zero; one a user scaled to zero stays there.
	scaledToZero := scaleToZero && conditionTrue(hpa, autoscalingv2.ScaledToZero)

	var (
		metricStatuses  []autoscalingv2.MetricStatus
		desiredReplicas int32
		rescaleReason   string
		rescale         = true
		computeMetrics  = true
	)
	switch {
	case currentReplicas == 0:
		// Resume from zero only after our own scale-down, and only when
		// something can ask for pods: a raised minReplicas or a metric
		// that does not come from the (absent) pods.
		resume := scaledToZero && (minReplicas != 0 || hasObjectOrExternal)
		if !resume {
			computeMetrics, rescale = false, false
			setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
			if !scaleToZero {
				removeCondition(hpa, autoscalingv2.ScaledToZero)
			}
		}
	case currentReplicas > hpa.Spec.MaxReplicas:
		rescaleReason = "Current number of replicas above Spec.MaxReplicas"
		desiredReplicas = hpa.Spec.MaxReplicas
		computeMetrics = false
	case currentReplicas < minReplicas:
		rescaleReason = "Current number of replicas below Spec.MinReplicas"
		desiredReplicas = minReplicas
		computeMetrics = false
	}

	if computeMetrics {
		metricDesiredReplicas, metricName, statuses, metricTimestamp, err := a.computeReplicasForMetrics(ctx, hpa, scale, hpa.Spec.Metrics)
		metricStatuses = statuses
		if err != nil && metricDesiredReplicas == -1 {
			a.setCurrentReplicasAndMetricsInStatus(hpa, currentReplicas, metricStatuses)
			if err := a.updateStatusIfNeeded(ctx, originalStatus, hpa); err != nil {
				utilruntime.HandleError(err)
			}
			a.eventRecorder.Event(hpa, v1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
		}
		if err != nil {
			// Some metrics worked: scale on them, but still report the rest.
			retErr = err
		}
		msg := "Proposing desired replicas"
		if currentReplicas == 0 {
			msg = "Proposing desired replicas from zero"
		}
		klog.FromContext(ctx).V(4).Info(msg, "desiredReplicas", metricDesiredReplicas, "metric", metricName,
			"tolerances", a.tolerancesForHpa(hpa), "timestamp", metricTimestamp, "scaleTarget", reference)

		desiredReplicas, rescaleReason = a.normalizeProposal(hpa, key, currentReplicas, metricDesiredReplicas, minReplicas, metricName, scaledToZero)
		rescale = desiredReplicas != currentReplicas
	}

	if rescale {
		if err := a.updateScale(ctx, hpa, scale, targetGR, desiredReplicas); err != nil {
			a.eventRecorder.Eventf(hpa, v1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desiredReplicas, rescaleReason, err.Error())
			setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			a.setCurrentReplicasAndMetricsInStatus(hpa, currentReplicas, metricStatuses)
			if err := a.updateStatusIfNeeded(ctx, originalStatus, hpa); err != nil {
				utilruntime.HandleError(err)
			}
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desiredReplicas)
		a.eventRecorder.Eventf(hpa, v1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desiredReplicas, rescaleReason)
		a.storeScaleEvent(hpa.Spec.Behavior, key, currentReplicas, desiredReplicas)
		klog.FromContext(ctx).Info("Successfully rescaled", "HPA", klog.KObj(hpa), "currentReplicas", currentReplicas,
			"desiredReplicas", desiredReplicas, "reason", rescaleReason)
		a.setScaledToZeroCondition(hpa, scaleToZero, currentReplicas, desiredReplicas, minReplicas, hasObjectOrExternal)
		if desiredReplicas > currentReplicas {
			action = actionScaleUp
		} else {
			action = actionScaleDown
		}
	} else {
		lastScaleTime := ""
		if hpa.Status.LastScaleTime != nil {
			lastScaleTime = hpa.Status.LastScaleTime.String()
		}
		klog.FromContext(ctx).V(4).Info("Decided not to scale", "scaleTarget", reference,
			"desiredReplicas", desiredReplicas, "lastScaleTime", lastScaleTime)
		desiredReplicas = currentReplicas
	}

	a.setStatus(hpa, currentReplicas, desiredReplicas, metricStatuses, rescale)
	a.monitor.desiredReplicas(hpa.Namespace, hpa.Name, desiredReplicas)
	if err := a.updateStatusIfNeeded(ctx, originalStatus, hpa); err != nil {
		// An internal error; it may replace a metrics error.
		return err
	}
	return retErr
}

// getTargetScale reads the scale subresource of the HPA's target, trying
// each resource its kind maps to. A failure is reported as AbleToScale
// False (FailedGetScale) and a warning event.
func (a *Controller) getTargetScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, originalStatus *autoscalingv2.HorizontalPodAutoscalerStatus, reference string) (*autoscalingv1.Scale, schema.GroupResource, error) {
	ref := hpa.Spec.ScaleTargetRef
	targetGV, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		a.failedGetScale(ctx, hpa, originalStatus, err)
		return nil, schema.GroupResource{}, fmt.Errorf("invalid API version in scale target reference: %v%w", err, errSpec)
	}
	mappings, err := a.mapper.RESTMappings(schema.GroupKind{Group: targetGV.Group, Kind: ref.Kind})
	if err != nil {
		a.failedGetScale(ctx, hpa, originalStatus, err)
		return nil, schema.GroupResource{}, fmt.Errorf("unable to determine resource for scale target reference: %w", err)
	}
	scale, targetGR, err := a.scaleForResourceMappings(ctx, hpa.Namespace, ref.Name, mappings)
	if err != nil {
		a.failedGetScale(ctx, hpa, originalStatus, err)
		return nil, schema.GroupResource{}, fmt.Errorf("failed to query scale subresource for %s: %w", reference, err)
	}
	return scale, targetGR, nil
}

// normalizeProposal turns the metrics' proposal into the replica count to
// apply (stabilized and bounded) and the reason to give for a change.
func (a *Controller) normalizeProposal(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, currentReplicas, proposal, minReplicas int32, metricName string, scaledToZero bool) (int32, string) {
	// A zero proposal names no metric.
	desired, rescaleMetric := int32(0), ""
	if proposal > 0 {
		desired, rescaleMetric = proposal, metricName
	}
	reason := ""
	switch {
	case desired > currentReplicas:
		reason = fmt.Sprintf("%s above target", rescaleMetric)
	case desired < currentReplicas:
		reason = "All metrics below target"
	}
	if hpa.Spec.Behavior == nil {
		desired = a.normalizeDesiredReplicas(hpa, key, currentReplicas, desired, minReplicas)
	} else {
		desired = a.normalizeDesiredReplicasWithBehaviors(hpa, key, currentReplicas, desired, minReplicas)
	}
	// Coming back from zero, honour a minReplicas raised meanwhile.
	if currentReplicas == 0 && minReplicas != 0 && scaledToZero && desired < minReplicas {
		desired = minReplicas
		if reason == "" {
			reason = "Current number of replicas below Spec.MinReplicas"
		}
	}
	return desired, reason
}

// setScaledToZeroCondition records, on every rescale, whether this
// controller took the workload to zero: only then may it later bring it
// back. Without the feature the condition is dropped.
func (a *Controller) setScaledToZeroCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, enabled bool, currentReplicas, desiredReplicas, minReplicas int32, hasObjectOrExternal bool) {
	switch {
	case !enabled:
		removeCondition(hpa, autoscalingv2.ScaledToZero)
	case currentReplicas > 0 && desiredReplicas == 0 && minReplicas == 0 && hasObjectOrExternal:
		setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
	default:
		setCondition(hpa, autoscalingv2.ScaledToZero, v1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
	}
}

// failedGetScale reports that the target's scale could not be read.
func (a *Controller) failedGetScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, originalStatus *autoscalingv2.HorizontalPodAutoscalerStatus, err error) {
	a.eventRecorder.Event(hpa, v1.EventTypeWarning, "FailedGetScale", err.Error())
	setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
	if err := a.updateStatusIfNeeded(ctx, originalStatus, hpa); err != nil {
		utilruntime.HandleError(err)
	}
}

// scaleForResourceMappings returns the scale of the first mapping that
// serves one, or the first mapping's error.
func (a *Controller) scaleForResourceMappings(ctx context.Context, namespace, name string, mappings []*apimeta.RESTMapping) (*autoscalingv1.Scale, schema.GroupResource, error) {
	var firstErr error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		scale, err := a.scaleNamespacer.Scales(namespace).Get(ctx, gr, name, metav1.GetOptions{})
		if err == nil {
			return scale, gr, nil
		}
		if i == 0 {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("unrecognized resource")
	}
	return nil, schema.GroupResource{}, firstErr
}

// updateScale writes replicas to the target's scale, re-reading the scale
// after a conflict. scale is fresh from the API server, not a cache, so it
// may be modified.
func (a *Controller) updateScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, gr schema.GroupResource, replicas int32) error {
	scales := a.scaleNamespacer.Scales(hpa.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale.Spec.Replicas = replicas
		_, err := scales.Update(ctx, gr, scale, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		latest, getErr := scales.Get(ctx, gr, hpa.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
		if getErr != nil {
			utilruntime.HandleError(fmt.Errorf("error getting latest scale for %s/%s/%s during conflict retry: %w",
				hpa.Spec.ScaleTargetRef.Kind, hpa.Namespace, hpa.Spec.ScaleTargetRef.Name, getErr))
		} else {
			scale = latest
		}
		return err
	})
}

// hasObjectOrExternalMetrics reports whether the HPA uses a metric that
// does not come from its pods, the only kind it can scale up from zero on.
func hasObjectOrExternalMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}
