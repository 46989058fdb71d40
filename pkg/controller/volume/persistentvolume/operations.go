package persistentvolume

import (
	"fmt"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// Backoff of a failed operation before the same operation may run again.
const (
	operationInitialBackoff = 500 * time.Millisecond
	operationMaxBackoff     = 2*time.Minute + 2*time.Second
)

// operationMap runs the slow operations (provision, delete, recycle) in
// their own goroutines, at most one per name, and after a failure refuses
// to start the same name again until an exponentially growing backoff has
// passed. Syncs call it on every resync, so this is what bounds retries.
type operationMap struct {
	mu  sync.Mutex
	ops map[string]*operationState
	wg  sync.WaitGroup
}

type operationState struct {
	running     bool
	lastErr     error
	lastErrTime time.Time
	backoff     time.Duration
}

type operationRunningError struct{ name string }

func (e operationRunningError) Error() string {
	return fmt.Sprintf("Failed to create operation with name %q. An operation with that name is already executing.", e.name)
}

type operationBackoffError struct {
	name  string
	state operationState
}

func (e operationBackoffError) Error() string {
	return fmt.Sprintf("Failed to create operation with name %q. An operation with that name failed at %v. No retries permitted until %v (%v). Last error: %q.",
		e.name, e.state.lastErrTime, e.state.lastErrTime.Add(e.state.backoff), e.state.backoff, e.state.lastErr)
}

func newOperationMap() *operationMap {
	return &operationMap{ops: map[string]*operationState{}}
}

// run starts fn under name unless it is running or backing off.
func (m *operationMap) run(name string, fn func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.ops[name]
	if ok {
		if st.running {
			return operationRunningError{name}
		}
		if time.Since(st.lastErrTime) <= st.backoff {
			return operationBackoffError{name, *st}
		}
	} else {
		st = &operationState{}
		m.ops[name] = st
	}
	st.running = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		var err error
		defer func() { m.finished(name, err) }()
		// A panicking operation counts as failed and backs off.
		defer utilruntime.RecoverFromPanic(&err)
		err = fn()
	}()
	return nil
}

func (m *operationMap) finished(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.ops[name]
	if err == nil {
		delete(m.ops, name)
		return
	}
	if st.backoff == 0 {
		st.backoff = operationInitialBackoff
	} else {
		st.backoff = min(2*st.backoff, operationMaxBackoff)
	}
	st.running = false
	st.lastErr = err
	st.lastErrTime = time.Now()
	klog.Background().Error(err, "Operation failed", "operationName", name,
		"retryAfter", st.lastErrTime.Add(st.backoff), "backoff", st.backoff)
}

// isRunning reports whether an operation of that name is in progress.
func (m *operationMap) isRunning(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.ops[name]
	return ok && st.running
}

// wait blocks until no operation is running.
func (m *operationMap) wait() { m.wg.Wait() }
