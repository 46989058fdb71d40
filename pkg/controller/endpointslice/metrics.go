package endpointslice

import (
	"math"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

const metricsSubsystem = "endpoint_slice_controller"

var (
	endpointsAddedPerSync = esutil.PerSyncHistogram(metricsSubsystem, "endpoints_added_per_sync",
		"Number of endpoints added on each Service sync", metrics.BETA)

	endpointsRemovedPerSync = esutil.PerSyncHistogram(metricsSubsystem, "endpoints_removed_per_sync",
		"Number of endpoints removed on each Service sync", metrics.BETA)

	endpointsDesired = esutil.Gauge(metricsSubsystem, "endpoints_desired",
		"Number of endpoints desired", metrics.BETA)

	numEndpointSlices = esutil.Gauge(metricsSubsystem, "num_endpoint_slices",
		"Number of EndpointSlices", metrics.BETA)

	desiredEndpointSlices = esutil.Gauge(metricsSubsystem, "desired_endpoint_slices",
		"Number of EndpointSlices that would exist with perfect endpoint allocation", metrics.BETA)

	endpointSliceChanges = esutil.ChangesCounter(metricsSubsystem)

	endpointSlicesChangedPerSync = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: metricsSubsystem,
		Name:      "endpointslices_changed_per_sync",
		Help:      "Number of EndpointSlices changed on each Service sync",
	}, []string{"topology", "traffic_distribution"})

	endpointSliceSyncs = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "syncs",
		Help:           "Number of EndpointSlice syncs",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	servicesCountByTrafficDistribution = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "services_count_by_traffic_distribution",
		Help:           "Number of Services using some specific trafficDistribution",
		StabilityLevel: metrics.BETA,
	}, []string{"traffic_distribution"})

	registerOnce sync.Once
)

// registerMetrics adds the controller's metrics to the legacy registry.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(endpointsAddedPerSync, endpointsRemovedPerSync, endpointsDesired,
			numEndpointSlices, desiredEndpointSlices, endpointSliceChanges, endpointSlicesChangedPerSync,
			endpointSliceSyncs, servicesCountByTrafficDistribution)
	})
}

type serviceTotals struct {
	actualSlices, desiredSlices, endpoints int
}

func totalsOf(items map[portMapKey]esutil.PortMapEfficiency, maxPerSlice int) serviceTotals {
	var t serviceTotals
	for _, e := range items {
		t.endpoints += e.Endpoints
		t.actualSlices += e.Slices
		if e.Endpoints > 0 {
			t.desiredSlices += int(math.Ceil(float64(e.Endpoints) / float64(maxPerSlice)))
		}
	}
	if t.desiredSlices == 0 {
		t.desiredSlices = 1
	}
	return t
}

// metricsCache keeps per-Service contributions so the cluster-wide gauges
// can be adjusted incrementally on every sync.
type metricsCache struct {
	mu                   sync.Mutex
	maxPerSlice          int
	byService            map[types.NamespacedName]map[portMapKey]esutil.PortMapEfficiency
	trafficDistByService map[types.NamespacedName]string
	actual, desired, eps int
}

func newMetricsCache(maxPerSlice int32) *metricsCache {
	return &metricsCache{
		maxPerSlice:          int(maxPerSlice),
		byService:            map[types.NamespacedName]map[portMapKey]esutil.PortMapEfficiency{},
		trafficDistByService: map[types.NamespacedName]string{},
	}
}

func (c *metricsCache) updateService(nn types.NamespacedName, items map[portMapKey]esutil.PortMapEfficiency) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byService[nn]; ok {
		p := totalsOf(prev, c.maxPerSlice)
		c.actual -= p.actualSlices
		c.desired -= p.desiredSlices
		c.eps -= p.endpoints
	}
	cur := totalsOf(items, c.maxPerSlice)
	c.actual += cur.actualSlices
	c.desired += cur.desiredSlices
	c.eps += cur.endpoints
	c.byService[nn] = items
	c.publish()
}

func (c *metricsCache) updateTrafficDistribution(nn types.NamespacedName, td *string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if td == nil {
		delete(c.trafficDistByService, nn)
	} else {
		c.trafficDistByService[nn] = *td
	}
	c.publish()
}

func (c *metricsCache) deleteService(nn types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.trafficDistByService, nn)
	if prev, ok := c.byService[nn]; ok {
		p := totalsOf(prev, c.maxPerSlice)
		c.actual -= p.actualSlices
		c.desired -= p.desiredSlices
		c.eps -= p.endpoints
		delete(c.byService, nn)
	}
	c.publish()
}

func (c *metricsCache) publish() {
	numEndpointSlices.WithLabelValues().Set(float64(c.actual))
	desiredEndpointSlices.WithLabelValues().Set(float64(c.desired))
	endpointsDesired.WithLabelValues().Set(float64(c.eps))
	counts := map[string]int{}
	for _, td := range c.trafficDistByService {
		counts[td]++
	}
	servicesCountByTrafficDistribution.Reset()
	for td, n := range counts {
		servicesCountByTrafficDistribution.WithLabelValues(td).Set(float64(n))
	}
}

func serviceNN(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
