package persistentvolume

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume/metrics"
)

// syncClaim decides what a claim needs: binding (or provisioning) while
// its binding has not completed, checking the binding afterwards.
func (ctrl *Controller) syncClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Synchronizing PersistentVolumeClaim", "PVC", klog.KObj(claim), "claimStatus", claimStatusForLogging(claim))

	claim, err := ctrl.annealClaimMigration(ctx, claim)
	if err != nil {
		return err
	}
	if !metav1.HasAnnotation(claim.ObjectMeta, AnnBindCompleted) {
		return ctrl.syncUnboundClaim(ctx, claim)
	}
	return ctrl.syncBoundClaim(ctx, claim)
}

// syncUnboundClaim binds a Pending claim: to the volume it names, or else
// to the best matching one, or else it starts provisioning.
func (ctrl *Controller) syncUnboundClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" {
		return ctrl.syncUnboundClaimWithoutVolume(ctx, claim)
	}
	return ctrl.syncUnboundClaimWithVolume(ctx, claim)
}

// syncUnboundClaimWithoutVolume handles a claim that takes any volume.
func (ctrl *Controller) syncUnboundClaimWithoutVolume(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	delayBinding, err := storagehelpers.IsDelayBindingMode(claim, ctrl.classLister)
	if err != nil {
		return err
	}
	volume, err := ctrl.volumes.findBestMatchForClaim(claim, delayBinding)
	if err != nil {
		logger.V(2).Info("Synchronizing unbound PersistentVolumeClaim, Error finding PV for claim", "PVC", klog.KObj(claim), "err", err)
		return fmt.Errorf("error finding PV for claim %q: %w", claimKey(claim), err)
	}

	if volume != nil {
		key := claimKey(claim)
		logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume found", "PVC", klog.KObj(claim), "volumeName", volume.Name, "volumeStatus", volumeStatusForLogging(volume))
		if err := ctrl.bind(ctx, volume, claim); err != nil {
			// The next sync finishes the binding; count a failed provision.
			metrics.RecordMetric(key, ctrl.operationTimestamps, err)
			return err
		}
		// Bound: this ends a provision+bind timing, if one was running.
		metrics.RecordMetric(key, ctrl.operationTimestamps, nil)
		return nil
	}

	logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, no volume found", "PVC", klog.KObj(claim))
	updated, err := ctrl.assignDefaultStorageClass(ctx, claim)
	if err != nil {
		metrics.RecordRetroactiveStorageClassMetric(false)
		return fmt.Errorf("can't update PersistentVolumeClaim[%q]: %w", claimKey(claim), err)
	}
	if updated {
		// The update event brings the claim back with its class.
		logger.V(4).Info("PersistentVolumeClaim update successful, restarting claim sync", "PVC", klog.KObj(claim))
		metrics.RecordRetroactiveStorageClassMetric(true)
		return nil
	}

	switch {
	case delayBinding && !storagehelpers.IsDelayBindingProvisioning(claim):
		// The scheduler has not picked a node yet.
		if err := ctrl.emitEventForUnboundDelayBindingClaim(claim); err != nil {
			return err
		}
	case storagehelpers.GetPersistentVolumeClaimClass(claim) != "":
		// Provisioning runs asynchronously and updates the claim itself;
		// binding follows once the new volume shows up.
		return ctrl.provisionClaim(ctx, claim)
	default:
		ctrl.eventRecorder.Event(claim, v1.EventTypeNormal, EventFailedBinding, "no persistent volumes available for this claim and no storage class is set")
	}
	// Stay Pending; the next resync looks again.
	_, err = ctrl.updateClaimStatus(ctx, claim, v1.ClaimPending, nil)
	return err
}

