package endpointslice

import (
	"errors"
)

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
