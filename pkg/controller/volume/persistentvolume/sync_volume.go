package persistentvolume

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// syncVolume decides what a volume needs: Available while free or only
// reserved, Bound while its claim points back, Released (and reclaimed)
// once the claim is gone, unbound again if its claim went elsewhere.
func (ctrl *Controller) syncVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Synchronizing PersistentVolume", "volumeName", volume.Name, "volumeStatus", volumeStatusForLogging(volume))

	volume, err := ctrl.annealVolumeMigration(ctx, volume)
	if err != nil {
		return err
	}

	if volume.Spec.ClaimRef == nil {
		logger.V(4).Info("Synchronizing PersistentVolume, volume is unused", "volumeName", volume.Name)
		_, err := ctrl.updateVolumePhase(ctx, volume, v1.VolumeAvailable, "")
		return err
	}
	ref := volume.Spec.ClaimRef
	if ref.UID == "" {
		// Reserved for a claim that has not bound yet; the claim's sync
		// completes it.
		logger.V(4).Info("Synchronizing PersistentVolume, volume is pre-bound to claim", "PVC", klog.KRef(ref.Namespace, ref.Name), "volumeName", volume.Name)
		_, err := ctrl.updateVolumePhase(ctx, volume, v1.VolumeAvailable, "")
		return err
	}
	logger.V(4).Info("Synchronizing PersistentVolume, volume is bound to claim", "PVC", klog.KRef(ref.Namespace, ref.Name), "volumeName", volume.Name)

	claim, err := ctrl.claimForVolume(ctx, volume)
	if err != nil {
		return err
	}

	switch {
	case claim == nil:
		return ctrl.releaseVolume(ctx, volume)

	case claim.Spec.VolumeName == "":
		if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
			// The claim's sync never picks this volume, so say why here.
			ctrl.eventRecorder.Event(volume, v1.EventTypeWarning, EventVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name))
			ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", volume.Name))
			return nil
		}
		// Half bound (by us, a provisioner or the scheduler): the claim's
		// sync finishes it. Queue the claim now rather than waiting for the
		// resync; this is what makes provisioned volumes bind quickly.
		if metav1.HasAnnotation(volume.ObjectMeta, AnnBoundByController) {
			logger.V(4).Info("Synchronizing PersistentVolume, volume not bound yet, waiting for syncClaim to fix it", "volumeName", volume.Name)
		} else {
			logger.V(4).Info("Synchronizing PersistentVolume, volume was bound and got unbound (by user?), waiting for syncClaim to fix it", "volumeName", volume.Name)
		}
		ctrl.claimQueue.Add(claimKey(claim))
		return nil

	case claim.Spec.VolumeName == volume.Name:
		logger.V(4).Info("Synchronizing PersistentVolume, all is bound", "volumeName", volume.Name)
		_, err := ctrl.updateVolumePhase(ctx, volume, v1.VolumeBound, "")
		return err

	case metav1.HasAnnotation(volume.ObjectMeta, AnnDynamicallyProvisioned) && volume.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete:
		// Provisioned for this claim, but the claim got another volume:
		// this one is not needed. Released tells external deleters (and
		// users); a Failed phase is kept visible.
		if volume.Status.Phase != v1.VolumeReleased && volume.Status.Phase != v1.VolumeFailed {
			logger.V(2).Info("Dynamically provisioned volume is released and it will be deleted", "volumeName", volume.Name)
			if volume, err = ctrl.updateVolumePhase(ctx, volume, v1.VolumeReleased, ""); err != nil {
				return err
			}
		}
		return ctrl.reclaimVolume(ctx, volume)

	default:
		// The claim went to another volume. If we made this binding,
		// undo it; if the user pre-bound the volume, keep the reservation
		// and only drop the claim UID.
		if metav1.HasAnnotation(volume.ObjectMeta, AnnBoundByController) {
			logger.V(4).Info("Synchronizing PersistentVolume, volume is bound by controller to a claim that is bound to another volume, unbinding", "volumeName", volume.Name)
		} else {
			logger.V(4).Info("Synchronizing PersistentVolume, volume is bound by user to a claim that is bound to another volume, waiting for the claim to get unbound", "volumeName", volume.Name)
		}
		return ctrl.unbindVolume(ctx, volume)
	}
}

