package app

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"k8s.io/klog/v2"
)

// The Go garbage collector lets the heap grow by GOGC percent of the live
// heap before the next cycle: with the default 100, a controller manager
// whose caches hold 300 MiB peaks near 600 MiB during a burst of watch
// events. Past a fixed budget that headroom buys little: the cost of a
// cycle grows with the live heap, the garbage made between cycles does not.
// So once the live heap outgrows the budget, GOGC is lowered to keep the
// headroom near it, never below a floor that bounds the extra GC work.
const (
	heapHeadroomBudget     = 64 << 20
	heapHeadroomMinPercent = 25
	heapHeadroomMaxPercent = 100
	liveHeapMetric         = "/gc/heap/live:bytes"
)

// gcPercentFor is the GOGC that gives a live heap of liveBytes a headroom of
// about budget bytes, within [minPercent, maxPercent].
func gcPercentFor(liveBytes, budget uint64, minPercent, maxPercent int) int {
	if liveBytes == 0 {
		return maxPercent
	}
	percent := budget * 100 / liveBytes
	if percent >= uint64(maxPercent) {
		return maxPercent
	}
	return max(int(percent), minPercent)
}

// heapHeadroom retunes GOGC after every garbage collection cycle.
type heapHeadroom struct {
	budget     uint64
	minPercent int
	maxPercent int
	setPercent func(int) int

	mu      sync.Mutex
	stopped bool
	cycles  int
	percent int // what setPercent was last given
	sample  []metrics.Sample
}

// gcCycleMarker is allocated and dropped once per cycle: its cleanup runs
// after the collection that found it unreachable. It holds a pointer so
// that it is not batched into a tiny allocation, whose cleanup may never run.
type gcCycleMarker struct{ _ *byte }

// startHeapHeadroom bounds the heap's headroom until ctx ends. An operator's
// GOGC or GOMEMLIMIT means the runtime is tuned by hand: it is left alone,
// and false is returned.
func startHeapHeadroom(ctx context.Context, logger klog.Logger) bool {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		logger.V(2).Info("GOGC or GOMEMLIMIT is set; the garbage collector's headroom is not tuned")
		return false
	}
	h := newHeapHeadroom(heapHeadroomBudget, heapHeadroomMinPercent, heapHeadroomMaxPercent, debug.SetGCPercent)
	logger.V(2).Info("Bounding the garbage collector's headroom", "budgetMiB", heapHeadroomBudget>>20, "minGOGC", heapHeadroomMinPercent)
	h.start()
	go func() {
		<-ctx.Done()
		h.stop()
	}()
	return true
}

func newHeapHeadroom(budget uint64, minPercent, maxPercent int, setPercent func(int) int) *heapHeadroom {
	return &heapHeadroom{
		budget:     budget,
		minPercent: minPercent,
		maxPercent: maxPercent,
		setPercent: setPercent,
		percent:    maxPercent,
		sample:     []metrics.Sample{{Name: liveHeapMetric}},
	}
}

func (h *heapHeadroom) start() { h.armForNextCycle() }

// stop ends the tuning and gives the runtime back its default GOGC.
func (h *heapHeadroom) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	h.apply(h.maxPercent)
}

func (h *heapHeadroom) armForNextCycle() {
	runtime.AddCleanup(&gcCycleMarker{}, func(h *heapHeadroom) {
		if h.afterCycle() {
			h.armForNextCycle()
		}
	}, h)
}

// afterCycle runs on the runtime's cleanup goroutine, so it stays short. It
// reports whether tuning goes on.
func (h *heapHeadroom) afterCycle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.cycles++
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		h.apply(gcPercentFor(h.sample[0].Value.Uint64(), h.budget, h.minPercent, h.maxPercent))
	}
	return true
}

func (h *heapHeadroom) apply(percent int) {
	if percent != h.percent {
		h.percent = percent
		h.setPercent(percent)
	}
}
