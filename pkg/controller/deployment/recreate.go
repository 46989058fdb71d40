package deployment

import (
	"context"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// rolloutRecreate scales every old ReplicaSet to zero, waits until none of
// their pods runs, then creates (or grows) the new ReplicaSet.
func (p *syncPass) rolloutRecreate(ctx context.Context, podMap map[types.UID][]*v1.Pod) error {
	// Do not create the new ReplicaSet yet: it must not start before the old
	// pods are gone.
	newRS, oldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, false)
	if err != nil {
		return err
	}
	allRSs := append(oldRSs, newRS)
	activeOld := util.FilterActiveReplicaSets(oldRSs)

	scaledDown, err := p.scaleDownOldReplicaSetsForRecreate(ctx, activeOld)
	if err != nil {
		return err
	}
	if scaledDown {
		return p.syncRolloutStatus(ctx, allRSs, newRS)
	}
	if oldPodsRunning(newRS, oldRSs, podMap) {
		return p.syncRolloutStatus(ctx, allRSs, newRS)
	}

	if newRS == nil {
		newRS, oldRSs, err = p.getAllReplicaSetsAndSyncRevision(ctx, true)
		if err != nil {
			return err
		}
		allRSs = append(oldRSs, newRS)
	}
	if _, _, err := p.scaleReplicaSet(ctx, newRS, *p.d.Spec.Replicas, false); err != nil {
		return err
	}
	if util.DeploymentComplete(p.d, &p.d.Status) {
		if err := p.cleanupDeployment(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncRolloutStatus(ctx, allRSs, newRS)
}

// scaleDownOldReplicaSetsForRecreate scales the given old ReplicaSets to zero.
func (p *syncPass) scaleDownOldReplicaSetsForRecreate(ctx context.Context, oldRSs []*apps.ReplicaSet) (bool, error) {
	scaled := false
	for i, rs := range oldRSs {
		if *rs.Spec.Replicas == 0 {
			continue
		}
		did, updated, err := p.scaleReplicaSet(ctx, rs, 0, false)
		if err != nil {
			return false, err
		}
		if did {
			oldRSs[i] = updated
			scaled = true
		}
	}
	return scaled, nil
}

// oldPodsRunning reports whether an old ReplicaSet still counts pods or any
// pod outside the new ReplicaSet is not yet terminal (Unknown counts as
// running: it may be).
func oldPodsRunning(newRS *apps.ReplicaSet, oldRSs []*apps.ReplicaSet, podMap map[types.UID][]*v1.Pod) bool {
	if util.GetActualReplicaCountForReplicaSets(oldRSs) > 0 {
		return true
	}
	for uid, pods := range podMap {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, pod := range pods {
			if pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
				return true
			}
		}
	}
	return false
}
