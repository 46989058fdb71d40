package persistentvolume

import (
	"context"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// bind writes a binding in upstream's order: the volume's claimRef, the
// volume's phase, the claim's volumeName, the claim's phase. Each step
// writes only if something is missing; on an error the next sync of either
// object resumes from what was saved.
func (ctrl *Controller) bind(ctx context.Context, volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Binding volume to claim", "PVC", klog.KObj(claim), "volumeName", volume.Name)

	newVolume, err := ctrl.bindVolumeToClaim(ctx, volume, claim)
	if err != nil {
		logger.V(3).Info("Error binding volume to claim: failed saving the volume", "PVC", klog.KObj(claim), "volumeName", volume.Name, "err", err)
		return err
	}
	volume = newVolume
	if volume, err = ctrl.updateVolumePhase(ctx, volume, v1.VolumeBound, ""); err != nil {
		logger.V(3).Info("Error binding volume to claim: failed saving the volume status", "PVC", klog.KObj(claim), "volumeName", newVolume.Name, "err", err)
		return err
	}
	newClaim, err := ctrl.bindClaimToVolume(ctx, claim, volume)
	if err != nil {
		logger.V(3).Info("Error binding volume to claim: failed saving the claim", "PVC", klog.KObj(claim), "volumeName", volume.Name, "err", err)
		return err
	}
	claim = newClaim
	if claim, err = ctrl.updateClaimStatus(ctx, claim, v1.ClaimBound, volume); err != nil {
		logger.V(3).Info("Error binding volume to claim: failed saving the claim status", "PVC", klog.KObj(newClaim), "volumeName", volume.Name, "err", err)
		return err
	}
	logger.V(4).Info("Volume bound to claim", "PVC", klog.KObj(claim), "volumeName", volume.Name,
		"volumeStatus", volumeStatusForLogging(volume), "claimStatus", claimStatusForLogging(claim))
	return nil
}

// boundVolume returns a copy of the volume bound to the claim and whether
// that differs from the volume. A volume not already pointing to the claim
// is marked bound-by-controller.
func boundVolume(volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, bool, error) {
	markBoundByController := !storagehelpers.IsVolumeBoundToClaim(volume, claim)
	clone := volume.DeepCopy()
	changed := false
	ref := volume.Spec.ClaimRef
	if ref == nil || ref.Name != claim.Name || ref.Namespace != claim.Namespace || ref.UID != claim.UID {
		newRef, err := reference.GetReference(scheme.Scheme, claim)
		if err != nil {
			return nil, false, fmt.Errorf("unexpected error getting claim reference: %w", err)
		}
		clone.Spec.ClaimRef = newRef
		changed = true
	}
	if markBoundByController && !metav1.HasAnnotation(clone.ObjectMeta, AnnBoundByController) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnBoundByController, "yes")
		changed = true
	}
	return clone, changed, nil
}

// bindVolumeToClaim saves the volume's half of the binding if needed.
func (ctrl *Controller) bindVolumeToClaim(ctx context.Context, volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating PersistentVolume: binding to claim", "PVC", klog.KObj(claim), "volumeName", volume.Name)
	clone, changed, err := boundVolume(volume, claim)
	if err != nil {
		return nil, err
	}
	if !changed {
		logger.V(4).Info("Updating PersistentVolume: already bound to claim", "PVC", klog.KObj(claim), "volumeName", volume.Name)
		return volume, nil
	}
	logger.V(2).Info("Claim bound to volume", "PVC", klog.KObj(claim), "volumeName", volume.Name)
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.V(4).Info("Updating PersistentVolume: binding to claim failed", "PVC", klog.KObj(claim), "volumeName", volume.Name, "err", err)
		return nil, err
	}
	if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
		logger.V(4).Info("Updating PersistentVolume: cannot update internal cache", "volumeName", volume.Name, "err", err)
		return nil, err
	}
	logger.V(4).Info("Updating PersistentVolume: bound to claim", "PVC", klog.KObj(claim), "volumeName", saved.Name)
	return saved, nil
}

