package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// computeReplicasForMetrics proposes the largest replica count any metric
// asks for, with the metric's description and the status of every metric.
// When some metrics fail it still returns a proposal from the others,
// with an error; it returns -1 when nothing usable is left: every metric
// failed, or some failed and the rest would scale down (a failing metric
// might have asked for more).
func (a *Controller) computeReplicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale,
	metricSpecs []autoscalingv2.MetricSpec) (replicas int32, metric string, statuses []autoscalingv2.MetricStatus, timestamp time.Time, err error) {
	selector, err := a.validateAndParseSelector(hpa, scale.Status.Selector)
	if err != nil {
		return -1, "", nil, time.Time{}, err
	}

	specReplicas := scale.Spec.Replicas
	statusReplicas := scale.Status.Replicas
	statuses = make([]autoscalingv2.MetricStatus, len(metricSpecs))

	invalid := 0
	var firstErr error
	var firstCondition autoscalingv2.HorizontalPodAutoscalerCondition
	for i, spec := range metricSpecs {
		proposal, name, ts, condition, err := a.computeReplicasForMetric(ctx, hpa, spec, specReplicas, statusReplicas, selector, &statuses[i])
		if err != nil {
			if invalid == 0 {
				firstCondition, firstErr = condition, err
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric, timestamp = proposal, name, ts
		}
	}

	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, len(metricSpecs), firstErr)
	}
	if invalid >= len(metricSpecs) || (invalid > 0 && replicas < specReplicas) {
		setCondition(hpa, firstCondition.Type, firstCondition.Status, firstCondition.Reason, "%s", firstCondition.Message)
		return -1, "", statuses, time.Time{}, firstErr
	}
	setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
	return replicas, metric, statuses, timestamp, firstErr
}

