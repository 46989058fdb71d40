package persistentvolume

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume/metrics"
)

// reclaimVolume applies the reclaim policy of a released volume. Recycle
// and Delete run as asynchronous operations.
func (ctrl *Controller) reclaimVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	if volume.Annotations[AnnMigratedTo] != "" {
		// A migrated volume belongs to the CSI driver's external
		// provisioner, which reclaims it.
		return nil
	}
	switch volume.Spec.PersistentVolumeReclaimPolicy {
	case v1.PersistentVolumeReclaimRetain:
		logger.V(4).Info("ReclaimVolume: policy is Retain, nothing to do", "volumeName", volume.Name)

	case v1.PersistentVolumeReclaimRecycle:
		logger.V(4).Info("ReclaimVolume: policy is Recycle", "volumeName", volume.Name)
		name := fmt.Sprintf("recycle-%s[%s]", volume.Name, volume.UID)
		ctrl.scheduleOperation(logger, name, func() error {
			ctrl.recycleVolumeOperation(ctx, volume)
			return nil
		})

	case v1.PersistentVolumeReclaimDelete:
		logger.V(4).Info("ReclaimVolume: policy is Delete", "volumeName", volume.Name)
		name := fmt.Sprintf("delete-%s[%s]", volume.Name, volume.UID)
		// Timed until the PV object disappears (see deleteVolume).
		ctrl.operationTimestamps.AddIfNotExist(volume.Name, ctrl.provisionerNameForVolume(volume), "delete")
		ctrl.scheduleOperation(logger, name, func() error {
			_, err := ctrl.deleteVolumeOperation(ctx, volume)
			if err != nil {
				metrics.RecordMetric(volume.Name, ctrl.operationTimestamps, err)
			}
			return err
		})

	default:
		if _, err := ctrl.updateVolumePhaseWithEvent(ctx, volume, v1.VolumeFailed, v1.EventTypeWarning,
			EventVolumeUnknownReclaimPolicy, "Volume has unrecognized PersistentVolumeReclaimPolicy"); err != nil {
			return err
		}
	}
	return nil
}

// recycleVolumeOperation scrubs a released volume with its plugin's
// recycler pod and makes it Available again.
func (ctrl *Controller) recycleVolumeOperation(ctx context.Context, volume *v1.PersistentVolume) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("RecycleVolumeOperation started", "volumeName", volume.Name)

	// A previous operation may have changed the volume while this one
	// waited: work on the current version.
	current, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		logger.V(3).Info("Error reading persistent volume", "volumeName", volume.Name, "err", err)
		return
	}
	released, err := ctrl.isVolumeReleased(logger, current)
	if err != nil {
		logger.V(3).Info("Error reading claim for volume", "volumeName", volume.Name, "err", err)
		return
	}
	if !released {
		logger.V(3).Info("Volume no longer needs recycling, skipping", "volumeName", volume.Name)
		return
	}
	pods, used, err := ctrl.isVolumeUsed(current)
	if err != nil {
		logger.V(3).Info("Can't recycle volume", "volumeName", volume.Name, "err", err)
		return
	}
	// A claim of the same name in the cache is a new claim (the volume is
	// released), so pods using that name use another volume.
	_, claimCached, err := ctrl.claims.GetByKey(claimRefKey(volume.Spec.ClaimRef))
	if err != nil {
		logger.V(3).Info("Error getting the claim from cache", "PVC", klog.KRef(volume.Spec.ClaimRef.Namespace, volume.Spec.ClaimRef.Name))
		return
	}
	if used && !claimCached {
		msg := fmt.Sprintf("Volume is used by pods: %s", strings.Join(pods, ","))
		logger.V(3).Info("Can't recycle volume", "volumeName", volume.Name, "msg", msg)
		ctrl.eventRecorder.Event(volume, v1.EventTypeNormal, EventVolumeFailedRecycle, msg)
		return
	}
	volume = current

	plugin, err := ctrl.plugins.findRecyclableBySpec(volume)
	if err != nil {
		// Failed, yet retried on every sync of the volume.
		if _, err := ctrl.updateVolumePhaseWithEvent(ctx, volume, v1.VolumeFailed, v1.EventTypeWarning, EventVolumeFailedRecycle, "No recycler plugin found for the volume!"); err != nil {
			logger.V(4).Info("RecycleVolumeOperation: failed to mark volume as failed", "volumeName", volume.Name, "err", err)
		}
		return
	}
	record := func(eventtype, message string) {
		ctrl.eventRecorder.Eventf(volume, eventtype, EventRecyclerPod, "Recycler pod: %s", message)
	}
	if err := plugin.recycle(ctx, volume.Name, volume, record); err != nil {
		msg := fmt.Sprintf("Recycle failed: %s", err)
		if _, err := ctrl.updateVolumePhaseWithEvent(ctx, volume, v1.VolumeFailed, v1.EventTypeWarning, EventVolumeFailedRecycle, msg); err != nil {
			logger.V(4).Info("RecycleVolumeOperation: failed to mark volume as failed", "volumeName", volume.Name, "err", err)
		}
		return
	}

	logger.V(2).Info("Volume recycled", "volumeName", volume.Name)
	ctrl.eventRecorder.Event(volume, v1.EventTypeNormal, EventVolumeRecycled, "Volume recycled")
	if err := ctrl.unbindVolume(ctx, volume); err != nil {
		// The volume gets recycled once more on its next sync.
		logger.V(3).Info("RecycleVolumeOperation: failed to make recycled volume 'Available', we will recycle the volume again", "volumeName", volume.Name, "err", err)
	}
}

