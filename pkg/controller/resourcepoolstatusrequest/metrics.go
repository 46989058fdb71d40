package resourcepoolstatusrequest

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "resourcepoolstatusrequest_controller"

// Upstream's families, names, labels and help texts (the help is part of
// what /metrics shows).
var (
	requestsProcessed = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "requests_processed_total",
		Help:           "Total number of ResourcePoolStatusRequests processed",
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver_name"})
	requestErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "request_processing_errors_total",
		Help:           "Total number of errors encountered while processing ResourcePoolStatusRequests",
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver_name"})
	requestDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "request_processing_duration_seconds",
		Help:           "Time taken to process a ResourcePoolStatusRequest",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver_name"})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(requestsProcessed, requestErrors, requestDuration)
	})
}
