package controller

import (
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

func TestControllerExpectations(t *testing.T) {
	logger := klog.Background()
	clk := testingclock.NewFakeClock(time.Now())
	e := NewControllerExpectationsWithClock(clk)
	const key = "ns/rs"

	if !e.SatisfiedExpectations(logger, key) {
		t.Fatal("no record must mean satisfied")
	}
	_ = e.ExpectCreations(logger, key, 10)
	var wg sync.WaitGroup
	for i := 0; i < 9; i++ {
		wg.Go(func() { e.CreationObserved(logger, key) })
	}
	wg.Wait()
	if e.SatisfiedExpectations(logger, key) {
		t.Fatal("one creation still pending")
	}
	e.CreationObserved(logger, key)
	if !e.SatisfiedExpectations(logger, key) {
		t.Fatal("all creations observed")
	}

	_ = e.SetExpectations(logger, key, 1, 1)
	e.RaiseExpectations(logger, key, 1, 0)
	e.LowerExpectations(logger, key, 1, 1)
	if add, del := mustGet(t, e, key); add != 1 || del != 0 {
		t.Fatalf("got add=%d del=%d, want 1 0", add, del)
	}
	if e.SatisfiedExpectations(logger, key) {
		t.Fatal("pending add")
	}
	clk.Step(ExpectationsTimeout + time.Second)
	if !e.SatisfiedExpectations(logger, key) {
		t.Fatal("expired expectations must be satisfied")
	}

	_ = e.ExpectDeletions(logger, key, 2)
	e.DeletionObserved(logger, key)
	if add, del := mustGet(t, e, key); add != 0 || del != 1 {
		t.Fatalf("got add=%d del=%d, want 0 1", add, del)
	}
	e.DeleteExpectations(logger, key)
	if _, ok, _ := e.GetExpectations(key); ok {
		t.Fatal("deleted")
	}
	// Lowering unknown keys is a no-op.
	e.CreationObserved(logger, "ns/other")
	if _, ok, _ := e.GetExpectations("ns/other"); ok {
		t.Fatal("lowering created a record")
	}
}

func mustGet(t *testing.T, e *ControllerExpectations, key string) (int64, int64) {
	t.Helper()
	exp, ok, err := e.GetExpectations(key)
	if !ok || err != nil {
		t.Fatalf("no expectations for %s", key)
	}
	return exp.GetExpectations()
}

func TestUIDTrackingExpectations(t *testing.T) {
	logger := klog.Background()
	u := NewUIDTrackingControllerExpectations(NewControllerExpectations())
	const key = "ns/rs"
	_ = u.ExpectDeletions(logger, key, []string{"ns/p1", "ns/p2"})
	if u.SatisfiedExpectations(logger, key) {
		t.Fatal("two deletions pending")
	}
	// The same pod seen twice (deletionTimestamp update, then delete) counts once.
	u.DeletionObserved(logger, key, "ns/p1")
	u.DeletionObserved(logger, key, "ns/p1")
	// Pods we didn't delete don't count.
	u.DeletionObserved(logger, key, "ns/p9")
	if u.SatisfiedExpectations(logger, key) {
		t.Fatal("p2 still pending")
	}
	if got := u.GetUIDs(key); got.Len() != 1 || !got.Has("ns/p2") {
		t.Fatalf("uids = %v", got)
	}
	u.DeletionObserved(logger, key, "ns/p2")
	if !u.SatisfiedExpectations(logger, key) {
		t.Fatal("all deletions observed")
	}
	u.DeleteExpectations(logger, key)
	if u.GetUIDs(key) != nil {
		t.Fatal("uids kept after DeleteExpectations")
	}
	if _, ok, _ := u.GetExpectations(key); ok {
		t.Fatal("counts kept after DeleteExpectations")
	}
}
