// Package operations runs the controller's attach, detach and
// verify-attached operations in the background: at most one at a time per
// volume (per volume and node for volumes that may be attached to several
// nodes), with exponential backoff after failures.
package operations

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Backoff after a failed operation: 500ms, doubling, up to 2m2s.
const (
	initialBackoff = 500 * time.Millisecond
	maxBackoff     = 2*time.Minute + 2*time.Second
)

// opKey identifies an operation. An empty node matches every node, so an
// operation keyed by volume alone excludes all others on that volume.
type opKey struct {
	volume v1.UniqueVolumeName
	node   types.NodeName
}

func (k opKey) String() string {
	return fmt.Sprintf("{volumeName:%s podName: nodeName:%s}", k.volume, k.node)
}

type pendingOp struct {
	key     opKey
	name    string
	running bool
	// Backoff state, kept after a failure until the next success.
	lastErr     error
	lastErrTime time.Time
	backoff     time.Duration
}

func (o *pendingOp) inBackoff(now time.Time) bool {
	return now.Sub(o.lastErrTime) <= o.backoff
}

// AlreadyRunningError: an operation on the same volume (and node) runs.
type AlreadyRunningError struct{ key opKey }

func (e AlreadyRunningError) Error() string {
	return fmt.Sprintf("Failed to create operation with name %+v. An operation with that name is already executing.", e.key)
}

// BackoffError: the last operation of the same kind failed too recently.
type BackoffError struct {
	key         opKey
	lastErr     error
	lastErrTime time.Time
	backoff     time.Duration
}

func (e BackoffError) Error() string {
	return fmt.Sprintf("Failed to create operation with name %q. An operation with that name failed at %v. No retries permitted until %v (%v). Last error: %q.",
		e.key.String(), e.lastErrTime, e.lastErrTime.Add(e.backoff), e.backoff, e.lastErr)
}

// IsBackoff reports whether err only says "not yet".
func IsBackoff(err error) bool {
	_, ok := err.(BackoffError)
	return ok
}

// pending tracks running and failed operations.
type pending struct {
	mu  sync.Mutex
	ops []*pendingOp
	wg  sync.WaitGroup
	now func() time.Time
}

// findLocked returns the operation conflicting with key: a running one if
// any, else the best (exact if possible) finished one.
func (p *pending) findLocked(key opKey) *pendingOp {
	if key.volume == "" {
		return nil
	}
	var found *pendingOp
	for _, op := range p.ops {
		if op.key.volume != key.volume {
			continue
		}
		if op.key.node != "" && key.node != "" && op.key.node != key.node {
			continue
		}
		if op.running {
			return op
		}
		if found == nil || op.key.node == key.node {
			found = op
		}
	}
	return found
}

// start registers an operation named name under key and runs fn in a new
// goroutine, unless a conflicting operation runs or an operation of the
// same name under key is backing off.
func (p *pending) start(key opKey, name string, fn func() error, onFailure func(error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	op := p.findLocked(key)
	switch {
	case op == nil:
		op = &pendingOp{key: key, name: name}
		p.ops = append(p.ops, op)
	case op.running:
		return AlreadyRunningError{key: key}
	default:
		if op.inBackoff(p.now()) {
			if op.name == name {
				return BackoffError{key: key, lastErr: op.lastErr, lastErrTime: op.lastErrTime, backoff: op.backoff}
			}
			// A different operation may go at once, with fresh backoff.
			op.backoff, op.lastErr, op.lastErrTime = 0, nil, time.Time{}
		}
		op.key, op.name = key, name
	}
	op.running = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := fn()
		p.finish(op, err)
		if err != nil && onFailure != nil {
			onFailure(err)
		}
	}()
	return nil
}

// finish forgets a successful operation and backs off a failed one.
func (p *pending) finish(op *pendingOp, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	op.running = false
	if err == nil {
		for i, o := range p.ops {
			if o == op {
				p.ops = append(p.ops[:i], p.ops[i+1:]...)
				break
			}
		}
		return
	}
	if op.backoff == 0 {
		op.backoff = initialBackoff
	} else {
		op.backoff = min(2*op.backoff, maxBackoff)
	}
	op.lastErr = err
	op.lastErrTime = p.now()
}

// isPending reports a running operation conflicting with key.
func (p *pending) isPending(key opKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	op := p.findLocked(key)
	return op != nil && op.running
}

// safeToRetry reports whether an operation named name may start under key.
func (p *pending) safeToRetry(key opKey, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	op := p.findLocked(key)
	switch {
	case op == nil:
		return true
	case op.running:
		return false
	}
	return op.name != name || !op.inBackoff(p.now())
}
