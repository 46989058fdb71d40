package controller

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// ConsistencyStore remembers the resource versions a controller wrote on
// behalf of each owner, so a sync can be skipped until the informers have
// caught up with those writes. Syncing from a cache older than our own
// writes would, for example, create pods a second time or write a stale
// status (upstream's StaleControllerConsistency* features).
type ConsistencyStore interface {
	// WroteAt records that a write for owner produced resource version rv of resource.
	WroteAt(owner types.NamespacedName, ownerUID types.UID, resource schema.GroupResource, rv string)
	// Clear forgets owner; with a non-empty ownerUID only if it matches.
	Clear(owner types.NamespacedName, ownerUID types.UID)
	// EnsureReady returns a *ConsistencyError while a cache is behind a
	// recorded write for owner; once all caught up it forgets owner.
	EnsureReady(owner types.NamespacedName) error
}

// ConsistencyError says which cache is behind.
type ConsistencyError struct {
	ReadRV        string
	WroteRV       string
	GroupResource schema.GroupResource
}

func (e *ConsistencyError) Error() string {
	return fmt.Sprintf("read version: %s is not as new as written version: %s for group resource %s", e.ReadRV, e.WroteRV, e.GroupResource.String())
}

// LastSyncRVGetter is what an informer store offers: the newest resource
// version it has seen ("" when client-go's AtomicFIFO feature is off).
type LastSyncRVGetter interface {
	LastStoreSyncResourceVersion() string
}

// NewConsistencyStore tracks writes against the given stores (typically
// informer.GetStore() per resource).
func NewConsistencyStore(stores map[schema.GroupResource]LastSyncRVGetter) ConsistencyStore {
	return &consistencyStore{stores: stores, owners: map[types.NamespacedName]*ownerWrites{}}
}

// NewNoopConsistencyStore never blocks a sync.
func NewNoopConsistencyStore() ConsistencyStore { return noopConsistencyStore{} }

type noopConsistencyStore struct{}

func (noopConsistencyStore) WroteAt(types.NamespacedName, types.UID, schema.GroupResource, string) {}
func (noopConsistencyStore) Clear(types.NamespacedName, types.UID)                                 {}
func (noopConsistencyStore) EnsureReady(types.NamespacedName) error                                { return nil }

type consistencyStore struct {
	stores map[schema.GroupResource]LastSyncRVGetter

	mu     sync.Mutex
	owners map[types.NamespacedName]*ownerWrites
}

// ownerWrites is the newest written RV per resource for one owner incarnation.
type ownerWrites struct {
	uid      types.UID
	versions map[schema.GroupResource]string
}

func (c *consistencyStore) WroteAt(owner types.NamespacedName, ownerUID types.UID, resource schema.GroupResource, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.owners[owner]
	if w == nil || w.uid != ownerUID {
		// A new owner incarnation starts from scratch.
		w = &ownerWrites{uid: ownerUID, versions: map[schema.GroupResource]string{}}
		c.owners[owner] = w
	}
	old, seen := w.versions[resource]
	if seen {
		// Keep the newer one; unparsable versions overwrite.
		if cmp, err := resourceversion.CompareResourceVersion(old, rv); err == nil && cmp >= 0 {
			return
		}
	}
	w.versions[resource] = rv
}

func (c *consistencyStore) Clear(owner types.NamespacedName, ownerUID types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.owners[owner]; w != nil && (ownerUID == "" || w.uid == ownerUID) {
		delete(c.owners, owner)
	}
}

func (c *consistencyStore) EnsureReady(owner types.NamespacedName) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.owners[owner]
	if w == nil {
		return nil
	}
	for gr, wrote := range w.versions {
		store := c.stores[gr]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		cmp, err := resourceversion.CompareResourceVersion(wrote, read)
		if err != nil {
			// Bad versions must not wedge the controller.
			continue
		}
		if cmp > 0 {
			return &ConsistencyError{ReadRV: read, WroteRV: wrote, GroupResource: gr}
		}
	}
	delete(c.owners, owner)
	return nil
}
