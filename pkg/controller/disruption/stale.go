package disruption

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// disruptionTargetCondition returns the pod's DisruptionTarget condition
// or nil.
func disruptionTargetCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.DisruptionTarget {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// stalePodDisruptionCondition reports whether pod carries a True
// DisruptionTarget condition that this controller may have to reset, and
// how long until it becomes stale (0 when it already is). The condition
// is left alone on pods being deleted (the disruption is happening), on
// finished pods (nothing to gain from a write) and when the kubelet set it
// (its termination may legitimately take arbitrarily long).
func (dc *Controller) stalePodDisruptionCondition(pod *v1.Pod) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil {
		return false, 0
	}
	cond := disruptionTargetCondition(pod)
	if cond == nil || cond.Status != v1.ConditionTrue || cond.Reason == v1.PodReasonTerminationByKubelet || controller.IsPodTerminal(pod) {
		return false, 0
	}
	wait := dc.stalePodDisruptionTimeout - dc.clock.Since(cond.LastTransitionTime.Time)
	return true, max(wait, 0)
}

// syncStalePodDisruption sets a stale DisruptionTarget condition to False
// (dropping its reason and message) with a status update of the pod.
func (dc *Controller) syncStalePodDisruption(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := dc.clock.Now()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	defer func() {
		logger.V(4).Info("Finished syncing Pod to clear DisruptionTarget condition", "pod", klog.KRef(namespace, name), "duration", dc.clock.Since(start))
	}()

	pod, err := dc.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("Skipping clearing DisruptionTarget condition because pod was deleted", "pod", klog.KRef(namespace, name))
		return nil
	}
	if err != nil {
		return err
	}

	stale, after := dc.stalePodDisruptionCondition(pod)
	if !stale {
		return nil
	}
	if after > 0 {
		// Seen early (e.g. a resync); look again once it is due.
		dc.enqueueStalePodDisruptionCleanup(logger, pod, after)
		return nil
	}

	newPod := pod.DeepCopy()
	*disruptionTargetCondition(newPod) = v1.PodCondition{
		Type:   v1.DisruptionTarget,
		Status: v1.ConditionFalse,
		// PodObservedGenerationTracking is GA: conditions record the
		// generation they were computed for.
		ObservedGeneration: newPod.Generation,
		LastTransitionTime: metav1.NewTime(dc.clock.Now()),
	}
	if _, err := dc.kubeClient.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, newPod, metav1.UpdateOptions{}); err != nil {
		return err
	}
	logger.V(2).Info("Reset stale DisruptionTarget condition to False", "pod", klog.KObj(pod))
	return nil
}
