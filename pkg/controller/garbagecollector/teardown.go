package garbagecollector

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// terminatingNamespaceDelay postpones work on dependents of a deleted owner
// in a namespace being deleted: the namespace controller usually deletes
// them within this time, and then the collector needs no lookup of its own.
const terminatingNamespaceDelay = 5 * time.Second

// teardownStallWindow: a namespace being deleted counts as making progress
// while some other client (the namespace controller, or the kubelet
// finishing pods it marked) deleted or marked for deletion an object there
// this recently. While it makes progress the collector leaves the
// namespace's dependents to it: the namespace controller's collection
// deletes take them all, and a delete of our own per object would be a
// redundant write racing them. Longer than the API server's request
// timeout (60 s): a collection delete of a resource the collector does not
// watch (events) shows no progress while it runs, and may run that long.
const teardownStallWindow = 75 * time.Second

// maxTeardownDeferral bounds how long after the namespace was seen being
// deleted the collector defers to its teardown, so dependents are collected
// even if something else keeps deleting there and the namespace controller
// does not run. A teardown of 20,000 pods on a 2-CPU control plane takes
// about 6 minutes.
const maxTeardownDeferral = 10 * time.Minute

// namespaceTeardowns tracks the namespaces being deleted, as the graph sees
// them. The graph's goroutine writes it; the collector's workers read it.
type namespaceTeardowns struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byNS  map[string]*teardown
}

type teardown struct {
	since        time.Time
	lastProgress time.Time
}

func newNamespaceTeardowns(c clock.PassiveClock) *namespaceTeardowns {
	return &namespaceTeardowns{clock: c, byNS: map[string]*teardown{}}
}

// track records whether ns is being deleted; its deletion is the first
// progress of its teardown.
func (t *namespaceTeardowns) track(typ eventType, ns metav1.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if typ == deleteEvent || ns.GetDeletionTimestamp() == nil {
		delete(t.byNS, ns.GetName())
		return
	}
	if _, ok := t.byNS[ns.GetName()]; !ok {
		now := t.clock.Now()
		t.byNS[ns.GetName()] = &teardown{since: now, lastProgress: now}
	}
}

func (t *namespaceTeardowns) terminating(ns string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byNS[ns]
	return ok
}

// progressed notes that another client deleted, or marked for deletion, an
// object in ns.
func (t *namespaceTeardowns) progressed(ns string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if td, ok := t.byNS[ns]; ok {
		td.lastProgress = t.clock.Now()
	}
}

// deferral says how long a delete of the collector's own in ns should wait
// for the namespace's teardown: 0 unless ns is being deleted, its teardown
// made progress within teardownStallWindow, and maxTeardownDeferral has not
// passed since its deletion was seen.
func (t *namespaceTeardowns) deferral(ns string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	td, ok := t.byNS[ns]
	if !ok {
		return 0
	}
	now := t.clock.Now()
	left := min(td.lastProgress.Add(teardownStallWindow).Sub(now), td.since.Add(maxTeardownDeferral).Sub(now))
	return max(left, 0)
}

// deferredToTeardown is returned by a worker that left an item to its
// namespace's teardown; the item is looked at again after the wait.
type deferredToTeardown struct{ after time.Duration }

func (d *deferredToTeardown) Error() string {
	return "deferred to the teardown of its namespace"
}
