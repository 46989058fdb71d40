package pvcprotection

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Reasons and messages of the Unused condition (PersistentVolumeClaimUnusedSinceTime).
const (
	reasonPodUsingPVC   = "PodUsingPVC"
	messagePodUsingPVC  = "A pod is currently referencing this PVC"
	reasonNoPodsUsing   = "NoPodsUsingPVC"
	messageNoPodsUsing  = "No pods are currently referencing this PVC"
	conditionTypeUnused = v1.PersistentVolumeClaimUnused
)

// syncUnusedCondition makes the Unused condition of a bound PVC say whether
// a pod references it; its lastTransitionTime then tells since when the
// claim has been idle. It returns the PVC as written, or pvc unchanged.
//
// An Unknown condition is left alone while the claim is in use, as
// upstream does.
func (c *Controller) syncUnusedCondition(ctx context.Context, pvc *v1.PersistentVolumeClaim, used bool) (*v1.PersistentVolumeClaim, error) {
	cond := findCondition(pvc.Status.Conditions, conditionTypeUnused)
	switch {
	case used && (cond == nil || cond.Status == v1.ConditionTrue):
		return c.setUnusedCondition(ctx, pvc, v1.ConditionFalse, reasonPodUsingPVC, messagePodUsingPVC)
	case !used && (cond == nil || cond.Status != v1.ConditionTrue):
		return c.setUnusedCondition(ctx, pvc, v1.ConditionTrue, reasonNoPodsUsing, messageNoPodsUsing)
	}
	return pvc, nil
}

func (c *Controller) setUnusedCondition(ctx context.Context, pvc *v1.PersistentVolumeClaim, status v1.ConditionStatus, reason, message string) (*v1.PersistentVolumeClaim, error) {
	logger := klog.FromContext(ctx)
	clone := pvc.DeepCopy()
	cond := v1.PersistentVolumeClaimCondition{
		Type:               conditionTypeUnused,
		Status:             status,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
		Reason:             reason,
		Message:            message,
	}
	if existing := findCondition(clone.Status.Conditions, conditionTypeUnused); existing != nil {
		*existing = cond
	} else {
		clone.Status.Conditions = append(clone.Status.Conditions, cond)
	}
	updated, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.Error(err, "Error updating Unused condition in PVC status", "PVC", klog.KObj(pvc))
		return nil, err
	}
	logger.V(3).Info("Updated Unused condition in PVC status", "PVC", klog.KObj(pvc), "status", status)
	return updated, nil
}

func findCondition(conds []v1.PersistentVolumeClaimCondition, t v1.PersistentVolumeClaimConditionType) *v1.PersistentVolumeClaimCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
