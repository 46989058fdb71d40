package testutil

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
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

// FailedCreate is a pod create's failure and whether it leaves the pod's
// existence unknown.
type FailedCreate struct {
	Name      string
	Err       error
	Uncertain bool
}

// FailedCreates are two failures without the API server's verdict and a
// refusal (the positive control: the pod does not exist).
func FailedCreates() []FailedCreate {
	return []FailedCreate{
		{"connection lost", errors.New("http2: client connection lost"), true},
		{"server timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "create", 1), true},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")), false},
	}
}

// CheckSyncAfterFailedCreate makes the first pod create of sync fail with
// fc.Err, then syncs again. The pod that create may have made is in the
// clientset at resource version 7, not in the cache. After an uncertain
// failure the second sync must list the pods live, wait for version 7 in
// store and create nothing; after a refusal it must create recreate pods
// without a list. created counts the pod creates since pc.Clear.
func CheckSyncAfterFailedCreate(t testing.TB, fc FailedCreate, client *fake.Clientset, store *StaleAfterWrite,
	pc *FakePodControl, sync func() error, created func() int, recreate int) {
	t.Helper()
	pc.Err = fc.Err
	if err := sync(); err == nil {
		t.Fatal("the failed create was not reported")
	}
	pc.Err = nil
	pc.Clear()
	client.ClearActions()

	err := sync()
	listed := false
	for _, a := range client.Actions() {
		listed = listed || (a.GetVerb() == "list" && a.GetResource().Resource == "pods")
	}
	if !fc.Uncertain {
		if listed || err != nil || created() != recreate {
			t.Fatalf("after a refusal: listed %v, err %v, created %d; want no list, no error, %d created", listed, err, created(), recreate)
		}
		return
	}
	if !listed || store.Wrote() != "7" || !errors.Is(err, ErrCacheBehind) {
		t.Fatalf("listed %v, waiting for %q, err %v; want a live list and a wait for version 7", listed, store.Wrote(), err)
	}
	if created() != 0 {
		t.Fatalf("created %d pods from a cache that has not seen the lost create's pod", created())
	}
}
