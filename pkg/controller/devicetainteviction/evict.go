package devicetainteviction

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
)

// maybeDeletePod evicts the pod if it is due: it returns how long to wait
// when it is not yet, an error to retry.
func (tc *Controller) maybeDeletePod(ctx context.Context, ref objectRef) (time.Duration, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "pod", ref)
	tc.mu.Lock()
	e, scheduled := tc.deleteAt[ref]
	done := tc.evicted.Has(ref.UID)
	tc.mu.Unlock()
	if !scheduled || done {
		logger.V(5).Info("Work item for pod deletion obsolete, nothing to do")
		return 0, nil
	}
	if wait := time.Until(e.when.Time); wait > 0 {
		// Not yet; the time may have moved since the item was queued.
		return wait, nil
	}

	err := tc.addConditionAndDeletePod(ctx, ref)
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	delete(tc.deleteAt, ref)
	tc.evicted.Add(ref.UID)
	if err != nil {
		// Gone already (or replaced): nothing was evicted by us.
		return 0, nil
	}

	latency := time.Since(e.when.Time)
	logger.V(2).Info("Evicted pod by deleting it", "latency", latency, "reason", &e)
	podDeletions.Inc()
	podDeletionLatency.Observe(latency.Seconds())
	for _, reason := range e.reasons {
		if reason.rule == nil {
			continue
		}
		tc.ruleEvictions[reason.rule.UID]++
		// Not right away: the status is computed from the informer, which
		// has not seen the deletion yet.
		tc.queue.AddAfter(ruleWork(reason.rule), ruleStatusPeriod)
	}
	return 0, nil
}

// addConditionAndDeletePod marks the pod with DisruptionTarget (so that
// its owner, e.g. a Job's pod failure policy, knows why it goes) and
// deletes it, both only for the pod instance that was meant.
func (tc *Controller) addConditionAndDeletePod(ctx context.Context, ref objectRef) error {
	pod, err := tc.client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.UID != ref.UID {
		// Another pod took the name: ours is gone, stop retrying.
		return apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
	}
	if pod.DeletionTimestamp != nil {
		return nil
	}
	tc.podEvent(ref, "Marking for deletion")

	status := pod.Status.DeepCopy()
	if setCondition(status, v1.PodCondition{
		Type:    v1.DisruptionTarget,
		Status:  v1.ConditionTrue,
		Reason:  "DeletionByDeviceTaintManager",
		Message: "Device Taint manager: deleting due to NoExecute taint",
	}) {
		if err := patchPodStatus(ctx, tc, pod, status); err != nil {
			return err
		}
	}
	// The UID precondition makes the deletion fail if the pod was replaced
	// meanwhile; the retry then notices.
	return tc.client.CoreV1().Pods(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &ref.UID},
	})
}

// setCondition adds or replaces a pod condition. The transition time is
// now unless the status stays the same; it reports whether anything changed.
func setCondition(status *v1.PodStatus, cond v1.PodCondition) bool {
	cond.LastTransitionTime = metav1.Now()
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != cond.Type {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		same := old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message &&
			old.LastProbeTime.Equal(&cond.LastProbeTime) && old.LastTransitionTime.Equal(&cond.LastTransitionTime)
		*old = cond
		return !same
	}
	status.Conditions = append(status.Conditions, cond)
	return true
}

// patchPodStatus sends the status change as a strategic merge patch that
// carries the pod's UID as precondition.
func patchPodStatus(ctx context.Context, tc *Controller, pod *v1.Pod, status *v1.PodStatus) error {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: *status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return err
	}
	if _, err := tc.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("failed to patch status %q for pod %q/%q: %w", patch, pod.Namespace, pod.Name, err)
	}
	return nil
}

// uidCache is a bounded set of UIDs; the least recently used go first.
type uidCache struct {
	cache *lru.Cache
}

func newUIDCache(size int) *uidCache { return &uidCache{cache: lru.New(size)} }

func (c *uidCache) Add(uid types.UID) { c.cache.Add(uid, nil) }

func (c *uidCache) Has(uid types.UID) bool {
	_, ok := c.cache.Get(uid)
	return ok
}
