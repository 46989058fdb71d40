package replicaset

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const metricsSubsystem = "replicaset_controller"

var (
	// sortingDeletionAgeRatio shows how well scale-down picks young pods.
	sortingDeletionAgeRatio = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem: metricsSubsystem,
		Name:      "sorting_deletion_age_ratio",
		Help: "The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). Should be <2. " +
			"The intent of this metric is to measure the rough efficacy of the sorting (and deletion) of pods when " +
			"a replicaset scales down. This only considers Ready pods when calculating and reporting.",
		Buckets:        metrics.ExponentialBuckets(0.25, 2, 6),
		StabilityLevel: metrics.ALPHA,
	})

	// staleSyncSkips counts syncs postponed because a cache lagged our writes.
	staleSyncSkips = controller.NewStaleSyncSkipsMetric(metricsSubsystem, "ReplicaSet")

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(sortingDeletionAgeRatio, staleSyncSkips)
	})
}
