package tainteviction

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "taint_eviction_controller"

var (
	podDeletionsTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "pod_deletions_total",
		Help:           "Total number of Pods deleted by TaintEvictionController since its start.",
		StabilityLevel: metrics.ALPHA,
	})

	podDeletionsLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           "pod_deletion_duration_seconds",
		Help:           "Latency, in seconds, between the time when a taint effect has been activated for the Pod and its deletion via TaintEvictionController.",
		Buckets:        []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240},
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// Register adds the taint_eviction_controller_* metrics to the legacy
// registry; NewController calls it.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(podDeletionsTotal, podDeletionsLatency)
	})
}
