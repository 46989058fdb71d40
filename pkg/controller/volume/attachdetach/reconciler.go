package attachdetach

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/operations"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// reconciler drives the actual state towards the desired one: every
// loopPeriod it starts detaches, then attaches, then patches node
// statuses; every syncDuration it also checks with the plugins that the
// confirmed attachments still exist.
type reconciler struct {
	loopPeriod                  time.Duration
	maxWaitForUnmountDuration   time.Duration
	syncDuration                time.Duration
	disableReconciliationSync   bool
	disableForceDetachOnTimeout bool

	dsw           *cache.DesiredStateOfWorld
	asw           *cache.ActualStateOfWorld
	executor      *operations.Executor
	statusUpdater *nodeStatusUpdater
	nodeLister    corelisters.NodeLister
	recorder      record.EventRecorder

	// timeOfLastSync is only touched by the reconciler goroutine.
	timeOfLastSync time.Time
}

func (rc *reconciler) run(ctx context.Context) {
	wait.UntilWithContext(ctx, rc.loop, rc.loopPeriod)
}

func (rc *reconciler) loop(ctx context.Context) {
	rc.reconcile(ctx)
	logger := klog.FromContext(ctx)
	switch {
	case rc.disableReconciliationSync:
		logger.V(5).Info("Skipping reconciling attached volumes still attached since it is disabled via the command line")
	case rc.syncDuration < time.Second:
		logger.V(5).Info("Skipping reconciling attached volumes still attached since it is set to less than one second via the command line")
	case time.Since(rc.timeOfLastSync) > rc.syncDuration:
		logger.V(5).Info("Starting reconciling attached volumes still attached")
		rc.executor.VerifyVolumesAreAttached(ctx, rc.asw.GetAttachedVolumesPerNode(), rc.asw)
		rc.timeOfLastSync = time.Now()
	}
}

// nodeState reads what the detach decision needs from the cached node:
// Ready, and the node.kubernetes.io/out-of-service taint. A missing node
// is neither.
func (rc *reconciler) nodeState(logger klog.Logger, name types.NodeName) (healthy, outOfService bool) {
	node, err := rc.nodeLister.Get(string(name))
	if err != nil {
		logger.V(5).Info("Failed to get health of node", "node", klog.KRef("", string(name)), "err", err)
		logger.V(5).Info("Failed to get taint specs for node", "node", klog.KRef("", string(name)), "err", err)
		return false, false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			healthy = c.Status == v1.ConditionTrue
			break
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == v1.TaintNodeOutOfService {
			outOfService = true
			break
		}
	}
	return healthy, outOfService
}

func (rc *reconciler) reconcile(ctx context.Context) {
	logger := klog.FromContext(ctx)
	// Detach first, so that a volume moving to another node is free sooner.
	for _, av := range rc.asw.GetAttachedVolumes() {
		if rc.dsw.VolumeExists(av.VolumeName, av.NodeName) {
			continue
		}
		rc.maybeDetach(ctx, logger, av)
	}
	rc.attachDesiredVolumes(ctx, logger)
	if err := rc.statusUpdater.UpdateNodeStatuses(ctx); err != nil {
		logger.Info("UpdateNodeStatuses failed", "err", err)
	}
}

