package namespace

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// WakeWhenPodsGone makes the controller look at a namespace again as soon
// as the last cached pod in it is gone, instead of only after half the
// longest grace period (upstream polls on that estimate alone, so a
// namespace whose pods are gone in a second still waits ~16s). The poll
// stays as the fallback, so nothing depends on the wake-up.
func (nc *Controller) WakeWhenPodsGone(pods coreinformers.PodInformer) {
	indexer := pods.Informer().GetIndexer()
	nc.podsLeft = &podCountdown{
		waiting: map[string]int{},
		count: func(ns string) int {
			keys, err := indexer.IndexKeys(cache.NamespaceIndex, ns)
			if err != nil {
				return 1 // no index: never wake early, the poll still runs
			}
			return len(keys)
		},
		wake: nc.queue.Add,
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				nc.podsLeft.podGone(pod.Namespace)
			}
		},
	})
}

// podCountdown counts down the cached pods of namespaces waiting for them.
// Counting once per deletion pass and decrementing per delete event keeps a
// namespace of n pods at O(n), not O(n^2) recounts. Pods can't be created
// in a terminating namespace, so the count only falls.
type podCountdown struct {
	mu      sync.Mutex
	waiting map[string]int
	count   func(namespace string) int
	wake    func(namespace string)
}

// watch starts (or restarts) the countdown for namespace. With no pod
// cached there is nothing to wake up for: what remains is other content
// (finalizers), which the poll looks at; waking now would only run the
// next pass at once, again and again.
func (c *podCountdown) watch(namespace string) {
	n := c.count(namespace)
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > 0 {
		c.waiting[namespace] = n
	} else {
		delete(c.waiting, namespace)
	}
}

func (c *podCountdown) podGone(namespace string) {
	c.mu.Lock()
	n, ok := c.waiting[namespace]
	if !ok {
		c.mu.Unlock()
		return
	}
	n--
	c.waiting[namespace] = n
	if n > 0 {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	// Delete events trail the cache, so the countdown can reach zero while
	// pods are still cached: recount before waking.
	if left := c.count(namespace); left > 0 {
		c.mu.Lock()
		if _, ok := c.waiting[namespace]; ok {
			c.waiting[namespace] = left
		}
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	_, ok = c.waiting[namespace]
	delete(c.waiting, namespace)
	c.mu.Unlock()
	if ok {
		c.wake(namespace)
	}
}
