package nodelifecycle

import (
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// nodeEvictionPeriod is how often the NoExecute tainting pass drains the
	// per-zone queues.
	nodeEvictionPeriod = 100 * time.Millisecond
	// evictionRateLimiterBurst is the token bucket burst of every zone limiter.
	evictionRateLimiterBurst = 1
	// nodeHealthUpdateRetry is how many times a node's status update is
	// retried within one monitor pass.
	nodeHealthUpdateRetry = 5
)

// timedValue is one node waiting in a zone queue.
type timedValue struct {
	value     string
	uid       string
	addedAt   time.Time
	processAt time.Time
}

// rateLimitedTimedQueue is a per-zone queue of node names drained by Try at
// most as fast as its token bucket allows. A name stays "known" after Try
// processed it successfully, so it cannot be queued again until Remove is
// called (when the node becomes healthy); this keeps one node from being
// tainted over and over while it stays unhealthy.
type rateLimitedTimedQueue struct {
	clock clock.Clock

	mu    sync.Mutex
	items []*timedValue       // waiting, unordered (zones are small)
	known map[string]struct{} // waiting or already processed

	limiterMu sync.Mutex
	limiter   flowcontrol.RateLimiter
}

func newRateLimitedTimedQueue(c clock.Clock, qps float32) *rateLimitedTimedQueue {
	return &rateLimitedTimedQueue{
		clock:   c,
		known:   map[string]struct{}{},
		limiter: newZoneLimiter(c, qps),
	}
}

func newZoneLimiter(c clock.Clock, qps float32) flowcontrol.RateLimiter {
	if qps <= 0 {
		return flowcontrol.NewFakeNeverRateLimiter()
	}
	return flowcontrol.NewTokenBucketRateLimiterWithClock(qps, evictionRateLimiterBurst, c)
}

// Add queues value unless it is already known; it reports whether it did.
func (q *rateLimitedTimedQueue) Add(value, uid string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.known[value]; ok {
		return false
	}
	now := q.clock.Now()
	q.items = append(q.items, &timedValue{value: value, uid: uid, addedAt: now, processAt: now})
	q.known[value] = struct{}{}
	return true
}

// Remove forgets value entirely; it reports whether value was known.
func (q *rateLimitedTimedQueue) Remove(value string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.known[value]; !ok {
		return false
	}
	delete(q.known, value)
	q.dropLocked(value)
	return true
}

// Len is the number of waiting values.
func (q *rateLimitedTimedQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *rateLimitedTimedQueue) dropLocked(value string) {
	for i, it := range q.items {
		if it.value == value {
			q.items = append(q.items[:i], q.items[i+1:]...)
			return
		}
	}
}

// head returns the value due first.
func (q *rateLimitedTimedQueue) head() (timedValue, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var best *timedValue
	for _, it := range q.items {
		if best == nil || it.processAt.Before(best.processAt) {
			best = it
		}
	}
	if best == nil {
		return timedValue{}, false
	}
	return *best, true
}

// reschedule moves value's processAt, if it is still waiting.
func (q *rateLimitedTimedQueue) reschedule(value string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.items {
		if it.value == value {
			it.processAt = at
			return
		}
	}
}

// done takes value off the waiting list but keeps it known.
func (q *rateLimitedTimedQueue) done(value string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropLocked(value)
}

// Try hands due values to fn while the limiter grants tokens. fn returns
// true when the value is finished, or false and a delay to retry after.
func (q *rateLimitedTimedQueue) Try(logger klog.Logger, fn func(timedValue) (bool, time.Duration)) {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	for val, ok := q.head(); ok; val, ok = q.head() {
		if !q.limiter.TryAccept() {
			logger.V(10).Info("Try rate limited", "value", val.value)
			return
		}
		now := q.clock.Now()
		if now.Before(val.processAt) {
			return
		}
		if finished, retryAfter := fn(val); finished {
			q.done(val.value)
		} else {
			q.reschedule(val.value, now.Add(retryAfter+1))
		}
	}
}

// SwapLimiter replaces the limiter when the zone's rate changes. A zero
// rate stops tainting in the zone altogether.
func (q *rateLimitedTimedQueue) SwapLimiter(qps float32) {
	q.limiterMu.Lock()
	defer q.limiterMu.Unlock()
	if q.limiter.QPS() == qps {
		return
	}
	next := newZoneLimiter(q.clock, qps)
	if qps > 0 && !q.limiter.TryAccept() {
		// The old bucket was empty: start the new one empty too, so a rate
		// change does not hand out a free token.
		next.TryAccept()
	}
	q.limiter.Stop()
	q.limiter = next
}