func (rc *reconciler) maybeDetach(ctx context.Context, logger klog.Logger, av cache.AttachedVolume) {
	nodeRef := klog.KRef("", string(av.NodeName))
	// Check for a running or backing-off operation before anything else:
	// otherwise the checks below could pass while an operation ends,
	// and the volume be detached twice.
	opNode := av.NodeName
	if !plugins.IsMultiAttachAllowed(av.Spec) {
		opNode = ""
	}
	if !rc.executor.IsOperationSafeToRetry(av.VolumeName, opNode, operations.DetachOperationName) {
		logger.V(10).Info("Operation for volume is already running or still in exponential backoff. Can't start detach", "node", nodeRef, "volumeName", av.VolumeName)
		return
	}
	// A finished detach removes the volume before its operation ends;
	// look again so as not to detach a detached volume.
	if rc.asw.GetAttachState(av.VolumeName, av.NodeName) == cache.AttachStateDetached {
		logger.V(5).Info("Volume detached--skipping", "node", nodeRef, "volumeName", av.VolumeName)
		return
	}
	elapsed, err := rc.asw.SetDetachRequestTime(logger, av.VolumeName, av.NodeName)
	if err != nil {
		logger.Error(err, "Cannot trigger detach because it fails to set detach request time with error")
		return
	}
	timedOut := elapsed > rc.maxWaitForUnmountDuration
	healthy, outOfService := rc.nodeState(logger, av.NodeName)
	forceOnTimeout := timedOut && !rc.disableForceDetachOnTimeout
	if timedOut && rc.disableForceDetachOnTimeout {
		logger.V(5).Info("Drain timeout expired for volume but disableForceDetachOnTimeout was set", "node", nodeRef, "volumeName", av.VolumeName)
	}
	// A mounted volume stays, unless its node is gone unhealthy past the
	// timeout or was declared out of service.
	forceDetach := forceOnTimeout && !healthy
	if av.MountedByNode && !forceDetach && !outOfService {
		logger.V(5).Info("Cannot detach volume because it is still mounted", "node", nodeRef, "volumeName", av.VolumeName)
		return
	}

	// Take the volume out of node status first, so the kubelet does not
	// start mounting it; if that cannot be written, do not detach.
	if err := rc.asw.RemoveVolumeFromReportAsAttached(av.VolumeName, av.NodeName); err != nil {
		logger.V(5).Info("RemoveVolumeFromReportAsAttached failed while removing volume from node", "node", nodeRef, "volumeName", av.VolumeName, "err", err)
	}
	if err := rc.statusUpdater.UpdateNodeStatusForNode(ctx, av.NodeName); err != nil {
		logger.Error(err, "UpdateNodeStatusForNode failed while attempting to report volume as attached", "node", nodeRef, "volumeName", av.VolumeName)
		rc.asw.AddVolumeToReportAsAttached(logger, av.VolumeName, av.NodeName)
		return
	}

	logger.V(5).Info("Starting attacherDetacher.DetachVolume", "node", nodeRef, "volumeName", av.VolumeName)
	if outOfService {
		logger.V(4).Info("node has out-of-service taint", "node", nodeRef)
	}
	verifySafe := !forceOnTimeout && !outOfService
	err = rc.executor.DetachVolume(ctx, av, verifySafe, rc.asw)
	if err != nil {
		// Not started: the node must keep listing the volume.
		rc.asw.AddVolumeToReportAsAttached(logger, av.VolumeName, av.NodeName)
		if !operations.IsBackoff(err) {
			logger.Error(err, "attacherDetacher.DetachVolume failed to start", "node", nodeRef, "volumeName", av.VolumeName)
		}
		return
	}
	switch {
	case verifySafe:
		logger.Info("attacherDetacher.DetachVolume started", "node", nodeRef, "volumeName", av.VolumeName)
	case forceOnTimeout:
		recordForcedDetach(forceDetachReasonTimeout)
		logger.Info("attacherDetacher.DetachVolume started: this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching",
			"duration", rc.maxWaitForUnmountDuration, "node", nodeRef, "volumeName", av.VolumeName)
	default:
		recordForcedDetach(forceDetachReasonOutOfService)
		logger.Info("attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching", "node", nodeRef, "volumeName", av.VolumeName)
	}
}

