package deployment

import (
	"context"
	"fmt"
	"reflect"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// syncRolloutStatus writes the status of a rollout in progress: the
// Progressing condition (progressing, complete or timed out), ReplicaFailure
// lifted from the ReplicaSets, and the counts. With nothing to write it
// schedules the next progress-deadline check instead.
func (p *syncPass) syncRolloutStatus(ctx context.Context, allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) error {
	d := p.d
	newStatus := p.calculateStatus(allRSs, newRS)

	if !util.HasProgressDeadline(d) {
		util.RemoveDeploymentCondition(&newStatus, apps.DeploymentProgressing)
	}

	// A finished rollout seen again (e.g. a resync) makes no progress claims.
	currentCond := util.GetDeploymentCondition(d.Status, apps.DeploymentProgressing)
	complete := newStatus.Replicas == newStatus.UpdatedReplicas && currentCond != nil && currentCond.Reason == util.NewRSAvailableReason
	if util.HasProgressDeadline(d) && !complete {
		p.setProgressingCondition(ctx, &newStatus, newRS, currentCond)
	}

	// Only one ReplicaFailure is carried; the new ReplicaSet's wins.
	if failures := replicaFailures(allRSs, newRS); len(failures) > 0 {
		util.SetDeploymentCondition(&newStatus, failures[0])
	} else {
		util.RemoveDeploymentCondition(&newStatus, apps.DeploymentReplicaFailure)
	}

	if reflect.DeepEqual(d.Status, newStatus) {
		p.dc.requeueStuckDeployment(ctx, d, newStatus)
		if !p.statusPending {
			return nil
		}
	}
	return p.writeCountsStatus(ctx, newStatus)
}

func (p *syncPass) setProgressingCondition(ctx context.Context, newStatus *apps.DeploymentStatus, newRS *apps.ReplicaSet, currentCond *apps.DeploymentCondition) {
	d := p.d
	subject := func(verb string) string {
		if newRS != nil {
			return fmt.Sprintf("ReplicaSet %q %s", newRS.Name, verb)
		}
		return fmt.Sprintf("Deployment %q %s", d.Name, verb)
	}
	now := p.now()
	switch {
	case util.DeploymentComplete(d, newStatus):
		cond := util.NewDeploymentCondition(now, apps.DeploymentProgressing, v1.ConditionTrue, util.NewRSAvailableReason, subject("has successfully progressed."))
		util.SetDeploymentCondition(newStatus, *cond)
	case util.DeploymentProgressing(d, newStatus):
		// Progress refreshes lastUpdateTime even when the reason stays the
		// same, which SetDeploymentCondition alone would not do; the
		// transition time is kept while the status stays True.
		cond := util.NewDeploymentCondition(now, apps.DeploymentProgressing, v1.ConditionTrue, util.ReplicaSetUpdatedReason, subject("is progressing."))
		if currentCond != nil {
			if currentCond.Status == v1.ConditionTrue {
				cond.LastTransitionTime = currentCond.LastTransitionTime
			}
			util.RemoveDeploymentCondition(newStatus, apps.DeploymentProgressing)
		}
		util.SetDeploymentCondition(newStatus, *cond)
	case util.DeploymentTimedOut(ctx, d, newStatus, now):
		cond := util.NewDeploymentCondition(now, apps.DeploymentProgressing, v1.ConditionFalse, util.TimedOutReason, subject("has timed out progressing."))
		util.SetDeploymentCondition(newStatus, *cond)
	}
}

// replicaFailures turns ReplicaFailure conditions of the ReplicaSets into
// Deployment conditions, the new ReplicaSet's first.
func replicaFailures(allRSs []*apps.ReplicaSet, newRS *apps.ReplicaSet) []apps.DeploymentCondition {
	collect := func(rss ...*apps.ReplicaSet) []apps.DeploymentCondition {
		var out []apps.DeploymentCondition
		for _, rs := range rss {
			if rs == nil {
				continue
			}
			for _, c := range rs.Status.Conditions {
				if c.Type == apps.ReplicaSetReplicaFailure {
					out = append(out, util.ReplicaSetToDeploymentCondition(c))
				}
			}
		}
		return out
	}
	if fromNew := collect(newRS); len(fromNew) > 0 {
		return fromNew
	}
	return collect(allRSs...)
}

// requeueStuckDeployment schedules a sync for when the progress deadline of a
// rollout that shows no progress would pass, so ProgressDeadlineExceeded is
// reported on time rather than at the next resync. It returns the delay, 0
// for now, or -1 when no check is needed.
func (dc *Controller) requeueStuckDeployment(ctx context.Context, d *apps.Deployment, newStatus apps.DeploymentStatus) time.Duration {
	logger := klog.FromContext(ctx)
	cond := util.GetDeploymentCondition(d.Status, apps.DeploymentProgressing)
	if !util.HasProgressDeadline(d) || cond == nil {
		return -1
	}
	if util.DeploymentComplete(d, &newStatus) || cond.Reason == util.TimedOutReason {
		return -1
	}
	after := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(dc.clock.Now())
	if after < time.Second {
		logger.V(4).Info("Queueing up deployment for a progress check now", "deployment", klog.KObj(d))
		dc.enqueueRateLimited(d)
		return 0
	}
	logger.V(4).Info("Queueing up deployment for a progress check", "deployment", klog.KObj(d), "queueAfter", int(after.Seconds()))
	// One extra second absorbs sub-second skew in AddAfter.
	dc.enqueueAfter(d, after+time.Second)
	return after
}
