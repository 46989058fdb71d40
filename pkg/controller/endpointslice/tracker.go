package endpointslice

import (
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletionExpected marks a slice this controller deleted and whose delete
// event has not arrived yet.
const deletionExpected = -1

// EndpointSliceTracker remembers, per Service, the generation of every
// EndpointSlice this controller last wrote (or that it deleted). Comparing
// the informer cache with it tells whether the cache has caught up with our
// own writes; syncing from a lagging cache would create duplicate slices.
type EndpointSliceTracker struct {
	mu        sync.Mutex
	byService map[types.NamespacedName]map[types.UID]int64
}

// NewEndpointSliceTracker returns an empty tracker.
func NewEndpointSliceTracker() *EndpointSliceTracker {
	return &EndpointSliceTracker{byService: map[types.NamespacedName]map[types.UID]int64{}}
}

func sliceServiceNN(slice *discovery.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: slice.Namespace, Name: slice.Labels[discovery.LabelServiceName]}
}

// Has reports whether the slice is tracked.
func (t *EndpointSliceTracker) Has(slice *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byService[sliceServiceNN(slice)][slice.UID]
	return ok
}

// ShouldSync reports whether an informer event for the slice is news to us:
// an untracked slice or a newer generation than we wrote.
func (t *EndpointSliceTracker) ShouldSync(slice *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	gens, ok := t.byService[sliceServiceNN(slice)]
	if !ok {
		return true
	}
	g, ok := gens[slice.UID]
	return !ok || slice.Generation > g
}

// StaleSlices reports whether the listed slices are older than what this
// controller wrote: a slice we deleted is still listed, a listed slice has
// an older generation, or a slice we wrote is missing.
func (t *EndpointSliceTracker) StaleSlices(service *v1.Service, slices []*discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	gens, ok := t.byService[types.NamespacedName{Namespace: service.Namespace, Name: service.Name}]
	if !ok {
		return false
	}
	listed := make(map[types.UID]struct{}, len(slices))
	for _, s := range slices {
		listed[s.UID] = struct{}{}
		if g, ok := gens[s.UID]; ok && (g == deletionExpected || g > s.Generation) {
			return true
		}
	}
	for uid, g := range gens {
		if g == deletionExpected {
			continue
		}
		if _, ok := listed[uid]; !ok {
			return true
		}
	}
	return false
}

// Update records the generation of a slice we created or updated.
func (t *EndpointSliceTracker) Update(slice *discovery.EndpointSlice) {
	t.set(slice, slice.Generation)
}

// ExpectDeletion records that we deleted the slice.
func (t *EndpointSliceTracker) ExpectDeletion(slice *discovery.EndpointSlice) {
	t.set(slice, deletionExpected)
}

func (t *EndpointSliceTracker) set(slice *discovery.EndpointSlice, gen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	nn := sliceServiceNN(slice)
	gens, ok := t.byService[nn]
	if !ok {
		gens = map[types.UID]int64{}
		t.byService[nn] = gens
	}
	gens[slice.UID] = gen
}

// HandleDeletion forgets a deleted slice and reports whether the deletion
// was the one we expected (false means someone else deleted it and the
// Service must be synced again).
func (t *EndpointSliceTracker) HandleDeletion(slice *discovery.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	gens, ok := t.byService[sliceServiceNN(slice)]
	if !ok {
		return true
	}
	g, ok := gens[slice.UID]
	delete(gens, slice.UID)
	return !ok || g == deletionExpected
}

// DeleteService forgets everything about a deleted Service.
func (t *EndpointSliceTracker) DeleteService(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byService, types.NamespacedName{Namespace: namespace, Name: name})
}

// StaleInformerCache is returned by a sync that found the EndpointSlice
// informer cache behind this controller's own writes; the Service is
// requeued instead of acting on old data.
type StaleInformerCache struct {
	msg string
}

// NewStaleInformerCache returns a StaleInformerCache error.
func NewStaleInformerCache(msg string) *StaleInformerCache {
	return &StaleInformerCache{msg: msg}
}

func (e *StaleInformerCache) Error() string { return e.msg }

// IsStaleInformerCacheErr reports whether err is (or wraps) a StaleInformerCache.
func IsStaleInformerCacheErr(err error) bool {
	var target *StaleInformerCache
	return errors.As(err, &target)
}
