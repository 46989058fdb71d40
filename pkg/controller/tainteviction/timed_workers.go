package tainteviction

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// timedWorker is one scheduled pod deletion.
type timedWorker struct {
	createdAt time.Time
	fireAt    time.Time
	timer     clock.Timer
	cancelled atomic.Bool
}

func (w *timedWorker) cancel() {
	if w == nil {
		return
	}
	w.cancelled.Store(true)
	if w.timer != nil {
		w.timer.Stop()
	}
}

// workFunc deletes one pod; fireAt is when the deletion became due.
type workFunc func(ctx context.Context, fireAt time.Time, key string) error

// timedWorkerQueue runs work per key at a given time, at most one pending
// run per key. A key whose work is running is present with a nil worker,
// so it is neither scheduled twice nor reported as cancellable.
type timedWorkerQueue struct {
	mu      sync.Mutex
	workers map[string]*timedWorker
	wg      sync.WaitGroup
	work    workFunc
	clock   clock.WithDelayedExecution
}

func newTimedWorkerQueue(c clock.WithDelayedExecution, f workFunc) *timedWorkerQueue {
	return &timedWorkerQueue{workers: map[string]*timedWorker{}, work: f, clock: c}
}

// AddWork schedules key at fireAt unless it is already scheduled or running.
func (q *timedWorkerQueue) AddWork(ctx context.Context, key string, createdAt, fireAt time.Time) {
	logger := klog.FromContext(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.workers[key]; ok {
		logger.V(4).Info("Trying to add already existing work, skipping", "item", key, "createTime", createdAt, "firedTime", fireAt)
		return
	}
	logger.V(4).Info("Adding TimedWorkerQueue item and to be fired at firedTime", "item", key, "createTime", createdAt, "firedTime", fireAt)
	w := &timedWorker{createdAt: createdAt, fireAt: fireAt}
	run := func() {
		q.wg.Go(func() {
			if w.cancelled.Load() {
				return
			}
			logger.V(4).Info("Firing worker", "item", key, "firedTime", fireAt)
			err := q.work(ctx, fireAt, key)
			if err != nil {
				logger.Error(err, "TaintEvictionController: timed worker failed")
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			// Only forget the key if nobody replaced it meanwhile.
			if cur, ok := q.workers[key]; ok && (cur == nil || cur == w) {
				delete(q.workers, key)
			}
		})
	}
	// Measured from now rather than from createdAt (upstream's choice), so a
	// deletion kept across reschedules still fires at fireAt.
	if delay := fireAt.Sub(q.clock.Now()); delay > 0 {
		w.timer = q.clock.AfterFunc(delay, run)
		q.workers[key] = w
		return
	}
	// Due now: runs at once and cannot be cancelled any more.
	q.workers[key] = nil
	run()
}

// CancelWork drops key; it reports whether a pending run was cancelled.
func (q *timedWorkerQueue) CancelWork(logger klog.Logger, key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.workers[key]
	if !ok {
		return false
	}
	logger.V(4).Info("Cancelling TimedWorkerQueue item", "item", key, "time", q.clock.Now())
	delete(q.workers, key)
	if w == nil {
		return false
	}
	w.cancel()
	return true
}

// get returns the pending worker of key (nil if none or running).
func (q *timedWorkerQueue) get(key string) *timedWorker {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.workers[key]
}

// running reports whether key's work has fired and not finished yet.
func (q *timedWorkerQueue) running(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	w, ok := q.workers[key]
	return ok && (w == nil || !w.fireAt.After(q.clock.Now()))
}

// CancelAndWait stops all pending work and waits for running work.
func (q *timedWorkerQueue) CancelAndWait() {
	q.mu.Lock()
	for _, w := range q.workers {
		w.cancel()
	}
	q.workers = map[string]*timedWorker{}
	q.mu.Unlock()
	q.wg.Wait()
}
