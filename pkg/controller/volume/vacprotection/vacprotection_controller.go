// Package vacprotection implements the
// volumeattributesclass-protection-controller. The kubernetes.io/vac-protection
// finalizer keeps a VolumeAttributesClass from going away while a PVC or
// PV still names it: this controller adds the finalizer to every class and
// removes it from a class being deleted once nothing references it.
//
// It reads only informer caches, so a PVC created just before the class is
// deleted may not be seen in time; upstream accepts the same race rather
// than list from the apiserver on every deletion.
package vacprotection

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	clientset "k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/protectionutil"
)

const (
	// Finalizer is the finalizer this controller manages.
	Finalizer = "kubernetes.io/vac-protection"
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "vacprotection"
	// vacNameIndex indexes PVCs and PVs by the classes they reference.
	vacNameIndex = "volumeAttributesClassName"
)

// Controller manages the VAC protection finalizer. Its queue holds class
// names.
type Controller struct {
	client clientset.Interface

	vacLister  storagelisters.VolumeAttributesClassLister
	vacSynced  cache.InformerSynced
	pvcIndexer cache.Indexer
	pvcSynced  cache.InformerSynced
	pvIndexer  cache.Indexer
	pvSynced   cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
}

// NewController wires the controller to the informers and
// adds the by-class index to the PVC and PV informers.
func NewController(logger klog.Logger, client clientset.Interface,
	pvcInformer coreinformers.PersistentVolumeClaimInformer,
	pvInformer coreinformers.PersistentVolumeInformer,
	vacInformer storageinformers.VolumeAttributesClassInformer) (*Controller, error) {
	c := &Controller{
		client:     client,
		vacLister:  vacInformer.Lister(),
		vacSynced:  vacInformer.Informer().HasSynced,
		pvcIndexer: pvcInformer.Informer().GetIndexer(),
		pvcSynced:  pvcInformer.Informer().HasSynced,
		pvIndexer:  pvInformer.Informer().GetIndexer(),
		pvSynced:   pvInformer.Informer().HasSynced,
		queue:      controller.NewNamedQueue(queueName),
	}
	c.loop = controller.WorkLoop[string]{Name: queueName, Queue: c.queue, Sync: c.syncVAC}

	opts := cache.HandlerOptions{Logger: &logger}
	if _, err := vacInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.vacAddedUpdated(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.vacAddedUpdated(logger, cur) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to VAC informer: %w", err)
	}

	if err := pvInformer.Informer().AddIndexers(cache.Indexers{vacNameIndex: func(obj interface{}) ([]string, error) {
		if pv, ok := obj.(*v1.PersistentVolume); ok {
			return pvVACNames(pv), nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("failed to add index to PV informer: %w", err)
	}
	if err := pvcInformer.Informer().AddIndexers(cache.Indexers{vacNameIndex: func(obj interface{}) ([]string, error) {
		if pvc, ok := obj.(*v1.PersistentVolumeClaim); ok {
			return pvcVACNames(pvc), nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("failed to add index to PVC informer: %w", err)
	}

	// A new PVC or PV can only add references, which never unblocks a
	// deletion: only updates and deletions matter.
	if _, err := pvcInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) { c.pvcUpdated(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.pvcDeleted(logger, obj) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to PVC informer: %w", err)
	}
	if _, err := pvInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) { c.pvUpdated(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.pvDeleted(logger, obj) },
	}, opts); err != nil {
		return nil, fmt.Errorf("failed to add event handler to PV informer: %w", err)
	}
	return c, nil
}

// Run waits for the caches and syncs classes with workers goroutines until
// ctx is cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting VAC protection controller")
	defer logger.Info("Shutting down VAC protection controller")
	if !controller.WaitForCacheSync(ctx, queueName, c.pvSynced, c.pvcSynced, c.vacSynced) {
		c.queue.ShutDown()
		return
	}
	c.loop.RunWorkers(ctx, workers)
}

// pvcVACNames returns the classes a PVC references: the one it asks for,
// the one its volume has, and the one a modification is moving it to.
func pvcVACNames(pvc *v1.PersistentVolumeClaim) []string {
	names := sets.New[string]()
	if n := pvc.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		names.Insert(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil && *n != "" {
		names.Insert(*n)
	}
	if s := pvc.Status.ModifyVolumeStatus; s != nil && s.TargetVolumeAttributesClassName != "" {
		names.Insert(s.TargetVolumeAttributesClassName)
	}
	return sets.List(names)
}

// pvVACNames returns the class a PV references.
func pvVACNames(pv *v1.PersistentVolume) []string {
	if n := pv.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		return []string{*n}
	}
	return nil
}

func (c *Controller) syncVAC(ctx context.Context, name string) error {
	inUse := func(vac *storagev1.VolumeAttributesClass) bool { return c.isBeingUsed(klog.FromContext(ctx), vac) }
	return c.finalizer().SyncClusterScoped(ctx, name, c.vacLister.Get, inUse)
}

// isBeingUsed reports whether a cached PV or PVC references the class. An
// index error counts as in use: keeping the finalizer is the safe side.
func (c *Controller) isBeingUsed(logger klog.Logger, vac *storagev1.VolumeAttributesClass) bool {
	pvs, err := c.pvIndexer.ByIndex(vacNameIndex, vac.Name)
	if err != nil {
		logger.Error(err, "Error getting PVs assigned to VAC", "VAC", klog.KObj(vac))
		return true
	}
	if len(pvs) > 0 {
		return true
	}
	pvcs, err := c.pvcIndexer.ByIndex(vacNameIndex, vac.Name)
	if err != nil {
		logger.Error(err, "Error getting PVCs assigned to VAC", "VAC", klog.KObj(vac))
		return true
	}
	return len(pvcs) > 0
}

// finalizer writes this controller's finalizer through the client.
func (c *Controller) finalizer() protectionutil.Finalizer[*storagev1.VolumeAttributesClass] {
	return protectionutil.Finalizer[*storagev1.VolumeAttributesClass]{
		Name: Finalizer,
		Kind: "VAC",
		Update: func(ctx context.Context, obj *storagev1.VolumeAttributesClass, opts metav1.UpdateOptions) (*storagev1.VolumeAttributesClass, error) {
			return c.client.StorageV1().VolumeAttributesClasses().Update(ctx, obj, opts)
		},
	}
}

// vacAddedUpdated queues only classes the sync would write: one lacking the
// finalizer, or one being deleted that still has it.
func (c *Controller) vacAddedUpdated(logger klog.Logger, obj interface{}) {
	vac, ok := obj.(*storagev1.VolumeAttributesClass)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "VAC informer returned non-VAC object", "type", fmt.Sprintf("%T", obj))
		return
	}
	logger.V(4).Info("Got event on VAC", "VAC", klog.KObj(vac))
	if protectionutil.NeedsWrite(vac, Finalizer) {
		c.queue.Add(vac.Name)
	}
}

// pvcUpdated queues the classes the PVC stopped referencing.
func (c *Controller) pvcUpdated(logger klog.Logger, old, cur interface{}) {
	oldPVC, ok1 := old.(*v1.PersistentVolumeClaim)
	curPVC, ok2 := cur.(*v1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		utilruntime.HandleErrorWithLogger(logger, nil, "PVC informer returned non-PVC object", "old", fmt.Sprintf("%T", old), "new", fmt.Sprintf("%T", cur))
		return
	}
	logger.V(4).Info("Got event on PVC", "PVC", klog.KObj(curPVC))
	c.enqueueDropped(pvcVACNames(oldPVC), pvcVACNames(curPVC))
}

func (c *Controller) pvcDeleted(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "PVC informer returned non-PVC object", "type", fmt.Sprintf("%T", obj))
		return
	}
	logger.V(4).Info("Got event on PVC", "PVC", klog.KObj(pvc))
	c.enqueueDropped(pvcVACNames(pvc), nil)
}

// pvUpdated queues the class the PV stopped referencing.
func (c *Controller) pvUpdated(logger klog.Logger, old, cur interface{}) {
	oldPV, ok1 := old.(*v1.PersistentVolume)
	curPV, ok2 := cur.(*v1.PersistentVolume)
	if !ok1 || !ok2 {
		utilruntime.HandleErrorWithLogger(logger, nil, "PV informer returned non-PV object", "old", fmt.Sprintf("%T", old), "new", fmt.Sprintf("%T", cur))
		return
	}
	logger.V(4).Info("Got event on PV", "PV", klog.KObj(curPV))
	c.enqueueDropped(pvVACNames(oldPV), pvVACNames(curPV))
}

func (c *Controller) pvDeleted(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "PV informer returned non-PV object", "type", fmt.Sprintf("%T", obj))
		return
	}
	logger.V(4).Info("Got event on PV", "PV", klog.KObj(pv))
	c.enqueueDropped(pvVACNames(pv), nil)
}

// enqueueDropped queues the classes in before that are not in after: a
// reference that goes away may unblock a deletion.
func (c *Controller) enqueueDropped(before, after []string) {
	for _, name := range sets.List(sets.New(before...).Delete(after...)) {
		c.queue.Add(name)
	}
}
