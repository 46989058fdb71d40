package clustertrustbundlepublisher

import (
	"errors"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// metricsSubsystem prefixes the publisher's metrics, as upstream.
const metricsSubsystem = "clustertrustbundle_publisher"

var (
	syncCounter = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_total",
		Help:           "Number of syncs that occurred in cluster trust bundle publisher.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"code"})

	syncLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "sync_duration_seconds",
		Help:           "The time it took to sync a cluster trust bundle.",
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
// code of an API status error that has one, 500 otherwise.
func recordMetrics(start time.Time, err error) {
	code := "500"
	var status apierrors.APIStatus
	switch {
	case err == nil:
		code = "200"
	case errors.As(err, &status) && status.Status().Code != 0:
		code = strconv.Itoa(int(status.Status().Code))
	}
	syncLatency.WithLabelValues(code).Observe(time.Since(start).Seconds())
	syncCounter.WithLabelValues(code).Inc()
}
