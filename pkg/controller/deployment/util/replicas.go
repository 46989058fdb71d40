package util

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	apps "k8s.io/api/apps/v1"
	intstrutil "k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// IsRollingUpdate reports whether d uses the RollingUpdate strategy.
func IsRollingUpdate(d *apps.Deployment) bool {
	return d.Spec.Strategy.Type == apps.RollingUpdateDeploymentStrategyType
}

// HasProgressDeadline: MaxInt32 is how "no deadline" is spelled after defaulting.
func HasProgressDeadline(d *apps.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// HasRevisionHistoryLimit: MaxInt32 means keep every revision.
func HasRevisionHistoryLimit(d *apps.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

// ResolveFenceposts turns maxSurge and maxUnavailable into absolute numbers
// for desired replicas: surge rounds up, unavailable rounds down, and if both
// come out zero unavailable becomes 1 so the rollout can still move.
func ResolveFenceposts(maxSurge, maxUnavailable *intstrutil.IntOrString, desired int32) (int32, int32, error) {
	zero := intstrutil.FromInt32(0)
	surge, err := intstrutil.GetScaledValueFromIntOrPercent(intstrutil.ValueOrDefault(maxSurge, zero), int(desired), true)
	if err != nil {
		return 0, 0, err
	}
	unavailable, err := intstrutil.GetScaledValueFromIntOrPercent(intstrutil.ValueOrDefault(maxUnavailable, zero), int(desired), false)
	if err != nil {
		return 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return int32(surge), int32(unavailable), nil
}

// MaxSurge is the resolved surge of a rolling Deployment, 0 otherwise.
func MaxSurge(d apps.Deployment) int32 {
	if !IsRollingUpdate(&d) {
		return 0
	}
	// Validation rejects values that fail to resolve.
	surge, _, _ := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return surge
}

// MaxUnavailable is the resolved unavailability budget of a rolling
// Deployment, capped at its replicas; 0 otherwise.
func MaxUnavailable(d apps.Deployment) int32 {
	if !IsRollingUpdate(&d) || *d.Spec.Replicas == 0 {
		return 0
	}
	_, unavailable, _ := ResolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return min(unavailable, *d.Spec.Replicas)
}

// MinAvailable is how many replicas a rolling Deployment must keep available.
func MinAvailable(d *apps.Deployment) int32 {
	if !IsRollingUpdate(d) {
		return 0
	}
	return *d.Spec.Replicas - MaxUnavailable(*d)
}

// GetReplicaCountForReplicaSets sums spec.replicas.
func GetReplicaCountForReplicaSets(rss []*apps.ReplicaSet) int32 {
	return sumRS(rss, func(rs *apps.ReplicaSet) int32 { return *rs.Spec.Replicas })
}

// GetActualReplicaCountForReplicaSets sums status.replicas.
func GetActualReplicaCountForReplicaSets(rss []*apps.ReplicaSet) int32 {
	return sumRS(rss, func(rs *apps.ReplicaSet) int32 { return rs.Status.Replicas })
}

// GetReadyReplicaCountForReplicaSets sums status.readyReplicas.
func GetReadyReplicaCountForReplicaSets(rss []*apps.ReplicaSet) int32 {
	return sumRS(rss, func(rs *apps.ReplicaSet) int32 { return rs.Status.ReadyReplicas })
}

// GetAvailableReplicaCountForReplicaSets sums status.availableReplicas.
func GetAvailableReplicaCountForReplicaSets(rss []*apps.ReplicaSet) int32 {
	return sumRS(rss, func(rs *apps.ReplicaSet) int32 { return rs.Status.AvailableReplicas })
}

func sumRS(rss []*apps.ReplicaSet, f func(*apps.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs)
		}
	}
	return n
}

// GetTerminatingReplicaCountForReplicaSets sums status.terminatingReplicas.
// ReplicaSets never synced are skipped; if a synced one does not report the
// field the sum is unknown and nil is returned.
func GetTerminatingReplicaCountForReplicaSets(rss []*apps.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil && rs.Status.ObservedGeneration == 0:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

// FindActiveOrLatest returns the one ReplicaSet to scale when at most one is
// active: that one, or else the new one, or else the newest old one. With
// several active it returns nil (proportional scaling is needed). It sorts
// oldRSs newest first, as upstream does.
func FindActiveOrLatest(newRS *apps.ReplicaSet, oldRSs []*apps.ReplicaSet) *apps.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	sort.Sort(sort.Reverse(ReplicaSetsByCreationTimestamp(oldRSs)))
	active := FilterActiveReplicaSets(append(oldRSs, newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return oldRSs[0]
	case 1:
		return active[0]
	default:
		return nil
	}
}

// GetReplicaSetProportion is how many replicas rs gains (or loses) when a
// Deployment being rolled out is scaled by toAdd, with added already handed
// out; it never exceeds what is left to hand out.
func GetReplicaSetProportion(logger klog.Logger, rs *apps.ReplicaSet, d apps.Deployment, toAdd, added int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := replicaSetFraction(logger, *rs, d)
	left := toAdd - added
	if toAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}

// replicaSetFraction scales rs by the ratio of the Deployment's new maximum
// size to the one recorded on rs (max-replicas), rounding to nearest.
func replicaSetFraction(logger klog.Logger, rs apps.ReplicaSet, d apps.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	newMax := *d.Spec.Replicas + MaxSurge(d)
	oldMax, ok := getMaxReplicasAnnotation(logger, &rs)
	if !ok || oldMax == 0 {
		// Annotation tampered with: fall back to the current size.
		oldMax = d.Status.Replicas
		if oldMax == 0 {
			return 0
		}
	}
	base := *rs.Spec.Replicas
	// int32 product first, as upstream.
	size := float64(base*newMax) / float64(oldMax)
	return int32(math.Round(size)) - *rs.Spec.Replicas
}

// NewRSNewReplicas is the size the new ReplicaSet may grow to now: up to the
// surge budget for RollingUpdate, the full size for Recreate.
func NewRSNewReplicas(d *apps.Deployment, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) (int32, error) {
	switch d.Spec.Strategy.Type {
	case apps.RollingUpdateDeploymentStrategyType:
		surge, err := intstrutil.GetScaledValueFromIntOrPercent(d.Spec.Strategy.RollingUpdate.MaxSurge, int(*d.Spec.Replicas), true)
		if err != nil {
			return 0, err
		}
		current := GetReplicaCountForReplicaSets(allRSs)
		maxTotal := *d.Spec.Replicas + int32(surge)
		if current >= maxTotal {
			return *newRS.Spec.Replicas, nil
		}
		up := min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas)
		return *newRS.Spec.Replicas + up, nil
	case apps.RecreateDeploymentStrategyType:
		return *d.Spec.Replicas, nil
	default:
		return 0, fmt.Errorf("deployment type %v isn't supported", d.Spec.Strategy.Type)
	}
}

// IsSaturated: rs holds all desired replicas, knows it (desired-replicas
// annotation), and all of them are available.
func IsSaturated(d *apps.Deployment, rs *apps.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[DesiredReplicasAnnotation])
	if err != nil {
		return false
	}
	want := *d.Spec.Replicas
	return *rs.Spec.Replicas == want && int32(desired) == want && rs.Status.AvailableReplicas == want
}
