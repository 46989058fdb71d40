package garbagecollector

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
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

// recentDeletes remembers, by UID, the resourceVersion at which the
// collector deleted an object, until the graph sees that deletion. The
// monitor cache lags the API server: an item queued again meanwhile still
// looks undeleted there, and deleting it again would only 404 (terminal
// pods go at once).
type recentDeletes struct {
	mu           sync.Mutex
	versionByUID map[types.UID]string
}

// maxRecentDeletes bounds what lost forgets (e.g. a removed monitor's
// delete events) can leave behind; dropping entries costs at most a
// redundant delete.
const maxRecentDeletes = 4096

func newRecentDeletes() *recentDeletes {
	return &recentDeletes{versionByUID: map[types.UID]string{}}
}

func (r *recentDeletes) remember(uid types.UID, resourceVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.versionByUID) >= maxRecentDeletes {
		clear(r.versionByUID)
	}
	r.versionByUID[uid] = resourceVersion
}

// deletedAt reports whether uid was deleted at resourceVersion. An entry
// for another version is stale (the cache moved on) and is forgotten.
func (r *recentDeletes) deletedAt(uid types.UID, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	remembered, ok := r.versionByUID[uid]
	if ok && remembered != resourceVersion {
		delete(r.versionByUID, uid)
		return false
	}
	return ok
}

// forget drops uid's entry and says whether there was one: whether the
// deletion the graph now sees may be the collector's own.
func (r *recentDeletes) forget(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.versionByUID[uid]
	delete(r.versionByUID, uid)
	return ok
}

// restMappingError marks an owner/dependent kind the RESTMapper cannot map
// yet (e.g. a CRD not discovered); retried quietly.
type restMappingError struct{ kind, version string }

func (e *restMappingError) Error() string {
	return fmt.Sprintf("unable to get REST mapping for %s/%s.", e.version, e.kind)
}
