package podautoscaler

import (
	"context"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	metricsclient "github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler/metrics"
)

// Tolerances are how far below (scaleDown) and above (scaleUp) 1.0 a usage
// ratio may be before the replica count changes.
type Tolerances struct {
	scaleDown float64
	scaleUp   float64
}

// NewTolerances returns tolerances for scaling down and up.
func NewTolerances(scaleDown, scaleUp float64) Tolerances {
	return Tolerances{scaleDown: scaleDown, scaleUp: scaleUp}
}

func (t Tolerances) String() string {
	return fmt.Sprintf("[down:%.1f%%, up:%.1f%%]", t.scaleDown*100., t.scaleUp*100.)
}

// isWithin reports whether usageRatio is close enough to 1 to keep the
// current replica count.
func (t Tolerances) isWithin(usageRatio float64) bool {
	return 1.0-t.scaleDown <= usageRatio && usageRatio <= 1.0+t.scaleUp
}

// ReplicaCalculator turns metric samples into a replica count proposal.
type ReplicaCalculator struct {
	metricsClient metricsclient.MetricsClient
	podLister     corelisters.PodLister
	// cpuInitializationPeriod is how long after a pod starts its CPU
	// samples are only trusted if taken after it became ready.
	cpuInitializationPeriod time.Duration
	// delayOfInitialReadinessStatus is how long after starting a pod that
	// is not ready is assumed to never have been ready yet.
	delayOfInitialReadinessStatus time.Duration
	clock                         clock.PassiveClock
	// podLevelResources is the PodLevelResources feature.
	podLevelResources bool
}

// NewReplicaCalculator returns a calculator reading pods from podLister;
// podLevelResources is the PodLevelResources feature.
func NewReplicaCalculator(metricsClient metricsclient.MetricsClient, podLister corelisters.PodLister, cpuInitializationPeriod, delayOfInitialReadinessStatus time.Duration, podLevelResources bool) *ReplicaCalculator {
	return &ReplicaCalculator{
		podLevelResources:             podLevelResources,
		metricsClient:                 metricsClient,
		podLister:                     podLister,
		cpuInitializationPeriod:       cpuInitializationPeriod,
		delayOfInitialReadinessStatus: delayOfInitialReadinessStatus,
		clock:                         clock.RealClock{},
	}
}

