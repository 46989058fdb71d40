package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume/metrics"
)

// provisionClaim starts provisioning for the claim, if enabled. The
// provisioner is either an in-tree plugin (hostPath) run here, or an
// external one the claim is annotated for. Failures to find a provisioner
// are reported as events and retried on the next sync.
func (ctrl *Controller) provisionClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	if !ctrl.enableDynamicProvisioning {
		return nil
	}
	logger := klog.FromContext(ctx)
	logger.V(4).Info("provisionClaim: started", "PVC", klog.KObj(claim))
	plugin, class, err := ctrl.findProvisionablePlugin(claim)
	if err != nil {
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, err.Error())
		logger.Error(err, "Error finding provisioning plugin for claim", "PVC", klog.KObj(claim))
		return nil
	}
	name := fmt.Sprintf("provision-%s[%s]", claimKey(claim), claim.UID)
	ctrl.scheduleOperation(logger, name, func() error {
		key := claimKey(claim)
		// Timed until the claim is bound (see syncUnboundClaim).
		ctrl.operationTimestamps.AddIfNotExist(key, ctrl.provisionerName(plugin, class), "provision")
		var err error
		if plugin == nil {
			_, err = ctrl.provisionClaimOperationExternal(ctx, claim, class)
		} else {
			_, err = ctrl.provisionClaimOperation(ctx, claim, plugin, class)
		}
		if err != nil {
			metrics.RecordMetric(key, ctrl.operationTimestamps, err)
		}
		return err
	})
	return nil
}

// provisionClaimOperationExternal hands the claim to an external
// provisioner by annotating it; the provisioner creates a PV pre-bound to
// the claim, which the claim's next sync binds.
func (ctrl *Controller) provisionClaimOperationExternal(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) (string, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("provisionClaimOperationExternal started", "PVC", klog.KObj(claim), "storageClassName", storagehelpers.GetPersistentVolumeClaimClass(claim))
	provisioner := class.Provisioner
	if isMigratedPlugin(provisioner) {
		driver, err := csiNameForInTreePlugin(provisioner)
		if err != nil {
			msg := fmt.Sprintf("error getting CSI name for In tree plugin %s: %v", provisioner, err)
			logger.V(2).Info(msg)
			ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, msg)
			return provisioner, err
		}
		provisioner = driver
	}
	saved, err := ctrl.setClaimProvisioner(ctx, claim, provisioner)
	if err != nil {
		logger.V(2).Info("Error saving claim", "PVC", klog.KObj(claim), "err", err)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, fmt.Sprintf("Error saving claim: %v", err))
		return provisioner, err
	}
	msg := fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' "+
		"or manually by the system administrator. If volume creation is delayed, please verify that "+
		"the provisioner is running and correctly registered.", provisioner)
	ctrl.eventRecorder.Event(saved, v1.EventTypeNormal, EventExternalProvisioning, msg)
	logger.V(3).Info("provisionClaimOperationExternal provisioning claim", "PVC", klog.KObj(claim), "msg", msg)
	return provisioner, nil
}

