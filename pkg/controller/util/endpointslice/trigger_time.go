package util

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TriggerTimeTracker computes the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation: the earliest
// time of a change (pod readiness transition, Service creation) not yet
// reflected by a previous sync of the Service.
type TriggerTimeTracker struct {
	mu     sync.Mutex
	states map[types.NamespacedName]triggerState
}

type triggerState struct {
	lastServiceTrigger time.Time
	lastPodTriggers    map[string]time.Time
}

// NewTriggerTimeTracker returns an empty tracker.
func NewTriggerTimeTracker() *TriggerTimeTracker {
	return &TriggerTimeTracker{states: map[types.NamespacedName]triggerState{}}
}

// ComputeEndpointLastChangeTriggerTime returns the trigger time for this
// sync (zero when nothing new happened) and remembers the current state.
// The first sync of a Service returns its creation time.
func (t *TriggerTimeTracker) ComputeEndpointLastChangeTriggerTime(namespace string, service *v1.Service, pods []*v1.Pod) time.Time {
	key := types.NamespacedName{Namespace: namespace, Name: service.Name}
	t.mu.Lock()
	state, known := t.states[key]
	t.mu.Unlock()

	var earliest time.Time
	consider := func(ts time.Time) {
		if earliest.IsZero() || ts.Before(earliest) {
			earliest = ts
		}
	}
	podTriggers := make(map[string]time.Time, len(pods))
	for _, pod := range pods {
		c := podReadyCondition(&pod.Status)
		if c == nil || c.LastTransitionTime.IsZero() {
			continue
		}
		ts := c.LastTransitionTime.Time
		podTriggers[pod.Name] = ts
		if ts.After(state.lastPodTriggers[pod.Name]) {
			consider(ts)
		}
	}
	svcTrigger := service.CreationTimestamp.Time
	if svcTrigger.After(state.lastServiceTrigger) {
		consider(svcTrigger)
	}

	t.mu.Lock()
	t.states[key] = triggerState{lastServiceTrigger: svcTrigger, lastPodTriggers: podTriggers}
	t.mu.Unlock()

	if !known {
		return service.CreationTimestamp.Time
	}
	return earliest
}

// DeleteService forgets a deleted Service.
func (t *TriggerTimeTracker) DeleteService(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.states, types.NamespacedName{Namespace: namespace, Name: name})
}
