package deployment

import (
	"context"
	"fmt"
	"sort"

	apps "k8s.io/api/apps/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// rolloutRolling moves one step of a RollingUpdate: grow the new ReplicaSet
// within maxSurge, else shrink old ones within maxUnavailable, else (once
// complete) prune history; then report status.
func (p *syncPass) rolloutRolling(ctx context.Context) error {
	newRS, oldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, true)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)

	scaledUp, err := p.reconcileNewReplicaSet(ctx, allRSs, newRS)
	if err != nil {
		return err
	}
	if scaledUp {
		return p.syncRolloutStatus(ctx, allRSs, newRS)
	}

	scaledDown, err := p.reconcileOldReplicaSets(ctx, allRSs, util.FilterActiveReplicaSets(oldRSs), newRS)
	if err != nil {
		return err
	}
	if scaledDown {
		return p.syncRolloutStatus(ctx, allRSs, newRS)
	}

	if util.DeploymentComplete(p.d, &p.d.Status) {
		if err := p.cleanupDeployment(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncRolloutStatus(ctx, allRSs, newRS)
}

// reconcileNewReplicaSet grows the new ReplicaSet as far as the surge budget
// allows (or shrinks it if it exceeds spec.replicas).
func (p *syncPass) reconcileNewReplicaSet(ctx context.Context, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) (bool, error) {
	want := *p.d.Spec.Replicas
	switch have := *newRS.Spec.Replicas; {
	case have == want:
		return false, nil
	case have > want:
		scaled, _, err := p.scaleReplicaSet(ctx, newRS, want, false)
		return scaled, err
	}
	target, err := util.NewRSNewReplicas(p.d, allRSs, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := p.scaleReplicaSet(ctx, newRS, target, false)
	return scaled, err
}

// reconcileOldReplicaSets shrinks old ReplicaSets as far as availability
// allows: first their unhealthy replicas, then available ones down to
// spec.replicas - maxUnavailable. Unavailable pods of the new ReplicaSet
// count against the budget so a broken template cannot drain the old ones.
func (p *syncPass) reconcileOldReplicaSets(ctx context.Context, allRSs, oldRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) (bool, error) {
	logger := klog.FromContext(ctx)
	d := p.d
	if util.GetReplicaCountForReplicaSets(oldRSs) == 0 {
		return false, nil
	}
	allPods := util.GetReplicaCountForReplicaSets(allRSs)
	logger.V(4).Info("New replica set", "replicaSet", klog.KObj(newRS), "availableReplicas", newRS.Status.AvailableReplicas)

	minAvailable := *d.Spec.Replicas - util.MaxUnavailable(*d)
	newUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := allPods - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}

	// Unhealthy replicas go first: removing them costs no availability and
	// they would otherwise block the rollout.
	oldRSs, cleaned, err := p.cleanupUnhealthyReplicas(ctx, oldRSs, maxScaledDown)
	if err != nil {
		// As upstream: the error is dropped and the next pass retries.
		return false, nil
	}
	logger.V(4).Info("Cleaned up unhealthy replicas from old RSes", "count", cleaned)

	allRSs = append(oldRSs, newRS)
	scaledDown, err := p.scaleDownOldReplicaSetsForRollingUpdate(ctx, allRSs, oldRSs)
	if err != nil {
		return false, nil
	}
	logger.V(4).Info("Scaled down old RSes", "deployment", klog.KObj(d), "count", scaledDown)
	return cleaned+scaledDown > 0, nil
}

// cleanupUnhealthyReplicas removes up to maxCleanup not-available replicas
// from old ReplicaSets, oldest first.
func (p *syncPass) cleanupUnhealthyReplicas(ctx context.Context, oldRSs []*apps.ReplicaSet, maxCleanup int32) ([]*apps.ReplicaSet, int32, error) {
	logger := klog.FromContext(ctx)
	sort.Sort(util.ReplicaSetsByCreationTimestamp(oldRSs))
	total := int32(0)
	for i, rs := range oldRSs {
		if total >= maxCleanup {
			break
		}
		replicas := *rs.Spec.Replicas
		if replicas == 0 {
			continue
		}
		logger.V(4).Info("Found available pods in old RS", "replicaSet", klog.KObj(rs), "availableReplicas", rs.Status.AvailableReplicas)
		if replicas == rs.Status.AvailableReplicas {
			continue
		}
		n := min(maxCleanup-total, replicas-rs.Status.AvailableReplicas)
		target := replicas - n
		if target > replicas {
			return nil, 0, fmt.Errorf("when cleaning up unhealthy replicas, got invalid request to scale down %s/%s %d -> %d", rs.Namespace, rs.Name, replicas, target)
		}
		_, updated, err := p.scaleReplicaSet(ctx, rs, target, false)
		if err != nil {
			return nil, total, err
		}
		total += n
		oldRSs[i] = updated
	}
	return oldRSs, total, nil
}

// scaleDownOldReplicaSetsForRollingUpdate removes available old replicas,
// oldest ReplicaSet first, while more than minAvailable stay available.
func (p *syncPass) scaleDownOldReplicaSetsForRollingUpdate(ctx context.Context, allRSs, oldRSs []*apps.ReplicaSet) (int32, error) {
	logger := klog.FromContext(ctx)
	d := p.d
	minAvailable := *d.Spec.Replicas - util.MaxUnavailable(*d)
	available := util.GetAvailableReplicaCountForReplicaSets(allRSs)
	if available <= minAvailable {
		return 0, nil
	}
	logger.V(4).Info("Found available pods in deployment, scaling down old RSes", "deployment", klog.KObj(d), "availableReplicas", available)

	sort.Sort(util.ReplicaSetsByCreationTimestamp(oldRSs))
	budget := available - minAvailable
	total := int32(0)
	for _, rs := range oldRSs {
		if total >= budget {
			break
		}
		replicas := *rs.Spec.Replicas
		if replicas == 0 {
			continue
		}
		n := min(replicas, budget-total)
		target := replicas - n
		if target > replicas {
			return 0, fmt.Errorf("when scaling down old RS, got invalid request to scale down %s/%s %d -> %d", rs.Namespace, rs.Name, replicas, target)
		}
		if _, _, err := p.scaleReplicaSet(ctx, rs, target, false); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