// syncUnboundClaimWithVolume handles a claim that asks for a specific volume.
func (ctrl *Controller) syncUnboundClaimWithVolume(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume requested", "PVC", klog.KObj(claim), "volumeName", claim.Spec.VolumeName)
	obj, found, err := ctrl.volumes.store.GetByKey(claim.Spec.VolumeName)
	if err != nil {
		return err
	}
	if !found {
		// The volume may still be created; retry with the next resync.
		logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume requested and not found, will try again next time", "PVC", klog.KObj(claim), "volumeName", claim.Spec.VolumeName)
		_, err := ctrl.updateClaimStatus(ctx, claim, v1.ClaimPending, nil)
		return err
	}
	volume, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return fmt.Errorf("cannot convert object from volume cache to volume %q!?: %+v", claim.Spec.VolumeName, obj)
	}
	logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume requested and found", "PVC", klog.KObj(claim), "volumeName", claim.Spec.VolumeName, "volumeStatus", volumeStatusForLogging(volume))

	switch {
	case volume.Spec.ClaimRef == nil:
		// The requested volume is free: bind it if it fits.
		if err := checkVolumeSatisfyClaim(volume, claim); err != nil {
			logger.V(4).Info("Can't bind the claim to volume", "volumeName", volume.Name, "err", err)
			ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventVolumeMismatch,
				fmt.Sprintf("Cannot bind to requested volume %q: %s", volume.Name, err))
			_, err := ctrl.updateClaimStatus(ctx, claim, v1.ClaimPending, nil)
			return err
		}
		return ctrl.bind(ctx, volume, claim)

	case storagehelpers.IsVolumeBoundToClaim(volume, claim):
		// The volume already points here (pre-bound, or the first half of
		// our own binding): finish the binding.
		logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume already bound, finishing the binding", "PVC", klog.KObj(claim))
		return ctrl.bind(ctx, volume, claim)

	case !metav1.HasAnnotation(claim.ObjectMeta, AnnBoundByController):
		// The user asked for a volume someone else has; it may free up.
		logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume already bound to different claim by user, will retry later", "PVC", klog.KObj(claim))
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", volume.Name))
		_, err := ctrl.updateClaimStatus(ctx, claim, v1.ClaimPending, nil)
		return err

	default:
		// We bound the claim but the volume is someone else's: only
		// possible if somebody removed bind-completed from the claim.
		logger.V(4).Info("Synchronizing unbound PersistentVolumeClaim, volume already bound to different claim by controller, THIS SHOULD NEVER HAPPEN", "PVC", klog.KObj(claim), "boundClaim", klog.KRef(volume.Spec.ClaimRef.Namespace, volume.Spec.ClaimRef.Name))
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", volume.Name))
		return fmt.Errorf("invalid binding of claim %q to volume %q: volume already claimed by %q", claimKey(claim), claim.Spec.VolumeName, claimRefKey(volume.Spec.ClaimRef))
	}
}

// syncBoundClaim checks a claim whose binding completed once.
func (ctrl *Controller) syncBoundClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	if claim.Spec.VolumeName == "" {
		_, err := ctrl.updateClaimStatusWithEvent(ctx, claim, v1.ClaimLost, nil, v1.EventTypeWarning, EventClaimLost,
			"Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		return err
	}
	obj, found, err := ctrl.volumes.store.GetByKey(claim.Spec.VolumeName)
	if err != nil {
		return err
	}
	if !found {
		_, err := ctrl.updateClaimStatusWithEvent(ctx, claim, v1.ClaimLost, nil, v1.EventTypeWarning, EventClaimLost,
			"Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		return err
	}
	volume, ok := obj.(*v1.PersistentVolume)
	if !ok {
		return fmt.Errorf("cannot convert object from volume cache to volume %q!?: %#v", claim.Spec.VolumeName, obj)
	}
	logger.V(4).Info("Synchronizing bound PersistentVolumeClaim, volume found", "PVC", klog.KObj(claim), "volumeName", claim.Spec.VolumeName, "volumeStatus", volumeStatusForLogging(volume))

	switch {
	case volume.Spec.ClaimRef == nil:
		// Either the volume was unbound, or our own write to it has not
		// reached us yet; we cannot tell, so bind it again.
		logger.V(4).Info("Synchronizing bound PersistentVolumeClaim, volume is unbound, fixing", "PVC", klog.KObj(claim))
		return ctrl.bind(ctx, volume, claim)
	case volume.Spec.ClaimRef.UID == claim.UID:
		// All is well; bind() only fixes up status if needed.
		logger.V(4).Info("Synchronizing bound PersistentVolumeClaim, claim is already correctly bound", "PVC", klog.KObj(claim))
		return ctrl.bind(ctx, volume, claim)
	default:
		// The volume belongs to another claim; Lost is terminal.
		_, err := ctrl.updateClaimStatusWithEvent(ctx, claim, v1.ClaimLost, nil, v1.EventTypeWarning, EventClaimMisbound,
			"Two claims are bound to the same volume, this one is bound incorrectly")
		return err
	}
}

// checkVolumeSatisfyClaim checks a volume a claim asked for by name.
func checkVolumeSatisfyClaim(volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) error {
	if volume.DeletionTimestamp != nil {
		return fmt.Errorf("the volume is marked for deletion %q", volume.Name)
	}
	requested := claim.Spec.Resources.Requests[v1.ResourceStorage]
	capacity := volume.Spec.Capacity[v1.ResourceStorage]
	if capacity.Value() < requested.Value() {
		return fmt.Errorf("requested PV is too small")
	}
	if storagehelpers.GetPersistentVolumeClass(volume) != storagehelpers.GetPersistentVolumeClaimClass(claim) {
		return fmt.Errorf("storageClassName does not match")
	}
	if ptr.Deref(claim.Spec.VolumeAttributesClassName, "") != ptr.Deref(volume.Spec.VolumeAttributesClassName, "") {
		return fmt.Errorf("volumeAttributesClassName does not match")
	}
	if storagehelpers.CheckVolumeModeMismatches(&claim.Spec, &volume.Spec) {
		return fmt.Errorf("incompatible volumeMode")
	}
	if !hasAllAccessModes(volume.Spec.AccessModes, claim.Spec.AccessModes) {
		return fmt.Errorf("incompatible accessMode")
	}
	return nil
}

// emitEventForUnboundDelayBindingClaim tells the user why a
// WaitForFirstConsumer claim is still Pending.
func (ctrl *Controller) emitEventForUnboundDelayBindingClaim(claim *v1.PersistentVolumeClaim) error {
	reason := EventWaitForFirstConsumer
	message := "waiting for first consumer to be created before binding"
	pods, err := ctrl.findNonScheduledPodsByPVC(claim)
	if err != nil {
		return err
	}
	switch {
	case len(pods) == 1:
		reason = EventWaitForPodScheduled
		message = fmt.Sprintf("waiting for pod %s to be scheduled", pods[0])
	case len(pods) > 1:
		// Any of them may be the one the scheduler considers.
		reason = EventWaitForPodScheduled
		message = fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(pods, ","))
	}
	ctrl.eventRecorder.Event(claim, v1.EventTypeNormal, reason, message)
	return nil
}