// validateAndParseSelector parses the target's pod selector and makes sure
// no other HPA selects the same pods, recording the selector for that
// check. On failure ScalingActive is set False.
func (a *Controller) validateAndParseSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, selector string) (labels.Selector, error) {
	if selector == "" {
		msg := "selector is required"
		a.eventRecorder.Event(hpa, v1.EventTypeWarning, "SelectorRequired", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New(msg)
	}

	parsed, err := labels.Parse(selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		a.eventRecorder.Event(hpa, v1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "InvalidSelector", "%s", msg)
		return nil, errors.New(msg)
	}

	key := hpaKey{Namespace: hpa.Namespace, Name: hpa.Name}
	if !a.selectors.putIfPresent(key, parsed) {
		return nil, fmt.Errorf("HPA %s/%s was deleted during reconciliation", hpa.Namespace, hpa.Name)
	}

	pods, err := a.podLister.Pods(hpa.Namespace).List(parsed)
	if err != nil {
		return nil, err
	}
	if selecting := a.selectors.hpasMatchingPods(hpa.Namespace, pods, a.ambiguityLimit); len(selecting) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)", selector, selecting)
		a.eventRecorder.Event(hpa, v1.EventTypeWarning, "AmbiguousSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "AmbiguousSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	return parsed, nil
}

// computeReplicasForMetric proposes a replica count for one metric, fills
// its status and, on failure, returns the ScalingActive condition to set.
func (a *Controller) computeReplicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec,
	specReplicas, statusReplicas int32, selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal int32, name string,
	timestamp time.Time, condition autoscalingv2.HorizontalPodAutoscalerCondition, err error) {
	start := a.clock.Now()
	defer func() {
		action := actionNone
		switch {
		case err != nil:
		case proposal > hpa.Status.CurrentReplicas:
			action = actionScaleUp
		case proposal < hpa.Status.CurrentReplicas:
			action = actionScaleDown
		}
		a.monitor.metricComputed(action, errorLabelFor(err), a.clock.Since(start), spec.Type)
	}()

	switch spec.Type {
	case autoscalingv2.ObjectMetricSourceType:
		metricSelector, err := metav1.LabelSelectorAsSelector(spec.Object.Metric.Selector)
		if err != nil {
			return 0, "", time.Time{}, a.unableToComputeCondition(hpa, "FailedGetObjectMetric", err), fmt.Errorf("failed to get object metric value: %w", err)
		}
		proposal, timestamp, name, condition, err = a.computeStatusForObjectMetric(ctx, specReplicas, statusReplicas, spec, hpa, selector, status, metricSelector)
		if err != nil {
			return 0, "", time.Time{}, condition, fmt.Errorf("failed to get object metric value: %w", err)
		}
	case autoscalingv2.PodsMetricSourceType:
		metricSelector, err := metav1.LabelSelectorAsSelector(spec.Pods.Metric.Selector)
		if err != nil {
			return 0, "", time.Time{}, a.unableToComputeCondition(hpa, "FailedGetPodsMetric", err), fmt.Errorf("failed to get pods metric value: %w", err)
		}
		proposal, timestamp, name, condition, err = a.computeStatusForPodsMetric(ctx, specReplicas, spec, hpa, selector, status, metricSelector)
		if err != nil {
			return 0, "", time.Time{}, condition, fmt.Errorf("failed to get pods metric value: %w", err)
		}
	case autoscalingv2.ResourceMetricSourceType:
		proposal, timestamp, name, condition, err = a.computeStatusForResourceMetric(ctx, specReplicas, spec, hpa, selector, status)
		if err != nil {
			return 0, "", time.Time{}, condition, fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, err)
		}
	case autoscalingv2.ContainerResourceMetricSourceType:
		proposal, timestamp, name, condition, err = a.computeStatusForContainerResourceMetric(ctx, specReplicas, spec, hpa, selector, status)
		if err != nil {
			return 0, "", time.Time{}, condition, fmt.Errorf("failed to get %s container metric value: %w", spec.ContainerResource.Container, err)
		}
	case autoscalingv2.ExternalMetricSourceType:
		proposal, timestamp, name, condition, err = a.computeStatusForExternalMetric(ctx, specReplicas, statusReplicas, spec, hpa, selector, status)
		if err != nil {
			return 0, "", time.Time{}, condition, fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name, err)
		}
	default:
		// API validation rejects unknown types; this guards older objects.
		err := fmt.Errorf("unknown metric source type %q%w", string(spec.Type), errSpec)
		return 0, "", time.Time{}, a.unableToComputeCondition(hpa, "InvalidMetricSourceType", err), err
	}
	return proposal, name, timestamp, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

// unableToComputeCondition emits a warning event with reason and returns
// the ScalingActive condition explaining the failure.
func (a *Controller) unableToComputeCondition(hpa runtime.Object, reason string, err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	a.eventRecorder.Event(hpa, v1.EventTypeWarning, reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{
		Type:    autoscalingv2.ScalingActive,
		Status:  v1.ConditionFalse,
		Reason:  reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err),
	}
}

func milliQuantity(v int64) *resource.Quantity {
	return resource.NewMilliQuantity(v, resource.DecimalSI)
}

