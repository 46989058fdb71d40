package podautoscaler

import (
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const metricsSubsystem = "horizontal_pod_autoscaler_controller"

// actionLabel says what a reconciliation or metric computation led to.
type actionLabel string

// errorLabel says which kind of error, if any, a reconciliation or metric
// computation met.
type errorLabel string

const (
	actionScaleUp   actionLabel = "scale_up"
	actionScaleDown actionLabel = "scale_down"
	actionNone      actionLabel = "none"

	// errorSpec blames the HPA's spec.
	errorSpec errorLabel = "spec"
	// errorInternal blames a computation or another component.
	errorInternal errorLabel = "internal"
	errorNone     errorLabel = "none"
)

var (
	reconciliationsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reconciliations_total",
		Help:           "Number of reconciliations of HPA controller. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.",
		StabilityLevel: metrics.BETA,
	}, []string{"action", "error"})

	reconciliationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "reconciliation_duration_seconds",
		Help:           "The time(seconds) that the HPA controller takes to reconcile once. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. Note that if both spec and internal errors happen during a reconciliation, the first one to occur is reported in `error` label.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.BETA,
	}, []string{"action", "error"})

	metricComputationTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metric_computation_total",
		Help:           "Number of metric computations. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. Also, the label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
		StabilityLevel: metrics.BETA,
	}, []string{"action", "error", "metric_type"})

	metricComputationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "metric_computation_duration_seconds",
		Help:           "The time(seconds) that the HPA controller takes to calculate one metric. The label 'action' should be either 'scale_down', 'scale_up', or 'none'. The label 'error' should be either 'spec', 'internal', or 'none'. The label 'metric_type' corresponds to HPA.spec.metrics[*].type",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.BETA,
	}, []string{"action", "error", "metric_type"})

	numHorizontalPodAutoscalers = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "num_horizontal_pod_autoscalers",
		Help:           "Current number of controlled HPA objects.",
		StabilityLevel: metrics.ALPHA,
	})

	desiredReplicasCount = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "desired_replicas",
		Help:           "Current desired replica count for HPA objects.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "hpa_name"})

	staleSyncSkips = controller.NewStaleSyncSkipsMetric(metricsSubsystem, "HPA")

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(reconciliationsTotal, reconciliationDuration,
			metricComputationTotal, metricComputationDuration,
			numHorizontalPodAutoscalers, desiredReplicasCount, staleSyncSkips)
	})
}

// monitor records the controller's metrics; tests swap it for a recorder.
type monitor interface {
	reconciled(action actionLabel, err errorLabel, d time.Duration)
	metricComputed(action actionLabel, err errorLabel, d time.Duration, t autoscalingv2.MetricSourceType)
	hpaAdded()
	hpaDeleted()
	desiredReplicas(namespace, name string, replicas int32)
	syncSkipped(gr schema.GroupResource)
}

type promMonitor struct{}

func (promMonitor) reconciled(action actionLabel, err errorLabel, d time.Duration) {
	reconciliationsTotal.WithLabelValues(string(action), string(err)).Inc()
	reconciliationDuration.WithLabelValues(string(action), string(err)).Observe(d.Seconds())
}

func (promMonitor) metricComputed(action actionLabel, err errorLabel, d time.Duration, t autoscalingv2.MetricSourceType) {
	metricComputationTotal.WithLabelValues(string(action), string(err), string(t)).Inc()
	metricComputationDuration.WithLabelValues(string(action), string(err), string(t)).Observe(d.Seconds())
}

func (promMonitor) hpaAdded()   { numHorizontalPodAutoscalers.Inc() }
func (promMonitor) hpaDeleted() { numHorizontalPodAutoscalers.Dec() }

func (promMonitor) desiredReplicas(namespace, name string, replicas int32) {
	desiredReplicasCount.WithLabelValues(namespace, name).Set(float64(replicas))
}

func (promMonitor) syncSkipped(gr schema.GroupResource) {
	staleSyncSkips.WithLabelValues(gr.Group, gr.Resource).Inc()
}