// deleteVolumeOperation deletes the storage asset of a released volume
// through its in-tree plugin, then the PV object. Volumes of external
// provisioners (and CSI volumes) are left to their external deleter. It
// returns the plugin name, for metrics.
func (ctrl *Controller) deleteVolumeOperation(ctx context.Context, volume *v1.PersistentVolume) (string, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("DeleteVolumeOperation started", "volumeName", volume.Name)

	plugin, err := ctrl.findDeletablePlugin(volume)
	if err != nil {
		if _, err := ctrl.updateVolumePhaseWithEvent(ctx, volume, v1.VolumeFailed, v1.EventTypeWarning, EventVolumeFailedDelete, err.Error()); err != nil {
			logger.V(4).Info("DeleteVolumeOperation: failed to mark volume as failed", "volumeName", volume.Name, "err", err)
			return "", err
		}
	}
	if plugin == nil {
		logger.V(3).Info("External deleter for volume requested, ignoring", "volumeName", volume.Name)
		return "", nil
	}
	pluginName := plugin.name()
	logger.V(5).Info("Found a deleter plugin for volume", "pluginName", pluginName, "volumeName", volume.Name)

	current, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		logger.V(3).Info("Error reading persistent volume", "volumeName", volume.Name, "err", err)
		return "", nil
	}
	released, err := ctrl.isVolumeReleased(logger, current)
	if err != nil {
		logger.V(3).Info("Error reading claim for volume", "volumeName", volume.Name, "err", err)
		return "", nil
	}
	if !released {
		logger.V(3).Info("Volume no longer needs deletion, skipping", "volumeName", volume.Name)
		return "", nil
	}

	if err := ctrl.doDeleteVolume(ctx, plugin, volume); err != nil {
		// (Upstream sends a Normal VolumeDelete event instead when a cloud
		// deleter reports the volume still attached; the hostPath deleter
		// never does.)
		logger.V(3).Info("Deletion of volume failed", "volumeName", volume.Name, "err", err)
		if _, err := ctrl.updateVolumePhaseWithEvent(ctx, volume, v1.VolumeFailed, v1.EventTypeWarning, EventVolumeFailedDelete, err.Error()); err != nil {
			logger.V(4).Info("DeleteVolumeOperation: failed to mark volume as failed", "volumeName", volume.Name, "err", err)
			return pluginName, err
		}
		// Retried on every sync of the volume, after the operation backoff.
		return pluginName, err
	}

	logger.V(4).Info("DeleteVolumeOperation: success", "volumeName", volume.Name)
	if err := ctrl.kubeClient.CoreV1().PersistentVolumes().Delete(ctx, volume.Name, metav1.DeleteOptions{}); err != nil {
		// The next sync deletes (the already deleted asset) again.
		logger.V(3).Info("Failed to delete volume from database", "volumeName", volume.Name, "err", err)
	}
	return pluginName, nil
}

// doDeleteVolume deletes the asset through the plugin and drops the
// in-tree protection finalizer so that the PV object can go.
func (ctrl *Controller) doDeleteVolume(ctx context.Context, plugin deletablePlugin, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("doDeleteVolume", "volumeName", volume.Name)
	d, err := plugin.newDeleter(volume)
	if err != nil {
		return fmt.Errorf("failed to create deleter for volume %q: %w", volume.Name, err)
	}
	done := metrics.OperationCompleteHook(plugin.name(), "volume_delete")
	err = d.deleteVolume()
	done(err)
	if err != nil {
		return err
	}
	logger.V(2).Info("Volume deleted", "volumeName", volume.Name)
	return ctrl.removeDeletionProtectionFinalizer(ctx, volume)
}

