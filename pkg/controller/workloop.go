package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// NewNamedQueue returns the standard controller queue: string keys, the
// default controller rate limiter (per-item exponential backoff plus an
// overall token bucket) and name as the "name" label of workqueue_* metrics.
func NewNamedQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return NewNamedTypedQueue[string](name)
}

// NewNamedTypedQueue is NewNamedQueue for keys that are not strings.
func NewNamedTypedQueue[T comparable](name string) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[T](),
		workqueue.TypedRateLimitingQueueConfig[T]{Name: name},
	)
}

// WorkLoop drains a queue through a sync function. It is written once here
// and reused by every controller:
//
//	loop := controller.WorkLoop[string]{Name: "deployment", Queue: q, Sync: dc.syncDeployment}
//	loop.Run(ctx, workers, dInformerSynced, rsInformerSynced)
//
// A sync returning nil makes the queue forget the key's failures; an error
// requeues the key with backoff, unless made by RetryAfter,
// RetryAfterServerDelay, GiveUp or Quietly (syncresult.go). Sync is never
// called concurrently for one key.
//
// Run under a context from WithStatus, the loop reports its queue, workers,
// syncs and errors for /debug/controllers.
type WorkLoop[T comparable] struct {
	// Name identifies the controller in logs (usually the queue name).
	Name string
	// Queue is where event handlers put keys.
	Queue workqueue.TypedRateLimitingInterface[T]
	// Sync reconciles one key.
	Sync func(ctx context.Context, key T) error
	// MaxRetries, when > 0, drops a key after that many consecutive failed
	// syncs (logging the error) instead of retrying it forever. Zero retries
	// forever, which is what most controllers do.
	MaxRetries int
}

// Run logs start and stop, waits for the informer caches, then runs workers
// until ctx is cancelled. On return the queue is shut down and every worker
// has exited, so no sync is running anymore.
func (l *WorkLoop[T]) Run(ctx context.Context, workers int, synced ...cache.InformerSynced) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "name", l.Name)
	defer logger.Info("Shutting down controller", "name", l.Name)

	l.report(ctx)
	if !WaitForCacheSync(ctx, l.Name, synced...) {
		l.Queue.ShutDown()
		return
	}
	l.RunWorkers(ctx, workers)
}

// RunWorkers starts workers goroutines and blocks until ctx is cancelled;
// then it shuts the queue down and waits for in-flight syncs to finish.
// Use it directly when a controller must do more between the cache sync
// and the start of its workers.
func (l *WorkLoop[T]) RunWorkers(ctx context.Context, workers int) {
	l.report(ctx)
	st := StatusFrom(ctx)
	st.addWorkers(workers)
	defer st.addWorkers(-workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Go(func() {
			// UntilWithContext restarts the loop if a recovered panic ended it.
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for l.ProcessNextWorkItem(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	l.Queue.ShutDown()
	wg.Wait()
}

// Enqueue queues key now.
func (l *WorkLoop[T]) Enqueue(key T) { l.Queue.Add(key) }

// EnqueueAfter queues key once delay has passed.
func (l *WorkLoop[T]) EnqueueAfter(key T, delay time.Duration) { l.Queue.AddAfter(key, delay) }

// report shows the loop's queue on the page of the controller running
// under ctx.
func (l *WorkLoop[T]) report(ctx context.Context) {
	StatusFrom(ctx).ReportQueue(l.Name, l.Queue.Len)
}

// ProcessNextWorkItem handles one key. It returns false once the queue has
// been shut down. Exported so tests can step a controller one key at a time.
func (l *WorkLoop[T]) ProcessNextWorkItem(ctx context.Context) bool {
	key, quit := l.Queue.Get()
	if quit {
		return false
	}
	defer l.Queue.Done(key)

	st := StatusFrom(ctx)
	id := st.beginSync(key, time.Now())
	err := l.callSync(ctx, key)
	st.endSync(id, err, time.Now())
	l.handleResult(ctx, key, err)
	return true
}

// handleResult requeues, forgets or drops key as the sync's result says.
func (l *WorkLoop[T]) handleResult(ctx context.Context, key T, err error) {
	if err == nil {
		l.Queue.Forget(key)
		return
	}
	out, ok := outcomeOf(err)
	if ok && out.quiet {
		klog.FromContext(ctx).V(4).Info("Sync failed; requeuing", "controller", l.Name, "key", key, "err", err)
	}
	switch {
	case ok && out.giveUp:
		if !out.quiet {
			utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue", "controller", l.Name, "key", key)
		}
		l.Queue.Forget(key)
	case ok && out.delay > 0:
		if out.err != nil && !out.quiet {
			utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing after a delay", "controller", l.Name, "key", key, "delay", out.delay)
		}
		// A delay the sync chose is not a failure: no backoff builds up.
		if !out.keepBackoff {
			l.Queue.Forget(key)
		}
		l.Queue.AddAfter(key, out.delay)
	case l.MaxRetries > 0 && l.Queue.NumRequeues(key) >= l.MaxRetries:
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping key out of the queue after retries", "controller", l.Name, "key", key)
		l.Queue.Forget(key)
	default:
		if !ok || !out.quiet {
			utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing", "controller", l.Name, "key", key)
		}
		l.Queue.AddRateLimited(key)
	}
}

// callSync runs Sync, turning a panic into an error once utilruntime has
// logged it (utilruntime re-panics unless ReallyCrash is off, as upstream).
func (l *WorkLoop[T]) callSync(ctx context.Context, key T) (err error) {
	defer utilruntime.HandleCrashWithContext(ctx, func(_ context.Context, r interface{}) {
		err = fmt.Errorf("panic while syncing %v: %v", key, r)
	})
	return l.Sync(ctx, key)
}

// WaitForCacheSync waits for the given informers to sync, logging with the
// controller name so a stuck start is easy to attribute. It returns false
// if ctx was cancelled first.
func WaitForCacheSync(ctx context.Context, name string, synced ...cache.InformerSynced) bool {
	StatusFrom(ctx).ReportSynced(synced...)
	logger := klog.FromContext(ctx).WithValues("controller", name)
	return cache.WaitForNamedCacheSyncWithContext(klog.NewContext(ctx, logger), synced...)
}
