// Package expand implements the persistentvolume-expander-controller
// (upstream's deprecated "volume_expand" controller). In-tree volume
// expansion is gone: for a bound PVC whose storage request grew past its
// status capacity (or whose PV still carries the pre-resize-capacity
// annotation) the controller only
//   - for a PV of an in-tree plugin migrated to CSI (GCE PD, AWS EBS,
//     Azure Disk/File, Cinder, vSphere, Portworx), emits ExternalExpanding
//     and annotates the PVC with volume.kubernetes.io/storage-resizer set
//     to the CSI driver, so the external-resizer takes it;
//   - for a FlexVolume PV, "expands" it on behalf of the kubelet: PV
//     capacity raised, PVC marked for node (file system) expansion;
//   - for anything else (CSI PVs included), emits ExternalExpanding
//     "waiting for an external controller to expand this PVC" and leaves
//     the work to the CSI external-resizer, which acts on CSI PVs without
//     any annotation.
//
// StorageClass allowVolumeExpansion is not checked here: the apiserver's
// admission enforces it when the PVC request is raised.
package expand

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// ControllerName is the workqueue name and the events' source component.
	ControllerName = "volume_expand"

	// defaultWorkerCount is upstream's fixed number of workers.
	defaultWorkerCount = 10

	// Event reasons.
	ExternalExpanding   = "ExternalExpanding"
	VolumeResizeFailed  = "VolumeResizeFailed"
	VolumeResizeSuccess = "VolumeResizeSuccessful"

	// VolumeResizerKey names the resizer that must expand a PVC.
	VolumeResizerKey = "volume.kubernetes.io/storage-resizer"
	// AnnPreResizeCapacity holds a PVC's status capacity from before a
	// node expansion, on its PV.
	AnnPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"
)

// CSINameTranslator gives the CSI driver that replaced an in-tree plugin.
type CSINameTranslator interface {
	GetCSINameFromInTreeName(pluginName string) (string, error)
}

// Controller marks PVCs for external (or kubelet) expansion.
type Controller struct {
	kubeClient clientset.Interface

	pvcLister  corelisters.PersistentVolumeClaimLister
	pvcsSynced cache.InformerSynced

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	translator CSINameTranslator

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to the shared PVC informer.
// PVs are read from the API server, not a cache, as upstream does. The
// controller manager gives it the "expand-controller" client.
func NewController(ctx context.Context, kubeClient clientset.Interface, pvcInformer coreinformers.PersistentVolumeClaimInformer) (*Controller, error) {
	broadcaster, recorder := controller.NewEventRecorder(ctx, ControllerName)
	expc := &Controller{
		kubeClient:  kubeClient,
		pvcLister:   pvcInformer.Lister(),
		pvcsSynced:  pvcInformer.Informer().HasSynced,
		broadcaster: broadcaster,
		recorder:    recorder,
		translator:  inTreeTranslator{},
		queue:       controller.NewNamedQueue(ControllerName),
	}
	expc.loop = controller.WorkLoop[string]{Name: ControllerName, Queue: expc.queue, Sync: expc.syncHandler}

	logger := klog.FromContext(ctx)
	_, err := pvcInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    expc.enqueuePVC,
		UpdateFunc: expc.updatePVC,
		DeleteFunc: expc.enqueuePVC,
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("could not add pvc event handler: %w", err)
	}
	return expc, nil
}

// updatePVC enqueues a PVC whose storage request grew (it may need
// expanding) or whose status capacity grew (node expansion may have
// finished, so the PV's pre-resize annotation may go).
func (expc *Controller) updatePVC(old, cur interface{}) {
	oldPVC, ok := old.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	newPVC, ok := cur.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	oldReq := oldPVC.Spec.Resources.Requests[v1.ResourceStorage]
	oldCap := oldPVC.Status.Capacity[v1.ResourceStorage]
	newReq := newPVC.Spec.Resources.Requests[v1.ResourceStorage]
	newCap := newPVC.Status.Capacity[v1.ResourceStorage]
	if newReq.Cmp(oldReq) > 0 || newCap.Cmp(oldCap) > 0 {
		expc.enqueuePVC(cur)
	}
}

// enqueuePVC queues bound PVCs only. Tombstones are ignored, as upstream.
func (expc *Controller) enqueuePVC(obj interface{}) {
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok || pvc.Status.Phase != v1.ClaimBound {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(pvc)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %w", pvc, err))
		return
	}
	expc.queue.Add(key)
}