// provisionClaimOperation provisions a volume with an in-tree plugin and
// saves its PV, pre-bound to the claim.
func (ctrl *Controller) provisionClaimOperation(ctx context.Context, claim *v1.PersistentVolumeClaim, plugin provisionablePlugin, class *storagev1.StorageClass) (string, error) {
	logger := klog.FromContext(ctx)
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	pluginName := plugin.name()
	logger.V(4).Info("provisionClaimOperation started", "PVC", klog.KObj(claim), "storageClassName", className)

	if pluginName != "kubernetes.io/csi" && claim.Spec.DataSource != nil {
		msg := fmt.Sprintf("plugin %q is not a CSI plugin. Only CSI plugin can provision a claim with a datasource", pluginName)
		logger.V(2).Info(msg)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, msg)
		return pluginName, errors.New(msg)
	}
	logger.V(4).Info("provisionClaimOperation", "PVC", klog.KObj(claim), "pluginName", pluginName, "provisionerName", class.Provisioner)

	// Annotated like for external provisioners, for consistency.
	claim, err := ctrl.setClaimProvisioner(ctx, claim, class.Provisioner)
	if err != nil {
		logger.V(2).Info("Error saving claim", "PVC", klog.KObj(claim), "err", err)
		return pluginName, err
	}

	// The PV name is derived from the claim UID, so an earlier run of this
	// operation that already saved it is detected here.
	pvName := provisionedVolumeName(claim)
	existing, err := ctrl.kubeClient.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		logger.V(3).Info("Error reading persistent volume", "PV", klog.KRef("", pvName), "err", err)
		return pluginName, err
	}
	if err == nil && existing != nil {
		logger.V(4).Info("provisionClaimOperation: volume already exists, skipping", "PVC", klog.KObj(claim))
		return pluginName, nil
	}

	// Fail before creating the asset if the reference cannot be made.
	claimRef, err := reference.GetReference(scheme.Scheme, claim)
	if err != nil {
		logger.V(3).Info("Unexpected error getting claim reference", "err", err)
		return pluginName, err
	}

	reclaimPolicy := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaimPolicy = *class.ReclaimPolicy
	}
	opts := provisionOptions{
		reclaimPolicy: reclaimPolicy,
		mountOptions:  class.MountOptions,
		pvName:        pvName,
		claim:         claim,
		parameters:    class.Parameters,
	}
	// Validation would reject the PV anyway.
	if !plugin.supportsMountOption() && len(opts.mountOptions) > 0 {
		msg := fmt.Sprintf("Mount options are not supported by the provisioner but StorageClass %q has mount options %v", class.Name, opts.mountOptions)
		logger.V(2).Info("Mount options are not supported by the provisioner but claim's StorageClass has mount options", "PVC", klog.KObj(claim), "storageClassName", class.Name, "options", opts.mountOptions)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, msg)
		return pluginName, fmt.Errorf("provisioner %q doesn't support mount options", pluginName)
	}

	prov, err := plugin.newProvisioner(opts)
	if err != nil {
		logger.V(2).Info("Failed to create provisioner for claim with StorageClass", "PVC", klog.KObj(claim), "storageClassName", class.Name, "err", err)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, fmt.Sprintf("Failed to create provisioner: %v", err))
		return pluginName, err
	}

	var selectedNode *v1.Node
	if nodeName, ok := claim.Annotations[AnnSelectedNode]; ok {
		selectedNode, err = ctrl.nodeLister.Get(nodeName)
		if err != nil {
			logger.V(3).Info("Unexpected error getting target node for claim", "node", klog.KRef("", nodeName), "PVC", klog.KObj(claim), "err", err)
			ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, fmt.Sprintf("Failed to get target node: %v", err))
			return pluginName, err
		}
	}

	done := metrics.OperationCompleteHook(pluginName, "volume_provision")
	volume, err := prov.provision(ctx, selectedNode, class.AllowedTopologies)
	done(err)
	if err != nil {
		// Let the scheduler pick another node (only failures of the
		// provisioning itself are node related).
		ctrl.rescheduleProvisioning(ctx, claim)
		logger.V(2).Info("Failed to provision volume for claim with StorageClass", "PVC", klog.KObj(claim), "storageClassName", class.Name, "err", err)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, fmt.Sprintf("Failed to provision volume with StorageClass %q: %v", class.Name, err))
		return pluginName, err
	}
	logger.V(3).Info("Volume for claim created", "PVC", klog.KObj(claim), "volumeName", volume.Name)

	if volume.Name == "" {
		volume.Name = pvName
	}
	volume.Spec.ClaimRef = claimRef
	volume.Status.Phase = v1.VolumeBound
	volume.Spec.StorageClassName = className
	metav1.SetMetaDataAnnotation(&volume.ObjectMeta, AnnBoundByController, "yes")
	metav1.SetMetaDataAnnotation(&volume.ObjectMeta, AnnDynamicallyProvisioned, pluginName)
	if volume.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		volume.Finalizers = []string{PVDeletionInTreeProtectionFinalizer}
	}

	err = ctrl.savePVWithRetries(ctx, claim, volume)
	if err == nil {
		logger.V(2).Info("Volume provisioned for claim", "PVC", klog.KObj(claim), "volumeName", volume.Name)
		ctrl.eventRecorder.Event(claim, v1.EventTypeNormal, EventProvisioningSucceeded,
			fmt.Sprintf("Successfully provisioned volume %s using %s", volume.Name, pluginName))
		return pluginName, nil
	}

	// The asset exists but has no PV: delete it again.
	msg := fmt.Sprintf("Error creating provisioned PV object for claim %s: %v. Deleting the volume.", claimKey(claim), err)
	logger.V(3).Info(msg)
	ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningFailed, msg)
	delPlugin, deleteErr := ctrl.findDeletablePlugin(volume)
	if deleteErr == nil {
		if delPlugin == nil {
			// Cannot happen: an in-tree plugin provisioned it.
			logger.Error(nil, "Error finding internal deleter for volume plugin", "plugin", pluginName)
			return pluginName, nil
		}
		for i := 0; i < ctrl.createProvisionedPVRetryCount; i++ {
			if deleteErr = ctrl.doDeleteVolume(ctx, delPlugin, volume); deleteErr == nil {
				logger.V(4).Info("provisionClaimOperation: cleaning volume succeeded", "PVC", klog.KObj(claim), "volumeName", volume.Name)
				break
			}
			logger.V(3).Info("Failed to delete volume", "volumeName", volume.Name, "err", deleteErr)
			if !sleepCtx(ctx, ctrl.createProvisionedPVInterval) {
				deleteErr = ctx.Err()
				break
			}
		}
	}
	if deleteErr != nil {
		msg := fmt.Sprintf("Error cleaning provisioned volume for claim %s: %v. Please delete manually.", claimKey(claim), deleteErr)
		logger.V(2).Info(msg)
		ctrl.eventRecorder.Event(claim, v1.EventTypeWarning, EventProvisioningCleanupFailed, msg)
	}
	return pluginName, nil
}

