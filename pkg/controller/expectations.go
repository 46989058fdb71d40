package controller

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ExpectationsTimeout is how long recorded expectations stay valid. If a
// watch event is lost, a controller waiting on it wakes up after this long
// instead of sleeping forever (same value as upstream).
const ExpectationsTimeout = 5 * time.Minute

// ControllerExpectationsInterface lets a controller record how many creates
// and deletes it is waiting to observe before it acts on a key again.
// Keys are controller keys (namespace/name); do not share one instance
// between controllers of different kinds, their keys could collide.
type ControllerExpectationsInterface interface {
	GetExpectations(controllerKey string) (*ControlleeExpectations, bool, error)
	SatisfiedExpectations(logger klog.Logger, controllerKey string) bool
	DeleteExpectations(logger klog.Logger, controllerKey string)
	SetExpectations(logger klog.Logger, controllerKey string, add, del int) error
	ExpectCreations(logger klog.Logger, controllerKey string, adds int) error
	ExpectDeletions(logger klog.Logger, controllerKey string, dels int) error
	CreationObserved(logger klog.Logger, controllerKey string)
	DeletionObserved(logger klog.Logger, controllerKey string)
	RaiseExpectations(logger klog.Logger, controllerKey string, add, del int)
	LowerExpectations(logger klog.Logger, controllerKey string, add, del int)
}

// ControlleeExpectations counts the creates and deletes still expected for
// one controller key. Counters are atomic because informer handlers lower
// them while a worker may read them.
type ControlleeExpectations struct {
	add       atomic.Int64
	del       atomic.Int64
	key       string
	timestamp time.Time
}

// Add adds to both counters (negative values lower them).
func (e *ControlleeExpectations) Add(add, del int64) {
	e.add.Add(add)
	e.del.Add(del)
}

// Fulfilled reports whether nothing more is expected.
func (e *ControlleeExpectations) Fulfilled() bool {
	return e.add.Load() <= 0 && e.del.Load() <= 0
}

// GetExpectations returns the pending adds and deletes.
func (e *ControlleeExpectations) GetExpectations() (int64, int64) {
	return e.add.Load(), e.del.Load()
}

// MarshalLog gives loggers a consistent snapshot.
func (e *ControlleeExpectations) MarshalLog() interface{} {
	return map[string]interface{}{"key": e.key, "add": e.add.Load(), "del": e.del.Load()}
}

// ControllerExpectations is the standard ControllerExpectationsInterface:
// a map of key -> expectations, each valid for ExpectationsTimeout.
type ControllerExpectations struct {
	clock clock.PassiveClock
	mu    sync.RWMutex
	byKey map[string]*ControlleeExpectations
}

var _ ControllerExpectationsInterface = &ControllerExpectations{}

// NewControllerExpectations returns an empty store using the real clock.
func NewControllerExpectations() *ControllerExpectations {
	return NewControllerExpectationsWithClock(clock.RealClock{})
}

// NewControllerExpectationsWithClock lets tests control expiry.
func NewControllerExpectationsWithClock(c clock.PassiveClock) *ControllerExpectations {
	return &ControllerExpectations{clock: c, byKey: map[string]*ControlleeExpectations{}}
}

// GetExpectations returns the expectations recorded for controllerKey.
func (r *ControllerExpectations) GetExpectations(controllerKey string) (*ControlleeExpectations, bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byKey[controllerKey]
	return e, ok, nil
}

// DeleteExpectations forgets controllerKey, e.g. when its object is deleted
// so a recreated object with the same name starts clean.
func (r *ControllerExpectations) DeleteExpectations(logger klog.Logger, controllerKey string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byKey, controllerKey)
}

// SatisfiedExpectations reports whether the controller should act on
// controllerKey: true when nothing was recorded, when everything recorded
// has been observed, or when the record is older than ExpectationsTimeout.
func (r *ControllerExpectations) SatisfiedExpectations(logger klog.Logger, controllerKey string) bool {
	e, ok, _ := r.GetExpectations(controllerKey)
	switch {
	case !ok:
		logger.V(4).Info("Controller either never recorded expectations, or the ttl expired", "controller", controllerKey)
		return true
	case e.Fulfilled():
		logger.V(4).Info("Controller expectations fulfilled", "expectations", e)
		return true
	case r.clock.Since(e.timestamp) > ExpectationsTimeout:
		logger.V(4).Info("Controller expectations expired", "expectations", e)
		return true
	default:
		logger.V(4).Info("Controller still waiting on expectations", "expectations", e)
		return false
	}
}

