package deployment

import (
	"context"
	"fmt"
	"strconv"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// rollback serves the deprecated.deployment.rollback.to annotation (what the
// removed spec.rollbackTo field round-trips to, still honoured upstream):
// copy the template of the requested revision (0 = the previous one) into the
// Deployment, then clear the request.
func (p *syncPass) rollback(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	d := p.d
	newRS, allOldRSs, err := p.getAllReplicaSetsAndSyncRevision(ctx, true)
	if err != nil {
		return err
	}
	// Upstream has written these by now; the spec update below would not.
	if p.statusPending {
		if err := p.writeStatus(ctx); err != nil {
			return err
		}
	}
	allRSs := append(allOldRSs, newRS)
	revision := *getRollbackTo(d)
	if revision == 0 {
		if revision = util.LastRevision(logger, allRSs); revision == 0 {
			p.dc.eventRecorder.Eventf(d, v1.EventTypeWarning, util.RollbackRevisionNotFound, "%s", "Unable to find last revision.")
			return p.updateDeploymentAndClearRollbackTo(ctx)
		}
	}
	for _, rs := range allRSs {
		v, err := util.Revision(rs)
		if err != nil {
			logger.V(4).Info("Unable to extract revision from deployment's replica set", "replicaSet", klog.KObj(rs), "err", err)
			continue
		}
		if v != revision {
			continue
		}
		logger.V(4).Info("Found replica set with desired revision", "replicaSet", klog.KObj(rs), "revision", v)
		// The revision is bumped by the next pass's getNewReplicaSet.
		performed, err := p.rollbackToTemplate(ctx, rs)
		if performed && err == nil {
			p.dc.eventRecorder.Eventf(d, v1.EventTypeNormal, util.RollbackDone, "%s", fmt.Sprintf("Rolled back deployment %q to revision %d", d.Name, revision))
		}
		return err
	}
	p.dc.eventRecorder.Eventf(d, v1.EventTypeWarning, util.RollbackRevisionNotFound, "%s", "Unable to find the revision to rollback to.")
	return p.updateDeploymentAndClearRollbackTo(ctx)
}

// rollbackToTemplate copies rs's template and user annotations into the
// Deployment when they differ, and clears the rollback request either way.
func (p *syncPass) rollbackToTemplate(ctx context.Context, rs *apps.ReplicaSet) (bool, error) {
	logger := klog.FromContext(ctx)
	d := p.d
	performed := false
	if !util.EqualIgnoreHash(&d.Spec.Template, &rs.Spec.Template) {
		logger.V(4).Info("Rolling back deployment to old template spec", "deployment", klog.KObj(d), "templateSpec", rs.Spec.Template.Spec)
		util.SetFromReplicaSetTemplate(d, rs.Spec.Template)
		// The annotations (e.g. change-cause) go back with the template, or
		// the new ReplicaSet would inherit the current ones.
		util.SetDeploymentAnnotationsTo(d, rs)
		performed = true
	} else {
		logger.V(4).Info("Rolling back to a revision that contains the same template as current deployment, skipping rollback...", "deployment", klog.KObj(d))
		p.dc.eventRecorder.Eventf(d, v1.EventTypeWarning, util.RollbackTemplateUnchanged, "%s", fmt.Sprintf("The rollback revision contains the same template as current deployment %q", d.Name))
	}
	return performed, p.updateDeploymentAndClearRollbackTo(ctx)
}

// updateDeploymentAndClearRollbackTo removes the request and writes the spec.
func (p *syncPass) updateDeploymentAndClearRollbackTo(ctx context.Context) error {
	klog.FromContext(ctx).V(4).Info("Cleans up rollbackTo of deployment", "deployment", klog.KObj(p.d))
	delete(p.d.Annotations, apps.DeprecatedRollbackTo)
	_, err := p.dc.client.AppsV1().Deployments(p.d.Namespace).Update(ctx, p.d, metav1.UpdateOptions{})
	return err
}

// getRollbackTo returns the requested revision, or nil if none or unparseable.
func getRollbackTo(d *apps.Deployment) *int64 {
	s := d.Annotations[apps.DeprecatedRollbackTo]
	if s == "" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &v
}