// savePVWithRetries creates the PV of a provisioned volume, trying a few
// times; an existing PV of that name counts as saved.
func (ctrl *Controller) savePVWithRetries(ctx context.Context, claim *v1.PersistentVolumeClaim, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	var err error
	for i := 0; i < ctrl.createProvisionedPVRetryCount; i++ {
		logger.V(4).Info("provisionClaimOperation: trying to save volume", "PVC", klog.KObj(claim), "volumeName", volume.Name)
		var saved *v1.PersistentVolume
		saved, err = ctrl.kubeClient.CoreV1().PersistentVolumes().Create(ctx, volume, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			logger.V(3).Info("Volume for claim already exists, reusing", "PVC", klog.KObj(claim), "volumeName", volume.Name)
			return nil
		}
		if err == nil {
			logger.V(3).Info("Volume for claim saved", "PVC", klog.KObj(claim), "volumeName", volume.Name)
			if _, err := ctrl.storeVolumeUpdate(logger, saved); err != nil {
				// The informer delivers it shortly anyway.
				logger.V(4).Info("provisionClaimOperation: cannot update internal cache", "volumeName", volume.Name, "err", err)
			}
			return nil
		}
		logger.V(3).Info("Failed to save volume for claim", "PVC", klog.KObj(claim), "volumeName", volume.Name, "err", err)
		if !sleepCtx(ctx, ctrl.createProvisionedPVInterval) {
			return err
		}
	}
	return err
}

