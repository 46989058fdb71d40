package statefulset

import (
	"context"
	"reflect"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// Reasons of the Progressing condition (Recreate strategy only).
const (
	RecreateInProgressReason = "RecreateInProgress"
	RecreateCompletedReason  = "RecreateCompleted"
)

// countPods recomputes the replica counters of status from the pod lists.
// Pods not created yet count for nothing; terminating pods count as
// replicas (and ready, if they are) but are no revision's replicas.
func countPods(status *apps.StatefulSetStatus, minReadySeconds int32, current, update *apps.ControllerRevision, now metav1.Time, lists ...[]*v1.Pod) {
	status.Replicas = 0
	status.ReadyReplicas = 0
	status.AvailableReplicas = 0
	status.CurrentReplicas = 0
	status.UpdatedReplicas = 0
	for _, pods := range lists {
		for _, pod := range pods {
			created := isCreated(pod)
			if created {
				status.Replicas++
			}
			if isRunningAndReady(pod) {
				status.ReadyReplicas++
				if isAvailable(pod, minReadySeconds, now) {
					status.AvailableReplicas++
				}
			}
			if created && !isTerminating(pod) {
				switch rev := getPodRevision(pod); {
				case rev == current.Name && rev == update.Name:
					status.CurrentReplicas++
					status.UpdatedReplicas++
				case rev == current.Name:
					status.CurrentReplicas++
				case rev == update.Name:
					status.UpdatedReplicas++
				}
			}
		}
	}
}

// completeUpdate makes the update revision current once every wanted pod
// runs it and is ready.
func completeUpdate(set *apps.StatefulSet, status *apps.StatefulSetStatus, now metav1.Time, recreateStrategy bool) {
	replicas := specReplicas(set)
	if status.UpdatedReplicas != replicas || status.ReadyReplicas != replicas || status.Replicas != replicas {
		return
	}
	status.CurrentReplicas = status.UpdatedReplicas
	status.CurrentRevision = status.UpdateRevision
	if findCondition(status, apps.StatefulSetProgressing) != nil &&
		set.Spec.UpdateStrategy.Type == apps.RecreateStatefulSetStrategyType &&
		recreateStrategy {
		setProgressing(status, v1.ConditionFalse, RecreateCompletedReason, "All pods recreated successfully", now)
	}
}

// statusChanged reports whether status says something set.Status does not.
// An older observedGeneration never wins.
func statusChanged(set *apps.StatefulSet, status *apps.StatefulSetStatus) bool {
	old := &set.Status
	return status.ObservedGeneration > old.ObservedGeneration ||
		status.Replicas != old.Replicas ||
		status.ReadyReplicas != old.ReadyReplicas ||
		status.CurrentReplicas != old.CurrentReplicas ||
		status.UpdatedReplicas != old.UpdatedReplicas ||
		status.AvailableReplicas != old.AvailableReplicas ||
		status.CurrentRevision != old.CurrentRevision ||
		status.UpdateRevision != old.UpdateRevision ||
		collisions(status.CollisionCount) != collisions(old.CollisionCount) ||
		!reflect.DeepEqual(old.Conditions, status.Conditions)
}

func collisions(c *int32) int32 {
	if c == nil {
		return 0
	}
	return *c
}

func findCondition(status *apps.StatefulSetStatus, t apps.StatefulSetConditionType) *apps.StatefulSetCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == t {
			return &status.Conditions[i]
		}
	}
	return nil
}

// setProgressing sets the Progressing condition, keeping the transition
// time while its status stays the same.
func setProgressing(status *apps.StatefulSetStatus, s v1.ConditionStatus, reason, message string, now metav1.Time) {
	cond := findCondition(status, apps.StatefulSetProgressing)
	if cond == nil {
		status.Conditions = append(status.Conditions, apps.StatefulSetCondition{
			Type: apps.StatefulSetProgressing, Status: s, Reason: reason, Message: message, LastTransitionTime: now,
		})
		return
	}
	if cond.Status == s && cond.Reason == reason && cond.Message == message {
		return
	}
	if cond.Status != s {
		cond.LastTransitionTime = now
	}
	cond.Status, cond.Reason, cond.Message = s, reason, message
}

// writeStatus completes a finished update in status, refreshes the
// maxUnavailable gauge, and writes status if it differs from the set's.
func (c *setControl) writeStatus(ctx context.Context, set *apps.StatefulSet, status *apps.StatefulSetStatus, now metav1.Time) error {
	completeUpdate(set, status, now, c.features.StatefulSetRecreateStrategy)
	if c.features.MaxUnavailableStatefulSet {
		maxUnavailable, err := effectiveMaxUnavailable(set)
		if err != nil {
			return err
		}
		maxUnavailableGauge.WithLabelValues(set.Namespace, set.Name, string(set.Spec.PodManagementPolicy)).Set(float64(maxUnavailable))
	}
	if !statusChanged(set, status) {
		return nil
	}
	return c.status.UpdateStatus(ctx, set.DeepCopy(), status)
}

// statusWriter writes a StatefulSet's status.
type statusWriter interface {
	// UpdateStatus sets set's status (set is a private copy), retrying on
	// conflicts.
	UpdateStatus(ctx context.Context, set *apps.StatefulSet, status *apps.StatefulSetStatus) error
}

type apiStatusWriter struct {
	client      clientset.Interface
	setLister   appslisters.StatefulSetLister
	consistency controller.ConsistencyStore
}

func (w *apiStatusWriter) UpdateStatus(ctx context.Context, set *apps.StatefulSet, status *apps.StatefulSetStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		set.Status = *status
		updated, err := w.client.AppsV1().StatefulSets(set.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{})
		if err == nil {
			w.consistency.WroteAt(types.NamespacedName{Namespace: updated.Namespace, Name: updated.Name}, updated.UID, setsResource, updated.ResourceVersion)
			return nil
		}
		if fresh, getErr := w.setLister.StatefulSets(set.Namespace).Get(set.Name); getErr == nil {
			set = fresh.DeepCopy()
		} else {
			klog.FromContext(ctx).Error(getErr, "Error getting updated StatefulSet from lister", "statefulSet", klog.KObj(set))
		}
		return err
	})
}