// bindClaimToVolume saves the claim's half of the binding if needed: the
// volume name (marked bound-by-controller when we chose it) and
// bind-completed.
func (ctrl *Controller) bindClaimToVolume(ctx context.Context, claim *v1.PersistentVolumeClaim, volume *v1.PersistentVolume) (*v1.PersistentVolumeClaim, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating PersistentVolumeClaim: binding to volume", "PVC", klog.KObj(claim), "volumeName", volume.Name)
	clone := claim.DeepCopy()
	changed := false
	if claim.Spec.VolumeName != volume.Name {
		clone.Spec.VolumeName = volume.Name
		if !metav1.HasAnnotation(clone.ObjectMeta, AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnBoundByController, "yes")
		}
		changed = true
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnBindCompleted, "yes")
		changed = true
	}
	if !changed {
		logger.V(4).Info("Updating PersistentVolumeClaim: already bound to volume", "PVC", klog.KObj(claim), "volumeName", volume.Name)
		return claim, nil
	}
	logger.V(2).Info("Volume bound to claim", "PVC", klog.KObj(claim), "volumeName", volume.Name)
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.V(4).Info("Updating PersistentVolumeClaim: binding to volume failed", "PVC", klog.KObj(claim), "volumeName", volume.Name, "err", err)
		return nil, err
	}
	if _, err := ctrl.storeClaimUpdate(logger, saved); err != nil {
		logger.V(4).Info("Updating PersistentVolumeClaim: cannot update internal cache", "PVC", klog.KObj(claim), "err", err)
		return nil, err
	}
	logger.V(4).Info("Updating PersistentVolumeClaim: bound to volume", "PVC", klog.KObj(claim), "volumeName", volume.Name)
	return saved, nil
}

// unbindVolume undoes the volume's half of a binding: all of it when the
// controller made it, only the claim UID when the user pre-bound the
// volume (the reservation stays). The volume becomes Available.
func (ctrl *Controller) unbindVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating PersistentVolume: rolling back binding from claim", "PVC", klog.KRef(volume.Spec.ClaimRef.Namespace, volume.Spec.ClaimRef.Name), "volumeName", volume.Name)
	clone := volume.DeepCopy()
	if metav1.HasAnnotation(volume.ObjectMeta, AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.V(4).Info("Updating PersistentVolume: rollback failed", "volumeName", volume.Name, "err", err)
		return err
	}
	if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
		logger.V(4).Info("Updating PersistentVolume: cannot update internal cache", "volumeName", volume.Name, "err", err)
		return err
	}
	logger.V(4).Info("Updating PersistentVolume: rolled back", "volumeName", saved.Name)
	_, err = ctrl.updateVolumePhase(ctx, saved, v1.VolumeAvailable, "")
	return err
}

// updateClaimStatus saves the claim's phase and, from the volume (nil to
// clear them), its access modes, capacity and current
// VolumeAttributesClass. Capacity is copied only when the claim becomes
// Bound, as a later difference may be intended (file system smaller than
// the block device); after an offline expansion it is the PV's recorded
// pre-resize capacity. The VolumeAttributesClass is copied only on the
// Pending -> Bound transition; afterwards the external resizer owns it.
func (ctrl *Controller) updateClaimStatus(ctx context.Context, claim *v1.PersistentVolumeClaim, phase v1.PersistentVolumeClaimPhase, volume *v1.PersistentVolume) (*v1.PersistentVolumeClaim, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating PersistentVolumeClaim status", "PVC", klog.KObj(claim), "setPhase", phase)

	clone := claim.DeepCopy()
	changed := false
	if claim.Status.Phase != phase {
		clone.Status.Phase = phase
		changed = true
	}
	if volume == nil {
		if claim.Status.AccessModes != nil {
			clone.Status.AccessModes = nil
			changed = true
		}
		if claim.Status.Capacity != nil {
			clone.Status.Capacity = nil
			changed = true
		}
		if claim.Status.CurrentVolumeAttributesClassName != nil {
			clone.Status.CurrentVolumeAttributesClassName = nil
			changed = true
		}
	} else {
		if !reflect.DeepEqual(claim.Status.AccessModes, volume.Spec.AccessModes) {
			clone.Status.AccessModes = volume.Spec.AccessModes
			changed = true
		}
		if claim.Status.Phase != phase {
			volumeCap, ok := volume.Spec.Capacity[v1.ResourceStorage]
			if !ok {
				return nil, fmt.Errorf("PersistentVolume %q is without a storage capacity", volume.Name)
			}
			claimCap, hasClaimCap := claim.Status.Capacity[v1.ResourceStorage]
			if preResize, ok := volume.Annotations[annPreResizeCapacity]; ok {
				logger.V(2).Info("Volume requires filesystem resize: setting pvc status capacity", "PVC", klog.KObj(claim), "volumeName", volume.Name, "statusCapacity", preResize)
				qty, err := resource.ParseQuantity(preResize)
				if err != nil {
					logger.Info("Parsing pre-resize-capacity from PV failed", "volumeName", volume.Name, "err", err)
					qty = volumeCap
				}
				if clone.Status.Capacity == nil {
					clone.Status.Capacity = v1.ResourceList{}
				}
				clone.Status.Capacity[v1.ResourceStorage] = qty
				changed = true
			} else if !hasClaimCap || volumeCap.Cmp(claimCap) != 0 {
				clone.Status.Capacity = volume.Spec.Capacity
				changed = true
			}
		}
		if claim.Status.Phase == v1.ClaimPending && phase == v1.ClaimBound &&
			!reflect.DeepEqual(claim.Status.CurrentVolumeAttributesClassName, volume.Spec.VolumeAttributesClassName) {
			clone.Status.CurrentVolumeAttributesClassName = volume.Spec.VolumeAttributesClassName
			changed = true
		}
	}
	if !changed {
		logger.V(4).Info("Updating PersistentVolumeClaim status, phase already set", "PVC", klog.KObj(claim), "phase", phase)
		return claim, nil
	}

	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(clone.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.V(4).Info("Updating PersistentVolumeClaim status, set phase failed", "PVC", klog.KObj(claim), "phase", phase, "err", err)
		return nil, err
	}
	if _, err := ctrl.storeClaimUpdate(logger, saved); err != nil {
		logger.V(4).Info("Updating PersistentVolumeClaim status: cannot update internal cache", "PVC", klog.KObj(claim), "err", err)
		return nil, err
	}
	logger.V(2).Info("Claim entered phase", "PVC", klog.KObj(claim), "phase", phase)
	return saved, nil
}