// SetExpectations replaces whatever was recorded for controllerKey.
func (r *ControllerExpectations) SetExpectations(logger klog.Logger, controllerKey string, add, del int) error {
	e := &ControlleeExpectations{key: controllerKey, timestamp: r.clock.Now()}
	e.add.Store(int64(add))
	e.del.Store(int64(del))
	logger.V(4).Info("Setting expectations", "expectations", e)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byKey[controllerKey] = e
	return nil
}

// ExpectCreations records that adds creations are about to be issued.
func (r *ControllerExpectations) ExpectCreations(logger klog.Logger, controllerKey string, adds int) error {
	return r.SetExpectations(logger, controllerKey, adds, 0)
}

// ExpectDeletions records that dels deletions are about to be issued.
func (r *ControllerExpectations) ExpectDeletions(logger klog.Logger, controllerKey string, dels int) error {
	return r.SetExpectations(logger, controllerKey, 0, dels)
}

// LowerExpectations subtracts from existing expectations; a missing key is ignored.
func (r *ControllerExpectations) LowerExpectations(logger klog.Logger, controllerKey string, add, del int) {
	if e, ok, _ := r.GetExpectations(controllerKey); ok {
		e.Add(int64(-add), int64(-del))
		logger.V(4).Info("Lowered expectations", "expectations", e)
	}
}

// RaiseExpectations adds to existing expectations; a missing key is ignored.
func (r *ControllerExpectations) RaiseExpectations(logger klog.Logger, controllerKey string, add, del int) {
	if e, ok, _ := r.GetExpectations(controllerKey); ok {
		e.Add(int64(add), int64(del))
		logger.V(4).Info("Raised expectations", "expectations", e)
	}
}

// CreationObserved lowers the pending creations by one.
func (r *ControllerExpectations) CreationObserved(logger klog.Logger, controllerKey string) {
	r.LowerExpectations(logger, controllerKey, 1, 0)
}

// DeletionObserved lowers the pending deletions by one.
func (r *ControllerExpectations) DeletionObserved(logger klog.Logger, controllerKey string) {
	r.LowerExpectations(logger, controllerKey, 0, 1)
}

// UIDTrackingControllerExpectations also remembers which objects (by key,
// namespace/name) a controller deleted, so a graceful deletion is counted
// once whether it is first seen as a deletionTimestamp update or as the
// final delete.
type UIDTrackingControllerExpectations struct {
	ControllerExpectationsInterface

	mu   sync.Mutex
	uids map[string]sets.Set[string]
}

// NewUIDTrackingControllerExpectations wraps ce.
func NewUIDTrackingControllerExpectations(ce ControllerExpectationsInterface) *UIDTrackingControllerExpectations {
	return &UIDTrackingControllerExpectations{ControllerExpectationsInterface: ce, uids: map[string]sets.Set[string]{}}
}

// GetUIDs returns a copy of the keys still expected to be deleted.
func (u *UIDTrackingControllerExpectations) GetUIDs(controllerKey string) sets.Set[string] {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s, ok := u.uids[controllerKey]; ok {
		return s.Clone()
	}
	return nil
}

// ExpectDeletions records the keys about to be deleted and expects exactly
// that many deletions (replacing any expected creations).
func (u *UIDTrackingControllerExpectations) ExpectDeletions(logger klog.Logger, controllerKey string, deletedKeys []string) error {
	expected := sets.New(deletedKeys...)
	logger.V(4).Info("Controller waiting on deletions", "controller", controllerKey, "keys", deletedKeys)
	u.mu.Lock()
	defer u.mu.Unlock()
	if old := u.uids[controllerKey]; old.Len() != 0 {
		logger.Error(nil, "Clobbering existing delete keys", "keys", sets.List(old))
	}
	u.uids[controllerKey] = expected
	return u.ControllerExpectationsInterface.ExpectDeletions(logger, controllerKey, expected.Len())
}

// DeletionObserved counts the deletion of deleteKey once, and only if it
// was one this controller expected.
func (u *UIDTrackingControllerExpectations) DeletionObserved(logger klog.Logger, controllerKey, deleteKey string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if s := u.uids[controllerKey]; s.Has(deleteKey) {
		logger.V(4).Info("Controller received delete for pod", "controller", controllerKey, "key", deleteKey)
		u.ControllerExpectationsInterface.DeletionObserved(logger, controllerKey)
		s.Delete(deleteKey)
	}
}

// DeleteExpectations forgets both the counts and the tracked keys.
func (u *UIDTrackingControllerExpectations) DeleteExpectations(logger klog.Logger, controllerKey string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ControllerExpectationsInterface.DeleteExpectations(logger, controllerKey)
	delete(u.uids, controllerKey)
}
