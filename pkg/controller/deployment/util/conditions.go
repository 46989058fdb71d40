package util

import (
	"context"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Condition reasons, as upstream spells them.
const (
	// Progressing.
	ReplicaSetUpdatedReason = "ReplicaSetUpdated"
	FailedRSCreateReason    = "ReplicaSetCreateError"
	NewReplicaSetReason     = "NewReplicaSetCreated"
	FoundNewRSReason        = "FoundNewReplicaSet"
	NewRSAvailableReason    = "NewReplicaSetAvailable"
	TimedOutReason          = "ProgressDeadlineExceeded"
	PausedDeployReason      = "DeploymentPaused"
	ResumedDeployReason     = "DeploymentResumed"

	// Available.
	MinimumReplicasAvailable   = "MinimumReplicasAvailable"
	MinimumReplicasUnavailable = "MinimumReplicasUnavailable"
)

// NewDeploymentCondition builds a condition stamped at now.
func NewDeploymentCondition(now time.Time, condType apps.DeploymentConditionType, status v1.ConditionStatus, reason, message string) *apps.DeploymentCondition {
	ts := metav1.NewTime(now)
	return &apps.DeploymentCondition{
		Type:               condType,
		Status:             status,
		LastUpdateTime:     ts,
		LastTransitionTime: ts,
		Reason:             reason,
		Message:            message,
	}
}

// GetDeploymentCondition returns a copy of the condition of condType, or nil.
func GetDeploymentCondition(status apps.DeploymentStatus, condType apps.DeploymentConditionType) *apps.DeploymentCondition {
	for i := range status.Conditions {
		if status.Conditions[i].Type == condType {
			c := status.Conditions[i]
			return &c
		}
	}
	return nil
}

// SetDeploymentCondition puts condition into status. A condition with the same
// status and reason is left alone (so its message and times stay); one with
// the same status keeps its transition time. The condition moves to the end.
func SetDeploymentCondition(status *apps.DeploymentStatus, condition apps.DeploymentCondition) {
	cur := GetDeploymentCondition(*status, condition.Type)
	if cur != nil && cur.Status == condition.Status && cur.Reason == condition.Reason {
		return
	}
	if cur != nil && cur.Status == condition.Status {
		condition.LastTransitionTime = cur.LastTransitionTime
	}
	status.Conditions = append(withoutCondition(status.Conditions, condition.Type), condition)
}

// RemoveDeploymentCondition drops the condition of condType.
func RemoveDeploymentCondition(status *apps.DeploymentStatus, condType apps.DeploymentConditionType) {
	status.Conditions = withoutCondition(status.Conditions, condType)
}

// withoutCondition returns a fresh slice (nil when empty, as upstream, so a
// status with no conditions compares equal to one decoded from the server).
func withoutCondition(conds []apps.DeploymentCondition, condType apps.DeploymentConditionType) []apps.DeploymentCondition {
	var out []apps.DeploymentCondition
	for _, c := range conds {
		if c.Type != condType {
			out = append(out, c)
		}
	}
	return out
}

// ReplicaSetToDeploymentCondition lifts a ReplicaSet condition (ReplicaFailure)
// onto the Deployment; its transition time doubles as update time.
func ReplicaSetToDeploymentCondition(c apps.ReplicaSetCondition) apps.DeploymentCondition {
	return apps.DeploymentCondition{
		Type:               apps.DeploymentConditionType(c.Type),
		Status:             c.Status,
		LastTransitionTime: c.LastTransitionTime,
		LastUpdateTime:     c.LastTransitionTime,
		Reason:             c.Reason,
		Message:            c.Message,
	}
}

// DeploymentComplete: every desired replica is updated and available, no old
// replica is left, and the controller has seen the current generation.
func DeploymentComplete(d *apps.Deployment, s *apps.DeploymentStatus) bool {
	want := *d.Spec.Replicas
	return s.UpdatedReplicas == want &&
		s.Replicas == want &&
		s.AvailableReplicas == want &&
		s.ObservedGeneration >= d.Generation
}

// DeploymentProgressing reports whether s shows progress over d.Status: more
// updated, ready or available replicas, or fewer old ones.
func DeploymentProgressing(d *apps.Deployment, s *apps.DeploymentStatus) bool {
	old := d.Status
	oldOld := old.Replicas - old.UpdatedReplicas
	newOld := s.Replicas - s.UpdatedReplicas
	return s.UpdatedReplicas > old.UpdatedReplicas ||
		newOld < oldOld ||
		s.ReadyReplicas > old.ReadyReplicas ||
		s.AvailableReplicas > old.AvailableReplicas
}

// DeploymentTimedOut reports whether the Progressing condition in s is older
// than progressDeadlineSeconds at now, or already says so.
func DeploymentTimedOut(ctx context.Context, d *apps.Deployment, s *apps.DeploymentStatus, now time.Time) bool {
	if !HasProgressDeadline(d) {
		return false
	}
	cond := GetDeploymentCondition(*s, apps.DeploymentProgressing)
	if cond == nil {
		return false
	}
	// A finished rollout is never judged against the deadline: the cached
	// Deployment may lag behind the creation of a new ReplicaSet.
	if cond.Reason == NewRSAvailableReason {
		return false
	}
	if cond.Reason == TimedOutReason {
		return true
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	timedOut := cond.LastUpdateTime.Add(deadline).Before(now)
	klog.FromContext(ctx).V(4).Info("Deployment timed out from last progress check", "deployment", klog.KObj(d), "timeout", timedOut, "from", cond.LastUpdateTime, "now", now)
	return timedOut
}