// Run starts the event sink and upstream's 10 workers after the PVC cache
// syncs, until ctx is cancelled.
func (expc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(expc.broadcaster, expc.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting expand controller")
	defer logger.Info("Shutting down expand controller")

	if !controller.WaitForCacheSync(ctx, ControllerName, expc.pvcsSynced) {
		expc.queue.ShutDown()
		return
	}
	expc.loop.RunWorkers(ctx, defaultWorkerCount)
}

// syncHandler handles one PVC key; an error requeues it with backoff.
func (expc *Controller) syncHandler(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	pvc, err := expc.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		logger.V(5).Info("Error getting PVC from informer", "pvcKey", key, "err", err)
		return err
	}

	pv, err := expc.getPersistentVolume(ctx, pvc)
	if err != nil {
		logger.V(5).Info("Error getting Persistent Volume for PVC from informer", "pvcKey", key, "pvcUID", pvc.UID, "err", err)
		return err
	}
	if pv.Spec.ClaimRef == nil || pvc.Namespace != pv.Spec.ClaimRef.Namespace || pvc.UID != pv.Spec.ClaimRef.UID {
		err := fmt.Errorf("persistent Volume is not bound to PVC being updated : %s", key)
		logger.V(4).Info("", "err", err)
		return err
	}

	pvcRequestSize := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	pvcStatusSize := pvc.Status.Capacity[v1.ResourceStorage]
	if pvcRequestSize.Cmp(pvcStatusSize) <= 0 && !metav1.HasAnnotation(pv.ObjectMeta, AnnPreResizeCapacity) {
		return nil
	}

	if inTreePluginName := inTreePluginNameForPV(pv); inTreePluginName != "" {
		// Migrated to CSI: hand the PVC to the driver's external-resizer.
		msg := fmt.Sprintf("CSI migration enabled for %s; waiting for external resizer to expand the pvc", inTreePluginName)
		expc.recorder.Event(pvc, v1.EventTypeNormal, ExternalExpanding, msg)
		csiResizerName, err := expc.translator.GetCSINameFromInTreeName(inTreePluginName)
		if err != nil {
			errorMsg := fmt.Sprintf("error getting CSI driver name for pvc %s, with error %v", key, err)
			expc.recorder.Event(pvc, v1.EventTypeWarning, ExternalExpanding, errorMsg)
			return errors.New(errorMsg)
		}
		if _, err := setClaimResizer(ctx, pvc, csiResizerName, expc.kubeClient); err != nil {
			errorMsg := fmt.Sprintf("error setting resizer annotation to pvc %s, with error %v", key, err)
			expc.recorder.Event(pvc, v1.EventTypeWarning, ExternalExpanding, errorMsg)
			return errors.New(errorMsg)
		}
		return nil
	}

	if pv.Spec.FlexVolume == nil {
		// No expandable plugin is compiled in any more: an external
		// controller (the CSI external-resizer) has to do it. No point in
		// requeuing.
		expc.recorder.Event(pvc, v1.EventTypeNormal, ExternalExpanding, "waiting for an external controller to expand this PVC")
		logger.Info("Waiting for an external controller to expand the PVC", "pvcKey", key, "pvcUID", pvc.UID)
		return nil
	}
	// FlexVolumes are expanded by the kubelet; the controller's share is a
	// no-op resize under the driver's name.
	return expc.expand(ctx, pvc, pv, pv.Spec.FlexVolume.Driver)
}

func (expc *Controller) getPersistentVolume(ctx context.Context, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	volumeName := pvc.Spec.VolumeName
	pv, err := expc.kubeClient.CoreV1().PersistentVolumes().Get(ctx, volumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to get PV %q: %w", volumeName, err)
	}
	return pv, nil
}

// isNodeExpandComplete: the PVC's status capacity has reached both its
// request and the PV's capacity (volumes may have been shrunk since).
func isNodeExpandComplete(logger klog.Logger, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) bool {
	logger.V(4).Info("pv and pvc capacity", "PV", klog.KObj(pv), "pvCapacity", pv.Spec.Capacity[v1.ResourceStorage], "PVC", klog.KObj(pvc), "pvcCapacity", pvc.Status.Capacity[v1.ResourceStorage])
	pvcSpecCap := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	pvcStatusCap, pvCap := pvc.Status.Capacity[v1.ResourceStorage], pv.Spec.Capacity[v1.ResourceStorage]
	return pvcStatusCap.Cmp(pvcSpecCap) >= 0 && pvcStatusCap.Cmp(pvCap) >= 0
}

// qualifiedName is namespace/name.
func qualifiedName(pvc *v1.PersistentVolumeClaim) string {
	return pvc.Namespace + "/" + pvc.Name
}
