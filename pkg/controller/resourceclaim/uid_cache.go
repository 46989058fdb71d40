package resourceclaim

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// uidCache is a bounded set of UIDs; the least recently used ones go first.
type uidCache struct {
	cache *lru.Cache
}

func newUIDCache(size int) *uidCache {
	return &uidCache{cache: lru.New(size)}
}

func (c *uidCache) Add(uid types.UID) {
	c.cache.Add(uid, nil)
}

func (c *uidCache) Has(uid types.UID) bool {
	_, found := c.cache.Get(uid)
	return found
}
