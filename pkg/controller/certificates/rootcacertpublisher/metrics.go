package rootcacertpublisher

import (
	"errors"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsSubsystem prefixes the publisher's metrics.
const metricsSubsystem = "root_ca_cert_publisher"

var (
	syncCounter = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_total",
		Help:           "Number of namespace syncs happened in root ca cert publisher.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})

	// The help text repeats the counter's, as upstream's does.
	syncLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_duration_seconds",
		Help:           "Number of namespace syncs happened in root ca cert publisher.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(syncCounter, syncLatency)
	})
}

// recordMetrics labels a sync with an HTTP-like code: 200 on success, the
// API status code of a StatusError that has one, 500 otherwise.
func recordMetrics(start time.Time, err error) {
	code := "500"
	var se *apierrors.StatusError
	switch {
	case err == nil:
		code = "200"
	case errors.As(err, &se) && se.Status().Code != 0:
		code = strconv.Itoa(int(se.Status().Code))
	}
	syncLatency.WithLabelValues(code).Observe(time.Since(start).Seconds())
	syncCounter.WithLabelValues(code).Inc()
}
