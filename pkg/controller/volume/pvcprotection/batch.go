package pvcprotection

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// claimRef is a PVC waiting in a namespace batch; key is its key in the
// controller's main queue.
type claimRef struct {
	key  string
	name string
}

// namespaceBatches groups the PVCs taken off the main queue by namespace,
// so that a burst of deletions in one namespace shares a single live pod
// list. The namespaces queue hands each waiting namespace to one worker.
type namespaceBatches struct {
	mu         sync.Mutex
	pending    map[string][]claimRef
	namespaces workqueue.TypedInterface[string]
}

func newNamespaceBatches() *namespaceBatches {
	return &namespaceBatches{
		pending:    map[string][]claimRef{},
		namespaces: workqueue.NewTyped[string](),
	}
}

// add appends a claim to its namespace's batch, queueing the namespace if
// it had nothing waiting.
func (b *namespaceBatches) add(namespace string, c claimRef) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, waiting := b.pending[namespace]; !waiting {
		b.namespaces.Add(namespace)
	}
	b.pending[namespace] = append(b.pending[namespace], c)
}

// next blocks until a namespace has claims waiting and takes them all. It
// returns ok=false once the batches are shut down and drained.
func (b *namespaceBatches) next() (namespace string, claims []claimRef, ok bool) {
	namespace, quit := b.namespaces.Get()
	if quit {
		return "", nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	claims = b.pending[namespace]
	delete(b.pending, namespace)
	// Done under the lock: a claim added from now on starts a new batch.
	b.namespaces.Done(namespace)
	return namespace, claims, true
}

// len is the number of namespaces with claims waiting.
func (b *namespaceBatches) len() int {
	return b.namespaces.Len()
}

func (b *namespaceBatches) shutDown() {
	b.namespaces.ShutDown()
}
