package job

import (
	"encoding/json"
	"slices"
	"sync"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// finalizerExpectations remembers, per Job key, the pods whose tracking
// finalizer the controller removed but the informer has not yet shown
// without it. Such pods are already counted in status and must not be
// counted again from a stale cache.
type finalizerExpectations struct {
	mu   sync.Mutex
	uids map[string]sets.Set[types.UID]
}

func newFinalizerExpectations() *finalizerExpectations {
	return &finalizerExpectations{uids: map[string]sets.Set[types.UID]{}}
}

// expected returns a copy of the UIDs still awaited for jobKey.
func (f *finalizerExpectations) expected(jobKey string) sets.Set[types.UID] {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.uids[jobKey]; ok {
		return s.Clone()
	}
	return nil
}

func (f *finalizerExpectations) expectRemoved(logger klog.Logger, jobKey string, uids []types.UID) {
	logger.V(4).Info("Expecting tracking finalizers removed", "key", jobKey, "podUIDs", uids)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.uids[jobKey]
	if !ok {
		s = sets.New[types.UID]()
		f.uids[jobKey] = s
	}
	s.Insert(uids...)
}

func (f *finalizerExpectations) observed(logger klog.Logger, jobKey string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.uids[jobKey]; ok && s.Has(uid) {
		logger.V(4).Info("Observed tracking finalizer removed", "key", jobKey, "podUID", uid)
		s.Delete(uid)
	}
}

func (f *finalizerExpectations) forget(jobKey string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, jobKey)
}

func hasTrackingFinalizer(pod *v1.Pod) bool {
	return slices.Contains(pod.Finalizers, batch.JobTrackingFinalizer)
}

// finishedWithTrackingFinalizer: a terminal pod still holding the finalizer.
func finishedWithTrackingFinalizer(pod *v1.Pod) bool {
	return pod != nil && (pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded) && hasTrackingFinalizer(pod)
}

// recordTrackingFinalizerChange counts terminal pods gaining or losing the
// finalizer (job_controller_terminated_pods_tracking_finalizer_total), for
// any pod, owned by a Job or not.
func recordTrackingFinalizerChange(old, cur *v1.Pod) {
	was, is := finishedWithTrackingFinalizer(old), finishedWithTrackingFinalizer(cur)
	if was == is {
		return
	}
	event := eventDelete
	if is {
		event = eventAdd
	}
	terminatedPodsTrackingFinalizerTotal.WithLabelValues(event).Inc()
}

// removeTrackingFinalizerPatch is a strategic-merge patch that drops only
// our finalizer, or nil when the pod does not have it.
func removeTrackingFinalizerPatch(pod *v1.Pod) []byte {
	if !hasTrackingFinalizer(pod) {
		return nil
	}
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"$deleteFromPrimitiveList/finalizers": []string{batch.JobTrackingFinalizer},
		},
	})
	return b
}
