package controller

import "k8s.io/component-base/metrics"

// NewStaleSyncSkipsMetric builds the per-controller counter of syncs skipped
// because a ConsistencyStore reported a lagging cache. Each controller
// registers its own under its subsystem; kind names the object in the help.
func NewStaleSyncSkipsMetric(subsystem, kind string) *metrics.CounterVec {
	return metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      subsystem,
		Name:           "stale_sync_skips_total",
		Help:           "Total number of " + kind + " syncs skipped due to a stale watch cache.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"group", "resource"})
}
