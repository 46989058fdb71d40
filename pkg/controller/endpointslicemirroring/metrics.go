package endpointslicemirroring

import (
	"math"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "endpoint_slice_mirroring_controller"

func perSyncHistogram(name, help string) *metrics.HistogramVec {
	return metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           name,
		Help:           help,
		StabilityLevel: metrics.ALPHA,
		Buckets:        metrics.ExponentialBuckets(2, 2, 15),
	}, []string{})
}

func gauge(name, help string) *metrics.GaugeVec {
	return metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           name,
		Help:           help,
		StabilityLevel: metrics.ALPHA,
	}, []string{})
}

var (
	endpointsAddedPerSync   = perSyncHistogram("endpoints_added_per_sync", "Number of endpoints added on each Endpoints sync")
	endpointsUpdatedPerSync = perSyncHistogram("endpoints_updated_per_sync", "Number of endpoints updated on each Endpoints sync")
	endpointsRemovedPerSync = perSyncHistogram("endpoints_removed_per_sync", "Number of endpoints removed on each Endpoints sync")
	addressesSkippedPerSync = perSyncHistogram("addresses_skipped_per_sync",
		"Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset")

	endpointsSyncDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "endpoints_sync_duration",
		Help:           "Duration of syncEndpoints() in seconds",
		StabilityLevel: metrics.ALPHA,
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
	}, []string{})

	endpointsDesired      = gauge("endpoints_desired", "Number of endpoints desired")
	numEndpointSlices     = gauge("num_endpoint_slices", "Number of EndpointSlices")
	desiredEndpointSlices = gauge("desired_endpoint_slices", "Number of EndpointSlices that would exist with perfect endpoint allocation")

	endpointSliceChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "changes",
		Help:           "Number of EndpointSlice changes",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	registerOnce sync.Once
)

// registerMetrics adds the controller's metrics to the legacy registry.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(endpointsAddedPerSync, endpointsUpdatedPerSync, endpointsRemovedPerSync,
			addressesSkippedPerSync, endpointsSyncDuration, endpointsDesired, numEndpointSlices,
			desiredEndpointSlices, endpointSliceChanges)
	})
}

// efficiency is what one port mapping of one Endpoints object contributes
// to the gauges.
type efficiency struct {
	endpoints int
	slices    int
}

// metricsCache keeps each Endpoints object's contribution so the gauges can
// be adjusted on every sync without walking everything.
type metricsCache struct {
	mu          sync.Mutex
	maxPerSlice int
	byEndpoints map[types.NamespacedName]map[portMapKey]efficiency
	totals      cacheTotals
}

type cacheTotals struct {
	endpoints, actualSlices, desiredSlices int
}

func (t *cacheTotals) add(items map[portMapKey]efficiency, maxPerSlice, sign int) {
	for _, e := range items {
		t.endpoints += sign * e.endpoints
		t.actualSlices += sign * e.slices
		t.desiredSlices += sign * int(math.Ceil(float64(e.endpoints)/float64(maxPerSlice)))
	}
}

func newMetricsCache(maxPerSlice int32) *metricsCache {
	return &metricsCache{
		maxPerSlice: int(maxPerSlice),
		byEndpoints: map[types.NamespacedName]map[portMapKey]efficiency{},
	}
}

// update replaces the contribution of one Endpoints object.
func (c *metricsCache) update(nn types.NamespacedName, items map[portMapKey]efficiency) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totals.add(c.byEndpoints[nn], c.maxPerSlice, -1)
	c.totals.add(items, c.maxPerSlice, 1)
	c.byEndpoints[nn] = items
	c.publish()
}

// delete forgets an Endpoints object that is no longer mirrored.
func (c *metricsCache) delete(nn types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.byEndpoints[nn]
	if !ok {
		return
	}
	c.totals.add(prev, c.maxPerSlice, -1)
	delete(c.byEndpoints, nn)
	c.publish()
}

func (c *metricsCache) publish() {
	endpointsDesired.WithLabelValues().Set(float64(c.totals.endpoints))
	numEndpointSlices.WithLabelValues().Set(float64(c.totals.actualSlices))
	desiredEndpointSlices.WithLabelValues().Set(float64(c.totals.desiredSlices))
}
