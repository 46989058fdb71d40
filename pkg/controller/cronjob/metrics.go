package cronjob

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// jobCreationSkew is cronjob_controller_job_creation_skew_duration_seconds:
// how late, after its scheduled time, each Job was created.
var jobCreationSkew = metrics.NewHistogram(&metrics.HistogramOpts{
	Subsystem:      "cronjob_controller",
	Name:           "job_creation_skew_duration_seconds",
	Help:           "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
	StabilityLevel: metrics.STABLE,
	Buckets:        metrics.ExponentialBuckets(1, 2, 10),
})

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(jobCreationSkew) })
}
