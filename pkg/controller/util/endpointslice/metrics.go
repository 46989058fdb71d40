package util

import "k8s.io/component-base/metrics"

// The EndpointSlice and EndpointSliceMirroring controllers publish metrics
// of the same names and shapes under their own subsystems; these build them.

// PerSyncHistogram counts something (endpoints, addresses) per sync.
func PerSyncHistogram(subsystem, name, help string, stability metrics.StabilityLevel) *metrics.HistogramVec {
	return metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      subsystem,
		Name:           name,
		Help:           help,
		StabilityLevel: stability,
		Buckets:        metrics.ExponentialBuckets(2, 2, 15),
	}, []string{})
}

// Gauge is an unlabelled gauge.
func Gauge(subsystem, name, help string, stability metrics.StabilityLevel) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      subsystem,
		Name:           name,
		Help:           help,
		StabilityLevel: stability,
	}, []string{})
}

// ChangesCounter counts slice writes by operation (create, update, delete).
func ChangesCounter(subsystem string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "changes",
		Help:           "Number of EndpointSlice changes",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})
}

// PortMapEfficiency is what one port mapping of one owner contributes to
// the endpoints_desired, num_endpoint_slices and desired_endpoint_slices
// gauges.
type PortMapEfficiency struct {
	Endpoints int
	Slices    int
}
