package ephemeral

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "ephemeral_volume_controller"

var (
	// createAttempts counts PVC creations, whether they succeed or not.
	createAttempts = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "create_total",
		Help:           "Number of PersistentVolumeClaim creation requests",
		StabilityLevel: metrics.ALPHA,
	})
	// createFailures counts the PVC creations the apiserver refused. Its
	// help text is the same as create_total's, as upstream has it.
	createFailures = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "create_failures_total",
		Help:           "Number of PersistentVolumeClaim creation requests",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(createAttempts, createFailures)
	})
}