// GetResourceReplicas proposes a replica count for a target utilization
// (percent of requests) of resource by the selected pods, or by their
// named container. It also returns the current utilization and the
// average raw usage.
func (c *ReplicaCalculator) GetResourceReplicas(ctx context.Context, currentReplicas int32, targetUtilization int32, resource v1.ResourceName, tolerances Tolerances, namespace string, selector labels.Selector, container string) (replicaCount int32, utilization int32, rawUtilization int64, timestamp time.Time, err error) {
	metrics, timestamp, err := c.metricsClient.GetResourceMetric(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}

	g := c.groupPods(pods, metrics, resource)
	removeMetricsForPods(metrics, g.ignored)
	removeMetricsForPods(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, 0, time.Time{}, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}

	requests, err := calculateRequests(pods, container, resource, c.podLevelResources)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}

	usageRatio, utilization, rawUtilization, err := metricsclient.GetResourceUtilizationRatio(metrics, requests, targetUtilization)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}

	scaleUpWithUnready := len(g.unready) > 0 && usageRatio > 1.0
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if tolerances.isWithin(usageRatio) {
			return currentReplicas, utilization, rawUtilization, timestamp, nil
		}
		// Every pod is accounted for: scale proportionally.
		return int32(math.Ceil(usageRatio * float64(g.readyCount))), utilization, rawUtilization, timestamp, nil
	}

	// Fill the gaps conservatively, so that pods we cannot see dampen the
	// change instead of amplifying it.
	if len(g.missing) > 0 {
		switch {
		case usageRatio < 1.0:
			// Scaling down: assume a missing pod uses its whole request, or
			// the target when that is above 100%.
			fallback := int64(max(100, targetUtilization))
			for name := range g.missing {
				metrics[name] = metricsclient.PodMetric{Value: requests[name] * fallback / 100}
			}
		case usageRatio > 1.0:
			// Scaling up: assume a missing pod uses nothing.
			for name := range g.missing {
				metrics[name] = metricsclient.PodMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		// Scaling up: assume an unready pod uses nothing.
		for name := range g.unready {
			metrics[name] = metricsclient.PodMetric{Value: 0}
		}
	}

	newUsageRatio, _, _, err := metricsclient.GetResourceUtilizationRatio(metrics, requests, targetUtilization)
	if err != nil {
		return 0, utilization, rawUtilization, time.Time{}, err
	}
	if keepCurrent(tolerances, usageRatio, newUsageRatio) {
		return currentReplicas, utilization, rawUtilization, timestamp, nil
	}
	newReplicas := int32(math.Ceil(newUsageRatio * float64(len(metrics))))
	if reversesDirection(newUsageRatio, newReplicas, currentReplicas) {
		return currentReplicas, utilization, rawUtilization, timestamp, nil
	}
	return newReplicas, utilization, rawUtilization, timestamp, nil
}

// keepCurrent reports whether, once gaps are filled, the change is too
// small or would go the other way than the raw samples suggest.
func keepCurrent(tolerances Tolerances, usageRatio, newUsageRatio float64) bool {
	return tolerances.isWithin(newUsageRatio) ||
		(usageRatio < 1.0 && newUsageRatio > 1.0) ||
		(usageRatio > 1.0 && newUsageRatio < 1.0)
}

// reversesDirection reports whether counting the filled-in pods turns a
// scale-down into a scale-up or the reverse.
func reversesDirection(newUsageRatio float64, newReplicas, currentReplicas int32) bool {
	return (newUsageRatio < 1.0 && newReplicas > currentReplicas) ||
		(newUsageRatio > 1.0 && newReplicas < currentReplicas)
}

// GetRawResourceReplicas proposes a replica count for a target average
// usage (milli-value) of resource by the selected pods or their container.
func (c *ReplicaCalculator) GetRawResourceReplicas(ctx context.Context, currentReplicas int32, targetUsage int64, resource v1.ResourceName, tolerances Tolerances, namespace string, selector labels.Selector, container string) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	metrics, timestamp, err := c.metricsClient.GetResourceMetric(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	replicaCount, usage, err = c.calcPlainMetricReplicas(metrics, currentReplicas, targetUsage, tolerances, namespace, selector, resource)
	return replicaCount, usage, timestamp, err
}

// GetMetricReplicas proposes a replica count for a target average value
// (milli-value) of a custom per-pod metric.
func (c *ReplicaCalculator) GetMetricReplicas(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tolerances Tolerances, namespace string, selector labels.Selector, metricSelector labels.Selector) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	metrics, timestamp, err := c.metricsClient.GetRawMetric(ctx, metricName, namespace, selector, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s: %w", metricName, err)
	}
	replicaCount, usage, err = c.calcPlainMetricReplicas(metrics, currentReplicas, targetUsage, tolerances, namespace, selector, "")
	return replicaCount, usage, timestamp, err
}

// calcPlainMetricReplicas is GetResourceReplicas for average values rather
// than utilization: missing pods count as exactly on target when scaling
// down.
func (c *ReplicaCalculator) calcPlainMetricReplicas(metrics metricsclient.PodMetricsInfo, currentReplicas int32, targetUsage int64, tolerances Tolerances, namespace string, selector labels.Selector, resource v1.ResourceName) (replicaCount int32, usage int64, err error) {
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, 0, err
	}

	g := c.groupPods(pods, metrics, resource)
	removeMetricsForPods(metrics, g.ignored)
	removeMetricsForPods(metrics, g.unready)
	if len(metrics) == 0 {
		return 0, 0, fmt.Errorf("did not receive metrics for targeted pods (pods might be unready)")
	}

	usageRatio, usage := metricsclient.GetMetricUsageRatio(metrics, targetUsage)
	scaleUpWithUnready := len(g.unready) > 0 && usageRatio > 1.0
	if !scaleUpWithUnready && len(g.missing) == 0 {
		if tolerances.isWithin(usageRatio) {
			return currentReplicas, usage, nil
		}
		return int32(math.Ceil(usageRatio * float64(g.readyCount))), usage, nil
	}

	if len(g.missing) > 0 {
		switch {
		case usageRatio < 1.0:
			for name := range g.missing {
				metrics[name] = metricsclient.PodMetric{Value: targetUsage}
			}
		case usageRatio > 1.0:
			for name := range g.missing {
				metrics[name] = metricsclient.PodMetric{Value: 0}
			}
		}
	}
	if scaleUpWithUnready {
		for name := range g.unready {
			metrics[name] = metricsclient.PodMetric{Value: 0}
		}
	}

	newUsageRatio, _ := metricsclient.GetMetricUsageRatio(metrics, targetUsage)
	if keepCurrent(tolerances, usageRatio, newUsageRatio) {
		return currentReplicas, usage, nil
	}
	newReplicas := int32(math.Ceil(newUsageRatio * float64(len(metrics))))
	if reversesDirection(newUsageRatio, newReplicas, currentReplicas) {
		return currentReplicas, usage, nil
	}
	return newReplicas, usage, nil
}

