package testutil

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ErrCacheBehind is what StaleAfterWrite's EnsureReady returns.
var ErrCacheBehind = errors.New("cache behind a recorded write")

// StaleAfterWrite is a consistency store whose caches are behind whatever
// was recorded: once WroteAt has been called, every sync is held back.
type StaleAfterWrite struct {
	mu    sync.Mutex
	wrote string
}

func (s *StaleAfterWrite) WroteAt(_ types.NamespacedName, _ types.UID, _ schema.GroupResource, rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrote = rv
}

func (s *StaleAfterWrite) Clear(types.NamespacedName, types.UID) {}

func (s *StaleAfterWrite) EnsureReady(types.NamespacedName) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote == "" {
		return nil
	}
	return fmt.Errorf("%w at version %s", ErrCacheBehind, s.wrote)
}

// Wrote is the last resource version recorded.
func (s *StaleAfterWrite) Wrote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wrote
}