// claimForVolume returns the claim instance the volume is bound to, or nil
// when it no longer exists (including a new claim of the same name).
func (ctrl *Controller) claimForVolume(ctx context.Context, volume *v1.PersistentVolume) (*v1.PersistentVolumeClaim, error) {
	logger := klog.FromContext(ctx)
	ref := volume.Spec.ClaimRef
	var claim *v1.PersistentVolumeClaim

	obj, found, err := ctrl.claims.GetByKey(claimRefKey(ref))
	if err != nil {
		return nil, err
	}
	if found {
		c, ok := obj.(*v1.PersistentVolumeClaim)
		if !ok {
			return nil, fmt.Errorf("cannot convert object from claim cache to claim %q!?: %#v", claimRefKey(ref), obj)
		}
		claim = c
	} else if volume.Status.Phase != v1.VolumeReleased && volume.Status.Phase != v1.VolumeFailed {
		// A volume created by an external provisioner or bound by the
		// scheduler can arrive before its claim does. Before releasing a
		// volume (only not yet released ones), make sure the claim is
		// really gone: the informer first, then the API server.
		c, err := ctrl.claimLister.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err != nil {
			c, err = ctrl.kubeClient.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if err != nil {
				c = nil
			}
		}
		claim = c
	}
	if claim == nil {
		logger.V(4).Info("Synchronizing PersistentVolume, claim not found", "PVC", klog.KRef(ref.Namespace, ref.Name), "volumeName", volume.Name)
		return nil, nil
	}
	logger.V(4).Info("Synchronizing PersistentVolume, claim found", "PVC", klog.KRef(ref.Namespace, ref.Name), "claimStatus", claimStatusForLogging(claim), "volumeName", volume.Name)

	if claim.UID != ref.UID {
		// Our copy of the claim may predate the one the volume points to:
		// ask the API server before concluding the claim was replaced.
		logger.V(4).Info("Maybe cached claim is not the newest one, we should fetch it from apiserver", "PVC", klog.KRef(ref.Namespace, ref.Name))
		fresh, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return nil, err
		case err != nil || fresh.UID != ref.UID:
			logger.V(4).Info("Synchronizing PersistentVolume, claim has a newer UID than pv.ClaimRef, the old one must have been deleted", "PVC", klog.KRef(ref.Namespace, ref.Name), "volumeName", volume.Name)
			return nil, nil
		default:
			logger.V(4).Info("Synchronizing PersistentVolume, claim has a same UID with pv.ClaimRef", "PVC", klog.KRef(ref.Namespace, ref.Name), "volumeName", volume.Name)
			return fresh, nil
		}
	}
	return claim, nil
}

// releaseVolume handles a volume whose claim is gone: mark it Released
// (once; Failed stays visible) and apply its reclaim policy.
func (ctrl *Controller) releaseVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	if volume.Status.Phase != v1.VolumeReleased && volume.Status.Phase != v1.VolumeFailed {
		logger.V(2).Info("Volume is released and reclaim policy will be executed", "volumeName", volume.Name, "reclaimPolicy", volume.Spec.PersistentVolumeReclaimPolicy)
		var err error
		if volume, err = ctrl.updateVolumePhase(ctx, volume, v1.VolumeReleased, ""); err != nil {
			return err
		}
	}
	if err := ctrl.reclaimVolume(ctx, volume); err != nil {
		return err
	}
	if volume.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimRetain {
		ref := volume.Spec.ClaimRef
		logger.V(4).Info("PersistentVolume references a claim that is not found", "PVC", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID, "volumeName", volume.Name)
	}
	return nil
}
