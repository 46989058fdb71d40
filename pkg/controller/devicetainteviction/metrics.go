package devicetainteviction

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "device_taint_eviction_controller"

var (
	// podDeletions counts the pods this controller deleted.
	podDeletions = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "pod_deletions_total",
		Help:           "Total number of Pods deleted by DeviceTaintEvictionController since its start.",
		StabilityLevel: metrics.ALPHA,
	})

	// podDeletionLatency is the time from when a pod was due for eviction
	// (taint added plus tolerationSeconds) until it was deleted.
	podDeletionLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "pod_deletion_duration_seconds",
		Help:           "Latency, in seconds, between the time when a device taint effect has been activated and a Pod's deletion via DeviceTaintEvictionController.",
		Buckets:        []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240},
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(podDeletions, podDeletionLatency)
	})
}