// computeStatusForObjectMetric handles a metric describing one object,
// with a Value target (scaled by ready pods) or an AverageValue target
// (per replica of the target's status).
func (a *Controller) computeStatusForObjectMetric(ctx context.Context, specReplicas, statusReplicas int32, spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus, metricSelector labels.Selector) (int32, time.Time, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	src := spec.Object
	ms := autoscalingv2.MetricStatus{
		Type: autoscalingv2.ObjectMetricSourceType,
		Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: src.DescribedObject,
			Metric:          autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
		},
	}
	tolerances := a.tolerancesForHpa(hpa)
	switch {
	case src.Target.Type == autoscalingv2.ValueMetricType && src.Target.Value != nil:
		replicas, usage, ts, err := a.replicaCalc.GetObjectMetricReplicas(ctx, specReplicas, src.Target.Value.MilliValue(), src.Metric.Name, tolerances, hpa.Namespace, &src.DescribedObject, selector, metricSelector)
		if err != nil {
			return 0, ts, "", a.unableToComputeCondition(hpa, "FailedGetObjectMetric", err), err
		}
		ms.Object.Current.Value = milliQuantity(usage)
		*status = ms
		return replicas, ts, fmt.Sprintf("%s metric %s", src.DescribedObject.Kind, src.Metric.Name), autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	case src.Target.Type == autoscalingv2.AverageValueMetricType && src.Target.AverageValue != nil:
		replicas, usage, ts, err := a.replicaCalc.GetObjectPerPodMetricReplicas(ctx, statusReplicas, src.Target.AverageValue.MilliValue(), src.Metric.Name, tolerances, hpa.Namespace, &src.DescribedObject, metricSelector)
		if err != nil {
			return 0, time.Time{}, "", a.unableToComputeCondition(hpa, "FailedGetObjectMetric", err), fmt.Errorf("failed to get %s object metric: %w", src.Metric.Name, err)
		}
		ms.Object.Current.AverageValue = milliQuantity(usage)
		*status = ms
		// Upstream describes this one as an external metric; kept for
		// identical rescale reasons.
		return replicas, ts, fmt.Sprintf("external metric %s(%+v)", src.Metric.Name, src.Metric.Selector), autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	}
	err := errors.New("invalid object metric source: neither a value target nor an average value target was set")
	return 0, time.Time{}, "", a.unableToComputeCondition(hpa, "FailedGetObjectMetric", err), err
}

// computeStatusForPodsMetric handles a custom metric averaged over pods.
func (a *Controller) computeStatusForPodsMetric(ctx context.Context, currentReplicas int32, spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus, metricSelector labels.Selector) (int32, time.Time, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	src := spec.Pods
	replicas, usage, ts, err := a.replicaCalc.GetMetricReplicas(ctx, currentReplicas, src.Target.AverageValue.MilliValue(), src.Metric.Name, a.tolerancesForHpa(hpa), hpa.Namespace, selector, metricSelector)
	if err != nil {
		return 0, ts, "", a.unableToComputeCondition(hpa, "FailedGetPodsMetric", err), err
	}
	*status = autoscalingv2.MetricStatus{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: milliQuantity(usage)},
		},
	}
	return replicas, ts, fmt.Sprintf("pods metric %s", src.Metric.Name), autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

// computeResourceMetric handles a resource metric of the whole pods
// (container "") or of one container, with an AverageValue or an
// AverageUtilization target.
func (a *Controller) computeResourceMetric(ctx context.Context, currentReplicas int32, target autoscalingv2.MetricTarget, res v1.ResourceName,
	hpa *autoscalingv2.HorizontalPodAutoscaler, container string, selector labels.Selector, sourceType autoscalingv2.MetricSourceType) (int32, *autoscalingv2.MetricValueStatus, time.Time, string, error) {
	tolerances := a.tolerancesForHpa(hpa)
	if target.AverageValue != nil {
		replicas, raw, ts, err := a.replicaCalc.GetRawResourceReplicas(ctx, currentReplicas, target.AverageValue.MilliValue(), res, tolerances, hpa.Namespace, selector, container)
		if err != nil {
			return 0, nil, time.Time{}, "", fmt.Errorf("failed to get %s usage: %w", res, err)
		}
		q := buildQuantity(res, raw)
		return replicas, &autoscalingv2.MetricValueStatus{AverageValue: &q}, ts, fmt.Sprintf("%s resource", res.String()), nil
	}
	if target.AverageUtilization == nil {
		return 0, nil, time.Time{}, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	replicas, utilization, raw, ts, err := a.replicaCalc.GetResourceReplicas(ctx, currentReplicas, *target.AverageUtilization, res, tolerances, hpa.Namespace, selector, container)
	if err != nil {
		return 0, nil, time.Time{}, "", fmt.Errorf("failed to get %s utilization: %w", res, err)
	}
	name := fmt.Sprintf("%s resource utilization (percentage of request)", res)
	if sourceType == autoscalingv2.ContainerResourceMetricSourceType {
		name = fmt.Sprintf("%s container resource utilization (percentage of request)", res)
	}
	q := buildQuantity(res, raw)
	return replicas, &autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: &q}, ts, name, nil
}

