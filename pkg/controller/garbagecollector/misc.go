package garbagecollector

import (
	"fmt"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/lru"
)

// resourcesSyncError counts failed discovery/monitor resyncs, with
// upstream's name garbagecollector_controller_resources_sync_error_total.
var resourcesSyncError = metrics.NewCounter(&metrics.CounterOpts{
	Subsystem:      "garbagecollector_controller",
	Name:           "resources_sync_error_total",
	Help:           "Number of garbage collector resources sync errors",
	StabilityLevel: metrics.ALPHA,
})

var registerMetricsOnce sync.Once

// RegisterMetrics registers the garbage collector's metrics in the legacy
// registry; safe to call more than once.
func RegisterMetrics() {
	registerMetricsOnce.Do(func() { legacyregistry.MustRegister(resourcesSyncError) })
}

// referenceCache remembers owners verified absent, so many dependents of one
// deleted owner cost one lookup.
type referenceCache struct{ cache *lru.Cache }

func newReferenceCache(max int) *referenceCache { return &referenceCache{cache: lru.New(max)} }

func (c *referenceCache) Add(r objectReference) { c.cache.Add(r, nil) }

func (c *referenceCache) Has(r objectReference) bool {
	_, ok := c.cache.Get(r)
	return ok
}

// restMappingError marks an owner/dependent kind the RESTMapper cannot map
// yet (e.g. a CRD not discovered); retried quietly.
type restMappingError struct{ kind, version string }

func (e *restMappingError) Error() string {
	return fmt.Sprintf("unable to get REST mapping for %s/%s.", e.version, e.kind)
}
