package endpointslicemirroring

import (
	"math"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

const metricsSubsystem = "endpoint_slice_mirroring_controller"

var (
	endpointsAddedPerSync   = esutil.PerSyncHistogram(metricsSubsystem, "endpoints_added_per_sync", "Number of endpoints added on each Endpoints sync", metrics.ALPHA)
	endpointsUpdatedPerSync = esutil.PerSyncHistogram(metricsSubsystem, "endpoints_updated_per_sync", "Number of endpoints updated on each Endpoints sync", metrics.ALPHA)
	endpointsRemovedPerSync = esutil.PerSyncHistogram(metricsSubsystem, "endpoints_removed_per_sync", "Number of endpoints removed on each Endpoints sync", metrics.ALPHA)
	addressesSkippedPerSync = esutil.PerSyncHistogram(metricsSubsystem, "addresses_skipped_per_sync",
		"Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset", metrics.ALPHA)

	endpointsSyncDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "endpoints_sync_duration",
		Help:           "Duration of syncEndpoints() in seconds",
		StabilityLevel: metrics.ALPHA,
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
	}, []string{})

	endpointsDesired      = esutil.Gauge(metricsSubsystem, "endpoints_desired", "Number of endpoints desired", metrics.ALPHA)
	numEndpointSlices     = esutil.Gauge(metricsSubsystem, "num_endpoint_slices", "Number of EndpointSlices", metrics.ALPHA)
	desiredEndpointSlices = esutil.Gauge(metricsSubsystem, "desired_endpoint_slices", "Number of EndpointSlices that would exist with perfect endpoint allocation", metrics.ALPHA)

	endpointSliceChanges = esutil.ChangesCounter(metricsSubsystem)

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

// metricsCache keeps each Endpoints object's contribution so the gauges can
// be adjusted on every sync without walking everything.
type metricsCache struct {
	mu          sync.Mutex
	maxPerSlice int
	byEndpoints map[types.NamespacedName]map[portMapKey]esutil.PortMapEfficiency
	totals      cacheTotals
}

type cacheTotals struct {
	endpoints, actualSlices, desiredSlices int
}

func (t *cacheTotals) add(items map[portMapKey]esutil.PortMapEfficiency, maxPerSlice, sign int) {
	for _, e := range items {
		t.endpoints += sign * e.Endpoints
		t.actualSlices += sign * e.Slices
		t.desiredSlices += sign * int(math.Ceil(float64(e.Endpoints)/float64(maxPerSlice)))
	}
}

func newMetricsCache(maxPerSlice int32) *metricsCache {
	return &metricsCache{
		maxPerSlice: int(maxPerSlice),
		byEndpoints: map[types.NamespacedName]map[portMapKey]esutil.PortMapEfficiency{},
	}
}

// update replaces the contribution of one Endpoints object.
func (c *metricsCache) update(nn types.NamespacedName, items map[portMapKey]esutil.PortMapEfficiency) {
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
