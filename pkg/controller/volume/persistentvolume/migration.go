package persistentvolume

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// In v1.37 every in-tree plugin that ever had a CSI replacement is migrated
// (the feature gates are GA and locked): their claims and volumes are
// annotated with the CSI driver and left to the external provisioner and
// deleter. This table is what csi-translation-lib answers for them.
var csiDriverForInTreePlugin = map[string]string{
	"kubernetes.io/aws-ebs":         "ebs.csi.aws.com",
	"kubernetes.io/gce-pd":          "pd.csi.storage.gke.io",
	"kubernetes.io/azure-disk":      "disk.csi.azure.com",
	"kubernetes.io/azure-file":      "file.csi.azure.com",
	"kubernetes.io/cinder":          "cinder.csi.openstack.org",
	"kubernetes.io/vsphere-volume":  "csi.vsphere.vmware.com",
	"kubernetes.io/portworx-volume": "pxd.portworx.com",
}

// isMigratedPlugin reports whether CSI migration is on for the plugin.
func isMigratedPlugin(pluginName string) bool {
	_, ok := csiDriverForInTreePlugin[pluginName]
	return ok
}

// csiNameForInTreePlugin names the CSI driver replacing a migrated plugin.
func csiNameForInTreePlugin(pluginName string) (string, error) {
	if driver, ok := csiDriverForInTreePlugin[pluginName]; ok {
		return driver, nil
	}
	return "", fmt.Errorf("could not find CSI Driver name for plugin %s", pluginName)
}

// setMigratedToAnnotation makes ann's migrated-to annotation agree with the
// provisioner named in it (storage-provisioner for a claim, provisioned-by
// for a volume): set for a migrated plugin, removed otherwise. A volume
// without provisioned-by was created statically and is left alone. It
// reports whether ann changed.
func setMigratedToAnnotation(ann map[string]string, claim bool) bool {
	if ann == nil {
		return false
	}
	var provisioner string
	var ok bool
	if claim {
		provisioner, ok = ann[AnnStorageProvisioner]
		if !ok {
			provisioner, ok = ann[AnnBetaStorageProvisioner]
		}
	} else {
		provisioner, ok = ann[AnnDynamicallyProvisioned]
	}
	if !ok {
		return false
	}
	current := ann[AnnMigratedTo]
	if isMigratedPlugin(provisioner) {
		driver, _ := csiNameForInTreePlugin(provisioner)
		if current != driver {
			ann[AnnMigratedTo] = driver
			return true
		}
		return false
	}
	if current != "" {
		delete(ann, AnnMigratedTo)
		return true
	}
	return false
}

// desiredDeletionFinalizers returns the finalizers a dynamically provisioned
// volume should carry and whether they differ from its current ones:
//   - a migrated plugin's volume loses the in-tree finalizer (the external
//     provisioner protects it now);
//   - a volume of a (non-migrated) in-tree plugin carries the in-tree
//     finalizer exactly when its policy is Delete, and never the external
//     one (left over after a migration rollback);
//   - anything else (CSI, external provisioners) is not touched.
func desiredDeletionFinalizers(logger klog.Logger, volume *v1.PersistentVolume) ([]string, bool) {
	provisioner, ok := volume.Annotations[AnnDynamicallyProvisioned]
	if !ok {
		return volume.Finalizers, false
	}
	finalizers := slices.Clone(volume.Finalizers)
	changed := false
	remove := func(f string) {
		if slices.Contains(finalizers, f) {
			finalizers = slices.DeleteFunc(finalizers, func(s string) bool { return s == f })
			changed = true
		}
	}
	if isMigratedPlugin(provisioner) {
		remove(PVDeletionInTreeProtectionFinalizer)
		return finalizers, changed
	}
	if !strings.HasPrefix(provisioner, "kubernetes.io/") {
		return volume.Finalizers, false
	}
	switch policy := volume.Spec.PersistentVolumeReclaimPolicy; {
	case policy == v1.PersistentVolumeReclaimDelete && !slices.Contains(finalizers, PVDeletionInTreeProtectionFinalizer):
		logger.V(4).Info("Adding in-tree pv deletion protection finalizer on volume", "volumeName", volume.Name)
		finalizers = append(finalizers, PVDeletionInTreeProtectionFinalizer)
		changed = true
	case policy == v1.PersistentVolumeReclaimRetain || policy == v1.PersistentVolumeReclaimRecycle:
		if slices.Contains(finalizers, PVDeletionInTreeProtectionFinalizer) {
			logger.V(4).Info("Removing in-tree pv deletion protection finalizer on volume", "volumeName", volume.Name)
		}
		remove(PVDeletionInTreeProtectionFinalizer)
	}
	if slices.Contains(finalizers, PVDeletionProtectionFinalizer) {
		logger.V(4).Info("Removing external pv deletion protection finalizer on volume", "volumeName", volume.Name)
	}
	remove(PVDeletionProtectionFinalizer)
	return finalizers, changed
}

// annealClaimMigration saves the claim when its migrated-to annotation is
// out of date. It always returns a copy of the claim the caller may modify.
func (ctrl *Controller) annealClaimMigration(ctx context.Context, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	clone := claim.DeepCopy()
	if !setMigratedToAnnotation(clone.Annotations, true) {
		return clone, nil
	}
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("persistent Volume Controller can't anneal migration annotations: %v", err)
	}
	if _, err := ctrl.storeClaimUpdate(klog.FromContext(ctx), saved); err != nil {
		return nil, fmt.Errorf("persistent Volume Controller can't anneal migration annotations: %v", err)
	}
	return saved, nil
}

// annealVolumeMigration saves the volume when its migrated-to annotation or
// deletion protection finalizers are out of date. It always returns a copy.
func (ctrl *Controller) annealVolumeMigration(ctx context.Context, volume *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	logger := klog.FromContext(ctx)
	clone := volume.DeepCopy()
	annChanged := setMigratedToAnnotation(clone.Annotations, false)
	finalizers, finChanged := desiredDeletionFinalizers(logger, clone)
	if !annChanged && !finChanged {
		return clone, nil
	}
	if finChanged {
		clone.Finalizers = finalizers
	}
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("persistent Volume Controller can't anneal migration annotations or finalizer: %v", err)
	}
	if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
		return nil, fmt.Errorf("persistent Volume Controller can't anneal migration annotations or finalizer: %v", err)
	}
	return saved, nil
}