// buildQuantity formats a raw milli-value as metrics-server does: memory in
// binary units (Ki, Mi), everything else in decimal ones (m).
func buildQuantity(res v1.ResourceName, milli int64) resource.Quantity {
	format := resource.DecimalSI
	if res == v1.ResourceMemory {
		format = resource.BinarySI
	}
	return *resource.NewMilliQuantity(milli, format)
}

func (a *Controller) computeStatusForResourceMetric(ctx context.Context, currentReplicas int32, spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (int32, time.Time, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	replicas, current, ts, name, err := a.computeResourceMetric(ctx, currentReplicas, spec.Resource.Target, spec.Resource.Name, hpa, "", selector, autoscalingv2.ResourceMetricSourceType)
	if err != nil {
		return replicas, ts, name, a.unableToComputeCondition(hpa, "FailedGetResourceMetric", err), err
	}
	*status = autoscalingv2.MetricStatus{
		Type:     autoscalingv2.ResourceMetricSourceType,
		Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: *current},
	}
	return replicas, ts, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

func (a *Controller) computeStatusForContainerResourceMetric(ctx context.Context, currentReplicas int32, spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (int32, time.Time, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	src := spec.ContainerResource
	replicas, current, ts, name, err := a.computeResourceMetric(ctx, currentReplicas, src.Target, src.Name, hpa, src.Container, selector, autoscalingv2.ContainerResourceMetricSourceType)
	if err != nil {
		return replicas, ts, name, a.unableToComputeCondition(hpa, "FailedGetContainerResourceMetric", err), err
	}
	*status = autoscalingv2.MetricStatus{
		Type:              autoscalingv2.ContainerResourceMetricSourceType,
		ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: src.Name, Container: src.Container, Current: *current},
	}
	return replicas, ts, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
}

// computeStatusForExternalMetric handles a metric from outside the
// cluster, with an AverageValue target (per replica of the target's
// status) or a Value target (scaled by ready pods).
func (a *Controller) computeStatusForExternalMetric(ctx context.Context, specReplicas, statusReplicas int32, spec autoscalingv2.MetricSpec, hpa *autoscalingv2.HorizontalPodAutoscaler,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (int32, time.Time, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	src := spec.External
	tolerances := a.tolerancesForHpa(hpa)
	name := fmt.Sprintf("external metric %s(%+v)", src.Metric.Name, src.Metric.Selector)
	newStatus := func(current autoscalingv2.MetricValueStatus) autoscalingv2.MetricStatus {
		return autoscalingv2.MetricStatus{
			Type: autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
				Current: current,
			},
		}
	}
	if src.Target.AverageValue != nil {
		replicas, usage, ts, err := a.replicaCalc.GetExternalPerPodMetricReplicas(ctx, statusReplicas, src.Target.AverageValue.MilliValue(), src.Metric.Name, tolerances, hpa.Namespace, src.Metric.Selector)
		if err != nil {
			return 0, time.Time{}, "", a.unableToComputeCondition(hpa, "FailedGetExternalMetric", err), fmt.Errorf("failed to get %s external metric: %w", src.Metric.Name, err)
		}
		*status = newStatus(autoscalingv2.MetricValueStatus{AverageValue: milliQuantity(usage)})
		return replicas, ts, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	}
	if src.Target.Value != nil {
		replicas, usage, ts, err := a.replicaCalc.GetExternalMetricReplicas(ctx, specReplicas, src.Target.Value.MilliValue(), src.Metric.Name, tolerances, hpa.Namespace, src.Metric.Selector, selector)
		if err != nil {
			return 0, time.Time{}, "", a.unableToComputeCondition(hpa, "FailedGetExternalMetric", err), fmt.Errorf("failed to get external metric %s: %w", src.Metric.Name, err)
		}
		*status = newStatus(autoscalingv2.MetricValueStatus{Value: milliQuantity(usage)})
		return replicas, ts, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	}
	err := errors.New("invalid external metric source: neither a value target nor an average value target was set")
	return 0, time.Time{}, "", a.unableToComputeCondition(hpa, "FailedGetExternalMetric", err), err
}
