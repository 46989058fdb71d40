package controller

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// StatusRegistry holds what each started controller reports for the
// /debug/controllers page. Work loops report through the ControllerStatus
// the manager puts in their context (WithStatus); controllers with their
// own loops report their queues with ReportQueue.
type StatusRegistry struct {
	mu          sync.Mutex
	controllers map[string]*ControllerStatus
}

// NewStatusRegistry returns an empty registry.
func NewStatusRegistry() *StatusRegistry {
	return &StatusRegistry{controllers: map[string]*ControllerStatus{}}
}

// Controller returns the named controller's status, creating it. A nil
// registry returns nil, which every ControllerStatus method accepts.
func (r *StatusRegistry) Controller(name string) *ControllerStatus {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.controllers[name]
	if !ok {
		s = &ControllerStatus{name: name, inflight: map[uint64]inflightSync{}}
		r.controllers[name] = s
	}
	return s
}

// Snapshot returns every controller's status, by name.
func (r *StatusRegistry) Snapshot(now time.Time) []ControllerSnapshot {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	all := make([]*ControllerStatus, 0, len(r.controllers))
	for _, s := range r.controllers {
		all = append(all, s)
	}
	r.mu.Unlock()
	out := make([]ControllerSnapshot, 0, len(all))
	for _, s := range all {
		out = append(out, s.snapshot(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SyncError is a failed sync as the page shows it.
type SyncError struct {
	Time    time.Time `json:"time"`
	Key     string    `json:"key"`
	Message string    `json:"message"`
}

// RunningSync is a sync in progress.
type RunningSync struct {
	Key     string    `json:"key"`
	Since   time.Time `json:"since"`
	Seconds float64   `json:"seconds"`
}

// ControllerSnapshot is one controller's status at a point in time.
type ControllerSnapshot struct {
	Name    string    `json:"name"`
	Running bool      `json:"running"`
	Started time.Time `json:"started,omitzero"`
	Workers int       `json:"workers"`
	// Queues are the workqueue names (the "name" label of workqueue_*).
	Queues []string `json:"queues"`
	// QueueDepth is nil when the controller reported no queue.
	QueueDepth *int `json:"queueDepth"`
	// InformersSynced is nil when the controller reported no informers.
	InformersSynced *bool        `json:"informersSynced"`
	LongestSync     *RunningSync `json:"longestRunningSync"`
	LastError       *SyncError   `json:"lastError"`
	LastSuccess     *time.Time   `json:"lastSuccess"`
}

type queueRef struct {
	name   string
	length func() int
}

type inflightSync struct {
	key   any
	since time.Time
}

// ControllerStatus is one controller's live state. Its methods accept a
// nil receiver, so code run outside the manager (unit tests) reports to
// nothing.
type ControllerStatus struct {
	name string

	mu          sync.Mutex
	running     bool
	started     time.Time
	workers     int
	queues      []queueRef
	synced      []cache.InformerSynced
	nextID      uint64
	inflight    map[uint64]inflightSync
	lastError   *SyncError
	lastSuccess time.Time
}

// Start marks the controller running and forgets what an earlier run
// reported (a sharded replica rebuilds a controller on each hand-over).
func (s *ControllerStatus) Start(now time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running, s.started = true, now
	s.workers, s.queues, s.synced = 0, nil, nil
	s.inflight = map[uint64]inflightSync{}
}

// Stop marks the controller stopped; its last error and success stay.
func (s *ControllerStatus) Stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	s.workers, s.queues = 0, nil
}

// ReportQueue adds a queue the controller drains: its name labels the
// workqueue_* metrics, length gives its depth.
func (s *ControllerStatus) ReportQueue(name string, length func() int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.queues {
		if q.name == name {
			return
		}
	}
	s.queues = append(s.queues, queueRef{name: name, length: length})
}

// ReportSynced adds informers the controller waits for.
func (s *ControllerStatus) ReportSynced(synced ...cache.InformerSynced) {
	if s == nil || len(synced) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = append(s.synced, synced...)
}

func (s *ControllerStatus) addWorkers(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers += n
}

func (s *ControllerStatus) beginSync(key any, now time.Time) uint64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.inflight[s.nextID] = inflightSync{key: key, since: now}
	return s.nextID
}

// endSync records a sync's end; err is nil on success.
func (s *ControllerStatus) endSync(id uint64, err error, now time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.inflight[id]
	delete(s.inflight, id)
	if err == nil {
		s.lastSuccess = now
		return
	}
	s.lastError = &SyncError{Time: now, Key: fmt.Sprint(in.key), Message: err.Error()}
}

func (s *ControllerStatus) snapshot(now time.Time) ControllerSnapshot {
	s.mu.Lock()
	out := ControllerSnapshot{Name: s.name, Running: s.running, Workers: s.workers, Queues: []string{}}
	if s.running {
		out.Started = s.started
	}
	queues := append([]queueRef(nil), s.queues...)
	synced := append([]cache.InformerSynced(nil), s.synced...)
	for _, in := range s.inflight {
		if out.LongestSync == nil || in.since.Before(out.LongestSync.Since) {
			out.LongestSync = &RunningSync{Key: fmt.Sprint(in.key), Since: in.since}
		}
	}
	if s.lastError != nil {
		e := *s.lastError
		out.LastError = &e
	}
	if !s.lastSuccess.IsZero() {
		t := s.lastSuccess
		out.LastSuccess = &t
	}
	s.mu.Unlock()

	// Outside the lock: Len and HasSynced take the queue's and informer's.
	if out.LongestSync != nil {
		out.LongestSync.Seconds = now.Sub(out.LongestSync.Since).Seconds()
	}
	if len(queues) > 0 {
		depth := 0
		for _, q := range queues {
			out.Queues = append(out.Queues, q.name)
			depth += q.length()
		}
		out.QueueDepth = &depth
	}
	if len(synced) > 0 {
		all := true
		for _, f := range synced {
			all = all && f()
		}
		out.InformersSynced = &all
	}
	return out
}

type statusKey struct{}

// WithStatus returns ctx carrying s: work loops run under it report there.
func WithStatus(ctx context.Context, s *ControllerStatus) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, statusKey{}, s)
}

// StatusFrom returns the status ctx carries, or nil.
func StatusFrom(ctx context.Context) *ControllerStatus {
	s, _ := ctx.Value(statusKey{}).(*ControllerStatus)
	return s
}

// ReportQueue is for controllers with their own loop: it shows the queue
// named name on the page of the controller running under ctx.
func ReportQueue(ctx context.Context, name string, length func() int) {
	StatusFrom(ctx).ReportQueue(name, length)
}
