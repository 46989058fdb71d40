package sharded

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// observation is a Lease as this process last saw it change.
type observation struct {
	holder   string
	renew    time.Time
	duration time.Duration
	// at is when this process saw the holder, renew time or duration
	// change: expiry counts from here, as client-go's elector counts it,
	// so clock skew between replicas does not matter.
	at time.Time
}

// tracker follows the Leases of one namespace through an informer.
type tracker struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	seen  map[string]observation
	// gone is when a Lease was deleted.
	gone map[string]time.Time
	// start is when the informer synced; Leases absent then are free since.
	start time.Time
	// changed is signalled (without blocking) on every change.
	changed chan struct{}
}

func newTracker(c clock.PassiveClock) *tracker {
	return &tracker{clock: c, seen: map[string]observation{}, gone: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (t *tracker) handlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { t.observe(obj) },
		UpdateFunc: func(_, obj interface{}) { t.observe(obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				t.mu.Lock()
				delete(t.seen, l.Name)
				t.gone[l.Name] = t.clock.Now()
				t.mu.Unlock()
				t.notify()
			}
		},
	}
}

func (t *tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tracker) observe(obj interface{}) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	o := observation{}
	if l.Spec.HolderIdentity != nil {
		o.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		o.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		o.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	t.mu.Lock()
	prev, had := t.seen[l.Name]
	if had && prev.holder == o.holder && prev.renew.Equal(o.renew) && prev.duration == o.duration {
		t.mu.Unlock()
		return
	}
	o.at = t.clock.Now()
	t.seen[l.Name] = o
	delete(t.gone, l.Name)
	t.mu.Unlock()
	t.notify()
}

func (t *tracker) synced() {
	t.mu.Lock()
	t.start = t.clock.Now()
	t.mu.Unlock()
}

// state returns the valid holder of a Lease ("" when free) and, when free,
// since when.
func (t *tracker) state(name string) (holder string, freeSince time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked(name, t.clock.Now())
}

func (t *tracker) stateLocked(name string, now time.Time) (string, time.Time) {
	o, ok := t.seen[name]
	if !ok {
		if g, ok := t.gone[name]; ok {
			return "", g
		}
		return "", t.start
	}
	if o.holder == "" {
		return "", o.at
	}
	if exp := o.at.Add(o.duration); !now.Before(exp) {
		return "", exp
	}
	return o.holder, time.Time{}
}

// holders returns the valid holder of every Lease whose name starts with prefix.
func (t *tracker) holders(prefix string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	out := map[string]string{}
	for name := range t.seen {
		if strings.HasPrefix(name, prefix) {
			if h, _ := t.stateLocked(name, now); h != "" {
				out[name] = h
			}
		}
	}
	return out
}

// expired reports whether the record read from the apiserver is the one
// this process has watched stay unchanged for its whole duration.
func (t *tracker) expired(name string, rec *rl.LeaderElectionRecord) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.seen[name]
	if !ok || o.holder != rec.HolderIdentity || !o.renew.Equal(rec.RenewTime.Time) {
		return false
	}
	return !t.clock.Now().Before(o.at.Add(o.duration))
}

// observingLock is a Lease lock whose Get reports a Lease as free once the
// tracker has watched it unchanged for its duration. A fresh client-go
// elector would otherwise wait a full duration of its own before taking
// over a Lease whose holder died long ago. The update that takes the Lease
// still carries the resourceVersion read, so a holder that renewed in the
// meantime wins.
type observingLock struct {
	*rl.LeaseLock
	tracker *tracker
}

func (l *observingLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.LeaseLock.Get(ctx)
	if err != nil || rec.HolderIdentity == "" || rec.HolderIdentity == l.Identity() || !l.tracker.expired(l.LeaseMeta.Name, rec) {
		return rec, raw, err
	}
	free := *rec
	free.HolderIdentity = ""
	raw, err = json.Marshal(free)
	if err != nil {
		return nil, nil, err
	}
	return &free, raw, nil
}
