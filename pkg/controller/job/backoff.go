package job

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// backoffRecord is what the pod-recreation backoff of one Job needs: how
// many pods failed since the last success, and when the latest did.
type backoffRecord struct {
	key                      string
	failuresAfterLastSuccess int32
	lastFailureTime          *time.Time
}

// backoffStore keeps a backoffRecord per Job key. It lives in memory only,
// as upstream: after a restart the backoff starts over.
type backoffStore struct {
	mu      sync.Mutex
	records map[string]backoffRecord
}

func newBackoffStore() *backoffStore {
	return &backoffStore{records: map[string]backoffRecord{}}
}

func (s *backoffStore) update(r backoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[r.key] = r
}

func (s *backoffStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key)
}

// newRecord computes, without storing it, the record after this sync's
// newly finished pods: a success resets the count, and only failures that
// finished after the latest success count again.
func (s *backoffStore) newRecord(key string, succeeded, failed []*v1.Pod) backoffRecord {
	s.mu.Lock()
	r, ok := s.records[key]
	s.mu.Unlock()
	if !ok {
		r = backoffRecord{key: key}
	}
	sortByFinishedTime(succeeded)
	sortByFinishedTime(failed)
	switch {
	case len(failed) == 0 && len(succeeded) == 0:
		return r
	case len(succeeded) == 0:
		r.failuresAfterLastSuccess += int32(len(failed))
		t := finishedTime(failed[len(failed)-1])
		r.lastFailureTime = &t
		return r
	}
	r.failuresAfterLastSuccess = 0
	r.lastFailureTime = nil
	lastSuccess := finishedTime(succeeded[len(succeeded)-1])
	for i := len(failed) - 1; i >= 0; i-- {
		t := finishedTime(failed[i])
		if !t.After(lastSuccess) {
			break
		}
		if r.lastFailureTime == nil {
			r.lastFailureTime = &t
		}
		r.failuresAfterLastSuccess++
	}
	return r
}

func (r backoffRecord) remaining(c clock.PassiveClock, base, maxDelay time.Duration) time.Duration {
	return remainingBackoff(c, base, maxDelay, r.failuresAfterLastSuccess, r.lastFailureTime)
}

// remainingBackoffPerIndex is the wait before recreating the pod of an
// index whose last pod was lastFailed (backoffLimitPerIndex).
func remainingBackoffPerIndex(logger klog.Logger, c clock.PassiveClock, base, maxDelay time.Duration, lastFailed *v1.Pod) time.Duration {
	if lastFailed == nil {
		return 0
	}
	t := finishedTime(lastFailed)
	return remainingBackoff(c, base, maxDelay, absoluteIndexFailureCount(logger, lastFailed)+1, &t)
}

// remainingBackoff: base * 2^(failures-1), capped at maxDelay, minus the
// time since the last failure.
func remainingBackoff(c clock.PassiveClock, base, maxDelay time.Duration, failures int32, last *time.Time) time.Duration {
	if failures == 0 || last == nil {
		return 0
	}
	d := base
	for i := int32(1); i < failures; i++ {
		d *= 2
		if d >= maxDelay {
			d = maxDelay
			break
		}
	}
	elapsed := c.Since(*last)
	if d < elapsed {
		return 0
	}
	return d - elapsed
}

func sortByFinishedTime(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return finishedTime(pods[i]).Before(finishedTime(pods[j])) })
}

// finishedTime estimates when a pod finished: its containers' latest
// termination, else when Ready turned False, else its deletion time minus
// the grace period, else its creation.
func finishedTime(p *v1.Pod) time.Time {
	if t := containersFinishedTime(p); t != nil {
		return *t
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Add(-time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second)
	}
	return p.CreationTimestamp.Time
}

// containersFinishedTime is the latest finish of the regular containers and
// sidecars, or nil if any of them has not terminated with a time.
func containersFinishedTime(p *v1.Pod) *time.Time {
	var latest *time.Time
	consider := func(statuses []v1.ContainerStatus, include func(string) bool) bool {
		for i := range statuses {
			st := &statuses[i]
			if include != nil && !include(st.Name) {
				continue
			}
			if st.State.Terminated == nil || st.State.Terminated.FinishedAt.IsZero() {
				return false
			}
			if t := st.State.Terminated.FinishedAt.Time; latest == nil || latest.Before(t) {
				latest = &t
			}
		}
		return true
	}
	if !consider(p.Status.ContainerStatuses, nil) {
		return nil
	}
	sidecars := sets.New[string]()
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars.Insert(c.Name)
		}
	}
	if !consider(p.Status.InitContainerStatuses, sidecars.Has) {
		return nil
	}
	return latest
}