func (rc *reconciler) attachDesiredVolumes(ctx context.Context, logger klog.Logger) {
	for _, v := range rc.dsw.GetVolumesToAttach() {
		multiAttach := plugins.IsMultiAttachAllowed(v.Spec)
		opNode := v.NodeName
		if !multiAttach {
			opNode = ""
		}
		if rc.executor.IsOperationPending(v.VolumeName, opNode) {
			logger.V(10).Info("Operation for volume is already running. Can't start attach", "node", klog.KRef("", string(v.NodeName)), "volumeName", v.VolumeName)
			continue
		}
		// The pending check must come first: an attach updates the actual
		// state just before its operation ends.
		if rc.asw.GetAttachState(v.VolumeName, v.NodeName) == cache.AttachStateAttached {
			logger.V(10).Info("Volume attached--touching", "volume", v.String())
			rc.asw.ResetDetachRequestTime(logger, v.VolumeName, v.NodeName)
			continue
		}
		if !multiAttach {
			if nodes := rc.asw.GetNodesForAttachedVolume(v.VolumeName); len(nodes) > 0 {
				if !v.MultiAttachErrorReported {
					rc.reportMultiAttachError(logger, v, nodes)
					rc.dsw.SetMultiAttachError(v.VolumeName, v.NodeName)
				}
				continue
			}
		}
		logger.V(5).Info("Starting attacherDetacher.AttachVolume", "volume", v.String())
		err := rc.executor.AttachVolume(ctx, v, rc.asw)
		switch {
		case err == nil:
			logger.Info("attacherDetacher.AttachVolume started", "volumeName", v.VolumeName, "nodeName", v.NodeName, "scheduledPods", klog.KObjSlice(v.ScheduledPods))
		case !operations.IsBackoff(err):
			logger.Error(err, "attacherDetacher.AttachVolume failed to start", "volumeName", v.VolumeName, "nodeName", v.NodeName, "scheduledPods", klog.KObjSlice(v.ScheduledPods))
		}
	}
}

// reportMultiAttachError tells the pods waiting for v that it is attached
// exclusively elsewhere, naming the pods holding it where they share the
// waiting pod's namespace (and only counting the others).
func (rc *reconciler) reportMultiAttachError(logger klog.Logger, v cache.VolumeToAttach, nodes []types.NodeName) {
	var otherNodes []types.NodeName
	var otherNodeNames []string
	for _, n := range nodes {
		if n != v.NodeName {
			otherNodes = append(otherNodes, n)
			otherNodeNames = append(otherNodeNames, string(n))
		}
	}
	holders := rc.dsw.GetVolumePodsOnNodes(otherNodes, v.VolumeName)
	if len(holders) == 0 {
		msg := v.Message("Waiting for detach", "Volume is already exclusively attached to one node, waiting on detach before it can be attached to another node")
		for _, pod := range v.ScheduledPods {
			rc.recorder.Eventf(pod, v1.EventTypeWarning, operations.FailedAttachVolume, "%s", msg)
		}
		logger.Info("Waiting for detach: volume is already exclusively attached, waiting on detach before it can be attached to another node", "attachedTo", otherNodeNames, "volume", v.String())
		return
	}
	for _, pod := range v.ScheduledPods {
		var local []string
		others := 0
		for _, h := range holders {
			if h.Namespace == pod.Namespace {
				local = append(local, h.Name)
			} else {
				others++
			}
		}
		var detail string
		switch {
		case len(local) > 0 && others > 0:
			detail = fmt.Sprintf("Volume is already used by pod(s) %s and %d pod(s) in different namespaces", strings.Join(local, ", "), others)
		case len(local) > 0:
			detail = fmt.Sprintf("Volume is already used by pod(s) %s", strings.Join(local, ", "))
		default:
			detail = fmt.Sprintf("Volume is already used by %d pod(s) in different namespaces", others)
		}
		rc.recorder.Eventf(pod, v1.EventTypeWarning, operations.FailedAttachVolume, "%s", v.Message("Waiting for detach", detail))
	}
	logger.Info("Waiting for detach: volume is in use by pods", "pods", klog.KObjSlice(holders), "attachedTo", otherNodeNames, "volume", v.String())
}