func (ctrl *Controller) removeDeletionProtectionFinalizer(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	current, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		logger.Error(err, "Error reading persistent volume", "volumeName", volume.Name)
		return err
	}
	if !slices.Contains(current.Finalizers, PVDeletionInTreeProtectionFinalizer) {
		return nil
	}
	clone := current.DeepCopy()
	clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == PVDeletionInTreeProtectionFinalizer })
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("persistent volume controller can't update finalizer: %v", err)
	}
	if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
		return fmt.Errorf("persistent Volume Controller can't anneal migration finalizer: %v", err)
	}
	logger.V(2).Info("PV in-tree protection finalizer removed from volume", "volumeName", volume.Name)
	return nil
}

// isVolumeReleased reports whether the volume is bound to a claim that is
// gone, replaced, or now bound to another volume.
func (ctrl *Controller) isVolumeReleased(logger klog.Logger, volume *v1.PersistentVolume) (bool, error) {
	ref := volume.Spec.ClaimRef
	if ref == nil {
		logger.V(4).Info("isVolumeReleased: ClaimRef is nil", "volumeName", volume.Name)
		return false, nil
	}
	if ref.UID == "" {
		// Pre-bound by the user and not bound yet.
		logger.V(4).Info("isVolumeReleased: ClaimRef is not bound", "volumeName", volume.Name)
		return false, nil
	}
	obj, found, err := ctrl.claims.GetByKey(claimRefKey(ref))
	if err != nil {
		return false, err
	}
	if found {
		claim, ok := obj.(*v1.PersistentVolumeClaim)
		if !ok {
			return false, fmt.Errorf("cannot convert object from claim cache to claim!?: %#v", obj)
		}
		if claim.UID == ref.UID {
			if claim.Spec.VolumeName != "" && claim.Spec.VolumeName != volume.Name {
				return true, nil
			}
			logger.V(4).Info("isVolumeReleased: ClaimRef is still valid, volume is not released", "volumeName", volume.Name)
			return false, nil
		}
	}
	logger.V(2).Info("isVolumeReleased: volume is released", "volumeName", volume.Name)
	return true, nil
}

// isVolumeUsed lists the live pods using the volume's claim by name.
func (ctrl *Controller) isVolumeUsed(volume *v1.PersistentVolume) ([]string, bool, error) {
	ref := volume.Spec.ClaimRef
	if ref == nil {
		return nil, false, nil
	}
	pods, err := ctrl.podsUsingClaim(ref.Namespace, ref.Name)
	if err != nil {
		return nil, false, fmt.Errorf("error finding pods by pvc %q: %s", claimRefKey(ref), err)
	}
	seen := map[string]bool{}
	names := []string{}
	for _, pod := range pods {
		if isPodTerminated(pod) {
			continue
		}
		name := pod.Namespace + "/" + pod.Name
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, len(names) != 0, nil
}

// findDeletablePlugin returns the in-tree plugin that deletes the volume,
// or nil when an external deleter is responsible: a volume provisioned by
// an external provisioner, a migrated volume or a CSI volume.
func (ctrl *Controller) findDeletablePlugin(volume *v1.PersistentVolume) (deletablePlugin, error) {
	if provisioner := volume.Annotations[AnnDynamicallyProvisioned]; provisioner != "" {
		plugin, err := ctrl.plugins.findDeletableByName(provisioner)
		if err != nil {
			if !strings.HasPrefix(provisioner, "kubernetes.io/") {
				return nil, nil
			}
			return nil, err
		}
		return plugin, nil
	}
	if metav1.HasAnnotation(volume.ObjectMeta, AnnMigratedTo) {
		return nil, nil
	}
	if volume.Spec.CSI != nil {
		return nil, nil
	}
	plugin, err := ctrl.plugins.findDeletableBySpec(volume)
	if err != nil {
		return nil, fmt.Errorf("error getting deleter volume plugin for volume %q: %w", volume.Name, err)
	}
	return plugin, nil
}

// provisionerNameForVolume names who deletes the volume, for the
// plugin_name of deletion metrics: the in-tree plugin, else the
// StorageClass's provisioner (not the PV annotation, whose values some
// provisioners make unique per volume), else "N/A".
func (ctrl *Controller) provisionerNameForVolume(volume *v1.PersistentVolume) string {
	plugin, err := ctrl.findDeletablePlugin(volume)
	if err != nil {
		return metrics.PluginNameNotAvailable
	}
	if plugin != nil {
		return plugin.name()
	}
	class, err := ctrl.classLister.Get(storagehelpers.GetPersistentVolumeClass(volume))
	if err != nil {
		return metrics.PluginNameNotAvailable
	}
	if isMigratedPlugin(class.Provisioner) {
		driver, err := csiNameForInTreePlugin(class.Provisioner)
		if err != nil {
			return metrics.PluginNameNotAvailable
		}
		return driver
	}
	return class.Provisioner
}