// updateClaimStatusWithEvent sets the phase and emits the event, both only
// when the phase actually changes (not on every resync).
func (ctrl *Controller) updateClaimStatusWithEvent(ctx context.Context, claim *v1.PersistentVolumeClaim, phase v1.PersistentVolumeClaimPhase, volume *v1.PersistentVolume, eventtype, reason, message string) (*v1.PersistentVolumeClaim, error) {
	logger := klog.FromContext(ctx)
	if claim.Status.Phase == phase {
		logger.V(4).Info("Updating updateClaimStatusWithEvent, phase already set", "PVC", klog.KObj(claim), "phase", phase)
		return claim, nil
	}
	saved, err := ctrl.updateClaimStatus(ctx, claim, phase, volume)
	if err != nil {
		return nil, err
	}
	logger.V(3).Info("Claim changed status", "PVC", klog.KObj(claim), "phase", phase, "message", message)
	ctrl.eventRecorder.Event(saved, eventtype, reason, message)
	return saved, nil
}

// updateVolumePhase saves the volume's phase and message if the phase
// changes. (The apiserver stamps lastPhaseTransitionTime.)
func (ctrl *Controller) updateVolumePhase(ctx context.Context, volume *v1.PersistentVolume, phase v1.PersistentVolumePhase, message string) (*v1.PersistentVolume, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Updating PersistentVolume", "volumeName", volume.Name, "setPhase", phase)
	if volume.Status.Phase == phase {
		logger.V(4).Info("Updating PersistentVolume: phase already set", "volumeName", volume.Name, "phase", phase)
		return volume, nil
	}
	clone := volume.DeepCopy()
	clone.Status.Phase = phase
	clone.Status.Message = message
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		logger.V(4).Info("Updating PersistentVolume: set phase failed", "volumeName", volume.Name, "phase", phase, "err", err)
		return nil, err
	}
	if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
		logger.V(4).Info("Updating PersistentVolume: cannot update internal cache", "volumeName", volume.Name, "err", err)
		return nil, err
	}
	logger.V(2).Info("Volume entered phase", "volumeName", volume.Name, "phase", phase)
	return saved, nil
}

// updateVolumePhaseWithEvent sets the phase and emits the event, both only
// when the phase actually changes.
func (ctrl *Controller) updateVolumePhaseWithEvent(ctx context.Context, volume *v1.PersistentVolume, phase v1.PersistentVolumePhase, eventtype, reason, message string) (*v1.PersistentVolume, error) {
	logger := klog.FromContext(ctx)
	if volume.Status.Phase == phase {
		logger.V(4).Info("Updating updateVolumePhaseWithEvent: phase already set", "volumeName", volume.Name, "phase", phase)
		return volume, nil
	}
	saved, err := ctrl.updateVolumePhase(ctx, volume, phase, message)
	if err != nil {
		return nil, err
	}
	logger.V(3).Info("Volume changed status", "volumeName", volume.Name, "changedPhase", phase, "message", message)
	ctrl.eventRecorder.Event(saved, eventtype, reason, message)
	return saved, nil
}