// podsUsingClaim returns the pods of the informer naming the claim key.
func (ctrl *Controller) podsUsingClaim(namespace, name string) ([]*v1.Pod, error) {
	return ephemeral.PodsForPVC(ctrl.podIndexer, namespace, name)
}

// findNonScheduledPodsByPVC names the live pods using the claim that have
// no node yet.
func (ctrl *Controller) findNonScheduledPodsByPVC(claim *v1.PersistentVolumeClaim) ([]string, error) {
	pods, err := ctrl.podsUsingClaim(claim.Namespace, claim.Name)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, pod := range pods {
		if isPodTerminated(pod) || pod.Spec.NodeName != "" {
			continue
		}
		names = append(names, pod.Name)
	}
	sort.Strings(names)
	return names, nil
}

// isPodTerminated: the pod finished, or is being deleted with no container
// running anymore.
func isPodTerminated(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		return true
	}
	return pod.DeletionTimestamp != nil &&
		noneRunning(pod.Status.InitContainerStatuses) &&
		noneRunning(pod.Status.ContainerStatuses) &&
		noneRunning(pod.Status.EphemeralContainerStatuses)
}

func noneRunning(statuses []v1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

// assignDefaultStorageClass gives a claim without any class the current
// default class (also after the claim's creation). It reports whether it
// updated the claim.
func (ctrl *Controller) assignDefaultStorageClass(ctx context.Context, claim *v1.PersistentVolumeClaim) (bool, error) {
	logger := klog.FromContext(ctx)
	if storagehelpers.PersistentVolumeClaimHasClass(claim) {
		return false, nil
	}
	class, err := ctrl.defaultStorageClass()
	if err != nil {
		return false, err
	}
	if class == nil {
		logger.V(4).Info("Can not assign storage class to PersistentVolumeClaim: default storage class not found", "PVC", klog.KObj(claim))
		return false, nil
	}
	logger.V(4).Info("Assigning StorageClass to PersistentVolumeClaim", "PVC", klog.KObj(claim), "storageClassName", class.Name)
	clone := claim.DeepCopy()
	clone.Spec.StorageClassName = ptr.To(class.Name)
	if _, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		return false, err
	}
	logger.V(4).Info("Successfully assigned StorageClass to PersistentVolumeClaim", "PVC", klog.KObj(claim), "storageClassName", class.Name)
	return true, nil
}

func claimStatusForLogging(claim *v1.PersistentVolumeClaim) string {
	return fmt.Sprintf("phase: %s, bound to: %q, bindCompleted: %v, boundByController: %v", claim.Status.Phase, claim.Spec.VolumeName,
		metav1.HasAnnotation(claim.ObjectMeta, AnnBindCompleted), metav1.HasAnnotation(claim.ObjectMeta, AnnBoundByController))
}

func volumeStatusForLogging(volume *v1.PersistentVolume) string {
	claim := ""
	if ref := volume.Spec.ClaimRef; ref != nil {
		claim = fmt.Sprintf("%s/%s (uid: %s)", ref.Namespace, ref.Name, ref.UID)
	}
	return fmt.Sprintf("phase: %s, bound to: %q, boundByController: %v", volume.Status.Phase, claim, metav1.HasAnnotation(volume.ObjectMeta, AnnBoundByController))
}