// GetObjectMetricReplicas proposes a replica count for a target value of a
// metric describing one object: the count of ready pods scaled by the
// ratio to the target.
func (c *ReplicaCalculator) GetObjectMetricReplicas(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tolerances Tolerances, namespace string, objectRef *autoscalingv2.CrossVersionObjectReference, selector labels.Selector, metricSelector labels.Selector) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	usage, _, err = c.metricsClient.GetObjectMetric(ctx, metricName, namespace, objectRef, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w", metricName, objectRef.Kind, namespace, objectRef.Name, err)
	}
	usageRatio := float64(usage) / float64(targetUsage)
	// Upstream reports a zero timestamp for this metric type.
	replicaCount, timestamp, err = c.getUsageRatioReplicaCount(currentReplicas, usageRatio, tolerances, namespace, selector)
	return replicaCount, usage, timestamp, err
}

// getUsageRatioReplicaCount scales the ready pod count by usageRatio. From
// zero replicas there are no pods to count nor a tolerance to apply: the
// ratio itself, rounded up, is the proposal (so zero usage stays at zero).
func (c *ReplicaCalculator) getUsageRatioReplicaCount(currentReplicas int32, usageRatio float64, tolerances Tolerances, namespace string, selector labels.Selector) (replicaCount int32, timestamp time.Time, err error) {
	if currentReplicas == 0 {
		return int32(math.Ceil(usageRatio)), timestamp, nil
	}
	if tolerances.isWithin(usageRatio) {
		return currentReplicas, timestamp, nil
	}
	ready, err := c.getReadyPodsCount(namespace, selector)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	return clampToInt32(usageRatio * float64(ready)), timestamp, nil
}

// clampToInt32 rounds f up, saturating at the largest int32.
func clampToInt32(f float64) int32 {
	if f > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(math.Ceil(f))
}

// GetObjectPerPodMetricReplicas proposes a replica count for a target
// average value per pod of a metric describing one object. The average
// reported is the metric divided by statusReplicas.
func (c *ReplicaCalculator) GetObjectPerPodMetricReplicas(ctx context.Context, statusReplicas int32, targetAverageUsage int64, metricName string, tolerances Tolerances, namespace string, objectRef *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	usage, timestamp, err = c.metricsClient.GetObjectMetric(ctx, metricName, namespace, objectRef, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w", metricName, objectRef.Kind, namespace, objectRef.Name, err)
	}
	replicaCount = statusReplicas
	usageRatio := float64(usage) / (float64(targetAverageUsage) * float64(replicaCount))
	if !tolerances.isWithin(usageRatio) {
		replicaCount = int32(math.Ceil(float64(usage) / float64(targetAverageUsage)))
	}
	usage = int64(math.Ceil(float64(usage) / float64(statusReplicas)))
	return replicaCount, usage, timestamp, nil
}

// getReadyPodsCount counts the selected pods that are running and ready.
func (c *ReplicaCalculator) getReadyPodsCount(namespace string, selector labels.Selector) (int64, error) {
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return 0, err
	}
	var ready int64
	for _, pod := range pods {
		if pod.Status.Phase == v1.PodRunning && controller.IsPodReady(pod) {
			ready++
		}
	}
	return ready, nil
}

// listPods returns the selected pods, or an error when there are none.
func (c *ReplicaCalculator) listPods(namespace string, selector labels.Selector) ([]*v1.Pod, error) {
	pods, err := c.podLister.Pods(namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("no pods returned by selector while calculating replica count")
	}
	return pods, nil
}

// GetExternalMetricReplicas proposes a replica count for a target total
// value of an external metric (summed over the matching series).
func (c *ReplicaCalculator) GetExternalMetricReplicas(ctx context.Context, currentReplicas int32, targetUsage int64, metricName string, tolerances Tolerances, namespace string, metricSelector *metav1.LabelSelector, podSelector labels.Selector) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	values, _, err := c.metricsClient.GetExternalMetric(ctx, metricName, namespace, sel)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s", namespace, metricName, metricSelector, err)
	}
	usage = sumSaturating(values)
	usageRatio := float64(usage) / float64(targetUsage)
	// Upstream reports a zero timestamp for this metric type.
	replicaCount, timestamp, err = c.getUsageRatioReplicaCount(currentReplicas, usageRatio, tolerances, namespace, podSelector)
	return replicaCount, usage, timestamp, err
}

