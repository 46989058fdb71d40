package expand

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// expand does the controller's share of a FlexVolume expansion (upstream's
// noop expandable plugin under the driver's name, with the
// RecoverVolumeExpansionFailure behaviour, GA and locked on since 1.34).
func (expc *Controller) expand(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, resizerName string) error {
	logger := klog.FromContext(ctx)
	// Node expansion finished: the pre-resize annotation is no longer needed.
	if isNodeExpandComplete(logger, pvc, pv) && metav1.HasAnnotation(pv.ObjectMeta, AnnPreResizeCapacity) {
		return deleteAnnPreResizeCapacity(ctx, pv, expc.kubeClient)
	}

	logger.V(5).Info("Starting ExpandVolume for volume", "volumeName", qualifiedName(pvc))
	err := expc.expandAndRecover(ctx, pvc, pv, resizerName)
	if err != nil {
		expc.recorder.Eventf(pvc, v1.EventTypeWarning, VolumeResizeFailed, "%s", err.Error())
	}
	return err
}

// expandAndRecover picks the size to expand to (the request, or the last
// allocated size while a resize is in flight or after the user shrank the
// request), records it on the PVC, raises the PV's capacity and marks the
// PVC for node expansion (or finished, for block volumes).
func (expc *Controller) expandAndRecover(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, resizerName string) error {
	client := expc.kubeClient
	pvcSpecSize := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	pvSize := pv.Spec.Capacity[v1.ResourceStorage]

	newSize := pvcSpecSize
	resizeStatus := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	var allocatedSize *resource.Quantity
	if t, ok := pvc.Status.AllocatedResources[v1.ResourceStorage]; ok {
		allocatedSize = &t
	}

	if pvSize.Cmp(pvcSpecSize) < 0 {
		// The PV still needs expanding.
		switch resizeStatus {
		case v1.PersistentVolumeClaimControllerResizeInProgress,
			v1.PersistentVolumeClaimNodeResizePending,
			v1.PersistentVolumeClaimNodeResizeInProgress,
			v1.PersistentVolumeClaimNodeResizeInfeasible:
			if allocatedSize != nil {
				newSize = *allocatedSize
			}
		}
	} else {
		// The PV has been expanded already.
		switch resizeStatus {
		case v1.PersistentVolumeClaimNodeResizeInProgress,
			v1.PersistentVolumeClaimNodeResizePending:
			// Spurious update: the kubelet has it.
			return nil
		case v1.PersistentVolumeClaimNodeResizeInfeasible:
			// Let the kubelet retry.
			_, err := expc.markForPendingNodeExpansion(ctx, pvc, pv)
			return err
		case v1.PersistentVolumeClaimControllerResizeInProgress,
			v1.PersistentVolumeClaimControllerResizeInfeasible:
			// Finish recording earlier work, or the user shrank the request.
			if allocatedSize != nil {
				newSize = *allocatedSize
			}
		default:
			if resizeStatus == "" && allocatedSize != nil {
				newSize = *allocatedSize
			}
		}
	}

	pvc, err := markControllerResizeInProgress(ctx, pvc, resizerName, newSize, client)
	if err != nil {
		return fmt.Errorf("error updating pvc %s with resize in progress: %v", qualifiedName(pvc), err)
	}

	// The plugin is a no-op: the volume "is" newSize now.
	updatedSize := newSize
	pv, err = updatePVSize(ctx, pv, updatedSize, client)
	if err != nil {
		// The PVC stays ControllerResizeInProgress, so a retry resumes at
		// the allocated size.
		return fmt.Errorf("error updating pv for pvc %s: %v", qualifiedName(pvc), err)
	}

	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		pvc, err = markResizeFinished(ctx, pvc, updatedSize, client)
		if err != nil {
			return fmt.Errorf("error marking pvc %s as resized: %v", qualifiedName(pvc), err)
		}
		expc.recorder.Eventf(pvc, v1.EventTypeNormal, VolumeResizeSuccess, "%s", fmt.Sprintf("ExpandVolume succeeded for volume %s", qualifiedName(pvc)))
		return nil
	}
	pvc, err = expc.markForPendingNodeExpansion(ctx, pvc, pv)
	if err != nil {
		return fmt.Errorf("error marking pvc %s for node expansion: %v", qualifiedName(pvc), err)
	}
	return nil
}

// markForPendingNodeExpansion marks the PVC NodeResizePending and stores its
// current capacity on the PV, so that the size survives the PVC being
// deleted and rebound while the node expansion is pending.
func (expc *Controller) markForPendingNodeExpansion(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) (*v1.PersistentVolumeClaim, error) {
	pvc, err := markForFSResize(ctx, pvc, expc.kubeClient)
	if err != nil {
		return pvc, fmt.Errorf("error marking pvc %s for node expansion: %v", qualifiedName(pvc), err)
	}
	oldCapacity := pvc.Status.Capacity[v1.ResourceStorage]
	if err := addAnnPreResizeCapacity(ctx, pv, oldCapacity, expc.kubeClient); err != nil {
		detailedErr := fmt.Errorf("error updating pv %s annotation (%s) with pre-resize capacity %s: %v", pv.Name, AnnPreResizeCapacity, oldCapacity.String(), err)
		klog.FromContext(ctx).Info("Warning: failed to record pre-resize capacity", "err", detailedErr)
		return pvc, detailedErr
	}
	return pvc, nil
}