// sleepCtx waits for d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// rescheduleProvisioning drops the scheduler's node choice after a failed
// provisioning, so that the scheduler tries again (maybe elsewhere).
func (ctrl *Controller) rescheduleProvisioning(ctx context.Context, claim *v1.PersistentVolumeClaim) {
	if _, ok := claim.Annotations[AnnSelectedNode]; !ok {
		return
	}
	logger := klog.FromContext(ctx)
	clone := claim.DeepCopy()
	delete(clone.Annotations, AnnSelectedNode)
	if _, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		logger.V(4).Info("Failed to delete annotation 'storagehelpers.AnnSelectedNode' for PersistentVolumeClaim", "PVC", klog.KObj(clone), "err", err)
		return
	}
	// Stored with its old resourceVersion, as upstream does: the update
	// event that follows replaces it.
	if _, err := ctrl.storeClaimUpdate(logger, clone); err != nil {
		logger.V(4).Info("Updating PersistentVolumeClaim: cannot update internal cache", "PVC", klog.KObj(clone), "err", err)
	}
}

// setClaimProvisioner annotates the claim with its provisioner (both the
// GA and the deprecated beta annotation) unless it already is.
func (ctrl *Controller) setClaimProvisioner(ctx context.Context, claim *v1.PersistentVolumeClaim, provisioner string) (*v1.PersistentVolumeClaim, error) {
	if v, ok := claim.Annotations[AnnStorageProvisioner]; ok && v == provisioner {
		return claim, nil
	}
	clone := claim.DeepCopy()
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnBetaStorageProvisioner, provisioner)
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnStorageProvisioner, provisioner)
	setMigratedToAnnotation(clone.Annotations, true)
	saved, err := ctrl.kubeClient.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return claim, err
	}
	if _, err := ctrl.storeClaimUpdate(klog.FromContext(ctx), saved); err != nil {
		return saved, err
	}
	return saved, nil
}

// provisionedVolumeName is the PV name of a provisioned volume: unique,
// and the same on every attempt.
func provisionedVolumeName(claim *v1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

// findProvisionablePlugin returns the in-tree plugin provisioning for the
// claim's class, or nil (and no error) for an external provisioner.
func (ctrl *Controller) findProvisionablePlugin(claim *v1.PersistentVolumeClaim) (provisionablePlugin, *storagev1.StorageClass, error) {
	class, err := ctrl.classLister.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		return nil, nil, err
	}
	if isMigratedPlugin(class.Provisioner) {
		return nil, class, nil
	}
	plugin, err := ctrl.plugins.findProvisionableByName(class.Provisioner)
	if err != nil {
		if !strings.HasPrefix(class.Provisioner, "kubernetes.io/") {
			return nil, class, nil
		}
		return nil, class, err
	}
	return plugin, class, nil
}

// provisionerName is the plugin_name of provisioning metrics.
func (ctrl *Controller) provisionerName(plugin provisionablePlugin, class *storagev1.StorageClass) string {
	if plugin != nil {
		return plugin.name()
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

// defaultStorageClass returns the default StorageClass, the newest one
// (then the first by name) if several are marked, or nil.
func (ctrl *Controller) defaultStorageClass() (*storagev1.StorageClass, error) {
	classes, err := ctrl.classLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var defaults []*storagev1.StorageClass
	for _, c := range classes {
		if c.Annotations[annIsDefaultStorageClass] == "true" || c.Annotations[annBetaIsDefaultStorageClass] == "true" {
			defaults = append(defaults, c)
		}
	}
	if len(defaults) == 0 {
		return nil, nil
	}
	sort.Slice(defaults, func(i, j int) bool {
		ti, tj := defaults[i].CreationTimestamp.UnixNano(), defaults[j].CreationTimestamp.UnixNano()
		if ti == tj {
			return defaults[i].Name < defaults[j].Name
		}
		return ti > tj
	})
	return defaults[0], nil
}