// sumSaturating adds values, stopping at the largest int64 on overflow.
func sumSaturating(values []int64) int64 {
	var sum int64
	for _, v := range values {
		if v > 0 && sum > math.MaxInt64-v {
			return math.MaxInt64
		}
		sum += v
	}
	return sum
}

// GetExternalPerPodMetricReplicas proposes a replica count for a target
// value per pod of an external metric: the total divided by the target.
func (c *ReplicaCalculator) GetExternalPerPodMetricReplicas(ctx context.Context, statusReplicas int32, targetUsagePerPod int64, metricName string, tolerances Tolerances, namespace string, metricSelector *metav1.LabelSelector) (replicaCount int32, usage int64, timestamp time.Time, err error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	values, timestamp, err := c.metricsClient.GetExternalMetric(ctx, metricName, namespace, sel)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s", namespace, metricName, metricSelector, err)
	}
	usage = 0
	for _, v := range values {
		usage += v
		if usage < 0 {
			// Only an overflow gets here.
			usage = math.MaxInt64
			break
		}
	}

	replicaCount = statusReplicas
	usageRatio := float64(usage) / (float64(targetUsagePerPod) * float64(replicaCount))
	if !tolerances.isWithin(usageRatio) {
		replicaCount = clampToInt32(float64(usage) / float64(targetUsagePerPod))
	}
	if float64(usage) >= float64(math.MaxInt64) {
		usage = math.MaxInt64
	} else {
		usage = int64(math.Ceil(float64(usage) / float64(statusReplicas)))
	}
	return replicaCount, usage, timestamp, nil
}

// podGroups sorts the selected pods for a calculation.
type podGroups struct {
	// readyCount counts the pods whose sample is trusted.
	readyCount int
	// unready pods are pending, or (for CPU) not ready or not ready long
	// enough for their sample to be trusted.
	unready sets.Set[string]
	// missing pods have no sample.
	missing sets.Set[string]
	// ignored pods are being deleted or have failed.
	ignored sets.Set[string]
}

func (c *ReplicaCalculator) groupPods(pods []*v1.Pod, metrics metricsclient.PodMetricsInfo, resource v1.ResourceName) podGroups {
	g := podGroups{unready: sets.New[string](), missing: sets.New[string](), ignored: sets.New[string]()}
	now := c.clock.Now()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodFailed {
			g.ignored.Insert(pod.Name)
			continue
		}
		if pod.Status.Phase == v1.PodPending {
			g.unready.Insert(pod.Name)
			continue
		}
		metric, found := metrics[pod.Name]
		if !found {
			g.missing.Insert(pod.Name)
			continue
		}
		// Only CPU spikes while a pod initialises, so only CPU samples
		// depend on readiness.
		if resource == v1.ResourceCPU && c.cpuSampleUntrusted(pod, metric, now) {
			g.unready.Insert(pod.Name)
			continue
		}
		g.readyCount++
	}
	return g
}

// cpuSampleUntrusted reports whether a CPU sample must be ignored: during
// the initialization period unless the pod is ready and the sample's whole
// window falls after it became ready; afterwards only if the pod is not
// ready and has never been (its readiness last changed within the initial
// readiness delay after it started).
func (c *ReplicaCalculator) cpuSampleUntrusted(pod *v1.Pod, metric metricsclient.PodMetric, now time.Time) bool {
	ready := podCondition(pod, v1.PodReady)
	if ready == nil || pod.Status.StartTime == nil {
		return true
	}
	start := pod.Status.StartTime.Time
	if start.Add(c.cpuInitializationPeriod).After(now) {
		return ready.Status == v1.ConditionFalse || metric.Timestamp.Before(ready.LastTransitionTime.Add(metric.Window))
	}
	return ready.Status == v1.ConditionFalse && start.Add(c.delayOfInitialReadinessStatus).After(ready.LastTransitionTime.Time)
}

func podCondition(pod *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func removeMetricsForPods(metrics metricsclient.PodMetricsInfo, pods sets.Set[string]) {
	for name := range pods {
		delete(metrics, name)
	}
}
