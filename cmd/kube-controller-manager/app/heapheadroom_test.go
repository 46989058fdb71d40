package app

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{live: 0, want: 100},
		{live: 10 * mib, want: 100},
		{live: 64 * mib, want: 100},
		{live: 128 * mib, want: 50},
		{live: 200 * mib, want: 32},
		{live: 256 * mib, want: 25},
		{live: 4096 * mib, want: 25},
	} {
		if got := gcPercentFor(tc.live, 64*mib, 25, 100); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// recordedPercents stands in for debug.SetGCPercent, so that the test
// leaves the process's garbage collector alone.
type recordedPercents struct {
	mu   sync.Mutex
	sets []int
}

func (r *recordedPercents) set(p int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, p)
	return 100
}

func (r *recordedPercents) last() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sets) == 0 {
		return 0, false
	}
	return r.sets[len(r.sets)-1], true
}

func (h *heapHeadroom) observedCycles() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cycles
}

// collectUntil runs garbage collections until done reports true.
func collectUntil(t *testing.T, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !done(); {
		if time.Now().After(deadline) {
			t.Fatal("gave up waiting for the tuner to see a collection")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

var heapHeadroomBallast []byte

func TestHeapHeadroomLowersGOGCForALargeLiveHeap(t *testing.T) {
	heapHeadroomBallast = make([]byte, 32<<20)
	defer func() { heapHeadroomBallast = nil }()

	var rec recordedPercents
	h := newHeapHeadroom(1<<20, 25, 100, rec.set)
	h.start()
	collectUntil(t, func() bool { p, ok := rec.last(); return ok && p == 25 })

	h.stop()
	if p, _ := rec.last(); p != 100 {
		t.Errorf("after stop GOGC was left at %d, want it given back as 100", p)
	}
	cycles := h.observedCycles()
	runtime.GC()
	runtime.GC()
	if got := h.observedCycles(); got != cycles {
		t.Errorf("the tuner saw %d more cycles after stop", got-cycles)
	}
}

func TestHeapHeadroomLeavesASmallHeapAlone(t *testing.T) {
	var rec recordedPercents
	h := newHeapHeadroom(1<<40, 25, 100, rec.set)
	h.start()
	defer h.stop()
	// Positive control: the tuner did look at the heap, twice.
	collectUntil(t, func() bool { return h.observedCycles() >= 2 })
	if p, ok := rec.last(); ok {
		t.Errorf("GOGC set to %d for a heap far below the budget", p)
	}
}

func TestHeapHeadroomRespectsAnOperatorsSettings(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "200")
			if startHeapHeadroom(context.Background(), klog.Background()) {
				t.Errorf("tuning started with %s set", env)
			}
		})
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !startHeapHeadroom(ctx, klog.Background()) {
		t.Error("tuning did not start with neither GOGC nor GOMEMLIMIT set")
	}
}
