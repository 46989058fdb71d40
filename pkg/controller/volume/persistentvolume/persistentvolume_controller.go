// Package persistentvolume implements the persistentvolume-binder-controller:
// it binds PersistentVolumeClaims to PersistentVolumes, starts dynamic
// provisioning for claims no volume satisfies (handing it to an external
// provisioner, or doing it itself for hostPath), and reclaims released
// volumes (Retain, Delete, Recycle).
//
// Binding is a two-step transaction without transactions: the PV's
// spec.claimRef is written first, then the PVC's spec.volumeName, and each
// object's status follows. Every step may fail, race with a user or another
// controller instance, or be seen by this controller through informers
// that lag behind its own writes. Each sync therefore looks at both sides,
// decides from what it sees which step is missing and does only that.
//
// The controller keeps its own caches of volumes and claims, updated both
// from informer events and with every object it writes itself, and an
// object is processed only if it is not older than the cached version. A
// bind writes four objects and produces four events; without these caches
// an early event would show the other object still unbound and the
// controller would try to bind it again (or to something else).
package persistentvolume

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume/metrics"
)

// ControllerParameters is what NewController needs. The controller manager
// fills it from --pvclaimbinder-sync-period, --enable-dynamic-provisioning,
// --enable-hostpath-provisioner and the --pv-recycler-* flags, with the
// "persistent-volume-binder" client.
type ControllerParameters struct {
	KubeClient clientset.Interface
	// SyncPeriod is how often every claim and volume is synced again.
	SyncPeriod time.Duration

	VolumeInformer coreinformers.PersistentVolumeInformer
	ClaimInformer  coreinformers.PersistentVolumeClaimInformer
	ClassInformer  storageinformers.StorageClassInformer
	PodInformer    coreinformers.PodInformer
	NodeInformer   coreinformers.NodeInformer

	// EnableDynamicProvisioning lets claims without a matching volume be
	// provisioned.
	EnableDynamicProvisioning bool
	// EnableHostPathProvisioning lets the hostPath plugin provision (for
	// StorageClasses with provisioner kubernetes.io/host-path).
	EnableHostPathProvisioning bool
	// Recycler configures the hostPath and NFS recycler pods.
	Recycler RecyclerConfig
}

// Controller binds claims and volumes and runs provisioning
// and reclaim.
type Controller struct {
	volumeLister       corelisters.PersistentVolumeLister
	volumeListerSynced cache.InformerSynced
	claimLister        corelisters.PersistentVolumeClaimLister
	claimListerSynced  cache.InformerSynced
	classLister        storagelisters.StorageClassLister
	classListerSynced  cache.InformerSynced
	podIndexer         cache.Indexer
	podListerSynced    cache.InformerSynced
	nodeLister         corelisters.NodeLister
	nodeListerSynced   cache.InformerSynced

	kubeClient                clientset.Interface
	eventBroadcaster          record.EventBroadcaster
	eventRecorder             record.EventRecorder
	plugins                   *pluginManager
	enableDynamicProvisioning bool
	resyncPeriod              time.Duration

	// The controller's own caches, newer than or as new as the informers'
	// (see the package comment). Objects in them must not be modified.
	volumes volumeIndex
	claims  cache.Store

	// One worker per queue: two concurrent claim syncs could bind one
	// volume to two claims. Conflicts would sort it out, slowly.
	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]

	// runningOperations runs provisioning, deletion and recycling.
	runningOperations *operationMap

	createProvisionedPVRetryCount int
	createProvisionedPVInterval   time.Duration

	// operationTimestamps times provision+bind (key: claim namespace/name,
	// until the claim is bound) and deletion (key: PV name, until the PV
	// is gone) for volume_operation_total_seconds.
	operationTimestamps *metrics.OperationStartTimeCache
}

// NewController creates the controller and registers its event handlers.
// It fails when a recycler pod template file cannot be loaded.
func NewController(ctx context.Context, p ControllerParameters) (*Controller, error) {
	hostPathTemplate, err := loadRecyclerPodTemplate(p.Recycler.PodTemplateFilePathHostPath)
	if err != nil {
		return nil, err
	}
	nfsTemplate, err := loadRecyclerPodTemplate(p.Recycler.PodTemplateFilePathNFS)
	if err != nil {
		return nil, err
	}
	plugins, err := newPluginManager(
		&hostPathPlugin{
			client:              p.KubeClient,
			provisioningEnabled: p.EnableHostPathProvisioning,
			baseDir:             "/tmp",
			recycler: recyclerPodConfig{
				template:         hostPathTemplate,
				minimumTimeout:   p.Recycler.MinimumTimeoutHostPath,
				timeoutIncrement: p.Recycler.IncrementTimeoutHostPath,
			},
		},
		&nfsPlugin{
			client: p.KubeClient,
			recycler: recyclerPodConfig{
				template:         nfsTemplate,
				minimumTimeout:   p.Recycler.MinimumTimeoutNFS,
				timeoutIncrement: p.Recycler.IncrementTimeoutNFS,
			},
		},
	)
	if err != nil {
		return nil, fmt.Errorf("could not initialize volume plugins for PersistentVolume Controller: %w", err)
	}

	broadcaster, recorder := controller.NewEventRecorder(ctx, EventComponent)
	ctrl := &Controller{
		volumeLister:                  p.VolumeInformer.Lister(),
		volumeListerSynced:            p.VolumeInformer.Informer().HasSynced,
		claimLister:                   p.ClaimInformer.Lister(),
		claimListerSynced:             p.ClaimInformer.Informer().HasSynced,
		classLister:                   p.ClassInformer.Lister(),
		classListerSynced:             p.ClassInformer.Informer().HasSynced,
		podIndexer:                    p.PodInformer.Informer().GetIndexer(),
		podListerSynced:               p.PodInformer.Informer().HasSynced,
		nodeLister:                    p.NodeInformer.Lister(),
		nodeListerSynced:              p.NodeInformer.Informer().HasSynced,
		kubeClient:                    p.KubeClient,
		eventBroadcaster:              broadcaster,
		eventRecorder:                 recorder,
		plugins:                       plugins,
		enableDynamicProvisioning:     p.EnableDynamicProvisioning,
		resyncPeriod:                  p.SyncPeriod,
		volumes:                       newVolumeIndex(),
		claims:                        cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc),
		claimQueue:                    controller.NewNamedQueue(claimQueueName),
		volumeQueue:                   controller.NewNamedQueue(volumeQueueName),
		runningOperations:             newOperationMap(),
		createProvisionedPVRetryCount: createProvisionedPVRetryCount,
		createProvisionedPVInterval:   createProvisionedPVInterval,
		operationTimestamps:           metrics.NewOperationStartTimeCache(),
	}

	logger := klog.FromContext(ctx)
	handlers := func(queue workqueue.TypedInterface[string]) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { ctrl.enqueueWork(logger, queue, obj) },
			UpdateFunc: func(_, obj interface{}) { ctrl.enqueueWork(logger, queue, obj) },
			DeleteFunc: func(obj interface{}) { ctrl.enqueueWork(logger, queue, obj) },
		}
	}
	if _, err := p.VolumeInformer.Informer().AddEventHandlerWithOptions(handlers(ctrl.volumeQueue), cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add volume event handler: %w", err)
	}
	if _, err := p.ClaimInformer.Informer().AddEventHandlerWithOptions(handlers(ctrl.claimQueue), cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add claim event handler: %w", err)
	}
	// Pods are looked up by the claims they use (recycling, WaitForFirstConsumer events).
	if err := ephemeral.AddPodPVCIndexer(p.PodInformer.Informer()); err != nil {
		return nil, fmt.Errorf("could not initialize persistent volume controller pod index: %w", err)
	}
	return ctrl, nil
}

// enqueueWork queues the key of a volume or claim, also for deletions.
func (ctrl *Controller) enqueueWork(logger klog.Logger, queue workqueue.TypedInterface[string], obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok && tombstone.Obj != nil {
		obj = tombstone.Obj
	}
	key, err := controller.KeyFunc(obj)
	if err != nil {
		logger.Error(err, "Failed to get key from object")
		return
	}
	logger.V(5).Info("Enqueued for sync", "objName", key)
	queue.Add(key)
}

// Run starts the workers and the periodic resync and blocks until ctx is
// done, then shuts the queues down and waits for workers and operations.
func (ctrl *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	stopEvents := controller.StartEventSink(ctrl.eventBroadcaster, ctrl.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting persistent volume controller")
	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down persistent volume controller")
		ctrl.claimQueue.ShutDown()
		ctrl.volumeQueue.ShutDown()
		wg.Wait()
		ctrl.runningOperations.wait()
	}()

	controller.ReportQueue(ctx, claimQueueName, ctrl.claimQueue.Len)
	controller.ReportQueue(ctx, volumeQueueName, ctrl.volumeQueue.Len)
	if !controller.WaitForCacheSync(ctx, "persistent volume", ctrl.volumeListerSynced, ctrl.claimListerSynced,
		ctrl.classListerSynced, ctrl.podListerSynced, ctrl.nodeListerSynced) {
		return
	}

	ctrl.initializeCaches(logger)
	metrics.Register(ctrl.volumes.store, ctrl.claims, ctrl.plugins.metricPluginName)
	metrics.RegisterOperationMetrics()

	wg.Go(func() { wait.UntilWithContext(ctx, ctrl.resync, ctrl.resyncPeriod) })
	wg.Go(func() { ctrl.volumeLoop().RunWorkers(ctx, 1) })
	wg.Go(func() { ctrl.claimLoop().RunWorkers(ctx, 1) })
	<-ctx.Done()
}

// initializeCaches fills the controller's caches before the first sync, so
// that the first claim synced already sees every volume (and vice versa).
func (ctrl *Controller) initializeCaches(logger klog.Logger) {
	volumes, err := ctrl.volumeLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "PersistentVolumeController can't initialize caches")
		return
	}
	for _, volume := range volumes {
		if _, err := ctrl.storeVolumeUpdate(logger, volume.DeepCopy()); err != nil {
			logger.Error(err, "Error updating volume cache")
		}
	}
	claims, err := ctrl.claimLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "PersistentVolumeController can't initialize caches")
		return
	}
	for _, claim := range claims {
		if _, err := ctrl.storeClaimUpdate(logger, claim.DeepCopy()); err != nil {
			logger.Error(err, "Error updating claim cache")
		}
	}
	logger.V(4).Info("Controller initialized")
}

// resync queues every claim and volume. It stands in for a short resync of
// the shared informers, which would burden their other users.
func (ctrl *Controller) resync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Resyncing PV controller")
	claims, err := ctrl.claimLister.List(labels.Everything())
	if err != nil {
		logger.Info("Cannot list claims", "err", err)
		return
	}
	for _, claim := range claims {
		ctrl.enqueueWork(logger, ctrl.claimQueue, claim)
	}
	volumes, err := ctrl.volumeLister.List(labels.Everything())
	if err != nil {
		logger.Info("Cannot list persistent volumes", "err", err)
		return
	}
	for _, volume := range volumes {
		ctrl.enqueueWork(logger, ctrl.volumeQueue, volume)
	}
}

// volumeLoop and claimLoop drain the two queues, one worker each. The
// syncs log their own failures, so the loop retries them quietly.
func (ctrl *Controller) volumeLoop() *controller.WorkLoop[string] {
	return &controller.WorkLoop[string]{Name: volumeQueueName, Queue: ctrl.volumeQueue, Sync: quietly(ctrl.syncVolumeByKey)}
}

func (ctrl *Controller) claimLoop() *controller.WorkLoop[string] {
	return &controller.WorkLoop[string]{Name: claimQueueName, Queue: ctrl.claimQueue, Sync: quietly(ctrl.syncClaimByKey)}
}

func quietly(sync func(context.Context, string) error) func(context.Context, string) error {
	return func(ctx context.Context, key string) error { return controller.Quietly(sync(ctx, key)) }
}

// syncVolumeByKey syncs a volume from the informer, or handles its
// deletion when the informer no longer has it.
func (ctrl *Controller) syncVolumeByKey(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	logger.V(5).Info("syncVolumeByKey", "volumeKey", key)
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.V(4).Info("Error getting name of volume to get volume from informer", "volumeKey", key, "err", err)
		return nil
	}
	volume, err := ctrl.volumeLister.Get(name)
	if err == nil {
		return ctrl.updateVolume(ctx, volume)
	}
	if !apierrors.IsNotFound(err) {
		logger.V(2).Info("Error getting volume from informer", "volumeKey", key, "err", err)
		return err
	}
	obj, found, err := ctrl.volumes.store.GetByKey(key)
	if err != nil {
		logger.V(2).Info("Error getting volume from cache", "volumeKey", key, "err", err)
		return err
	}
	if !found {
		logger.V(2).Info("Deletion of volume was already processed", "volumeKey", key)
		return nil
	}
	cached, ok := obj.(*v1.PersistentVolume)
	if !ok {
		logger.Error(nil, "Expected volume, got", "obj", obj)
		return nil
	}
	ctrl.deleteVolume(ctx, cached)
	return nil
}

// syncClaimByKey syncs a claim from the informer, or handles its deletion
// when the informer no longer has it.
func (ctrl *Controller) syncClaimByKey(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	logger.V(5).Info("syncClaimByKey", "claimKey", key)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.V(4).Info("Error getting namespace & name of claim to get claim from informer", "claimKey", key, "err", err)
		return nil
	}
	claim, err := ctrl.claimLister.PersistentVolumeClaims(namespace).Get(name)
	if err == nil {
		return ctrl.updateClaim(ctx, claim)
	}
	if !apierrors.IsNotFound(err) {
		logger.V(2).Info("Error getting claim from informer", "claimKey", key, "err", err)
		return err
	}
	obj, found, err := ctrl.claims.GetByKey(key)
	if err != nil {
		logger.V(2).Info("Error getting claim from cache", "claimKey", key, "err", err)
		return err
	}
	if !found {
		logger.V(2).Info("Deletion of claim was already processed", "claimKey", key)
		return nil
	}
	cached, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		logger.Error(nil, "Expected claim, got", "obj", obj)
		return nil
	}
	ctrl.deleteClaim(ctx, cached)
	return nil
}

// updateVolume syncs a volume seen in the informer unless the controller
// already holds a newer version of it.
func (ctrl *Controller) updateVolume(ctx context.Context, volume *v1.PersistentVolume) error {
	logger := klog.FromContext(ctx)
	isNew, err := ctrl.storeVolumeUpdate(logger, volume)
	if err != nil {
		logger.Error(err, "Error storing volume update")
		return err
	}
	if !isNew {
		return nil
	}
	if err := ctrl.syncVolume(ctx, volume); err != nil {
		logSyncError(logger, err, "Could not sync volume", "volumeName", volume.Name)
		return err
	}
	return nil
}

// updateClaim syncs a claim seen in the informer unless the controller
// already holds a newer version of it.
func (ctrl *Controller) updateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	logger := klog.FromContext(ctx)
	isNew, err := ctrl.storeClaimUpdate(logger, claim)
	if err != nil {
		logger.Error(err, "Error storing claim update")
		return err
	}
	if !isNew {
		return nil
	}
	if err := ctrl.syncClaim(ctx, claim); err != nil {
		logSyncError(logger, err, "Could not sync claim", "PVC", klog.KObj(claim))
		return err
	}
	return nil
}

// logSyncError logs conflicts quietly: they are routine and self-healing.
func logSyncError(logger klog.Logger, err error, msg string, kv ...interface{}) {
	if apierrors.IsConflict(err) {
		logger.V(3).Info(msg, append(kv, "err", err)...)
		return
	}
	logger.Error(err, msg, kv...)
}

// deleteVolume forgets a deleted volume, completes its deletion timing and
// syncs its claim right away, which becomes Lost.
func (ctrl *Controller) deleteVolume(ctx context.Context, volume *v1.PersistentVolume) {
	logger := klog.FromContext(ctx)
	if err := ctrl.volumes.store.Delete(volume); err != nil {
		logger.Error(err, "Volume deletion encountered", "volumeName", volume.Name)
	} else {
		logger.V(4).Info("volume deleted", "volumeName", volume.Name)
	}
	metrics.RecordMetric(volume.Name, ctrl.operationTimestamps, nil)
	if volume.Spec.ClaimRef == nil {
		return
	}
	logger.V(5).Info("deleteVolume: scheduling sync of claim", "PVC", klog.KRef(volume.Spec.ClaimRef.Namespace, volume.Spec.ClaimRef.Name), "volumeName", volume.Name)
	ctrl.claimQueue.Add(claimRefKey(volume.Spec.ClaimRef))
}

// deleteClaim forgets a deleted claim, drops any unfinished provisioning
// timing and syncs its volume right away, which gets released.
func (ctrl *Controller) deleteClaim(ctx context.Context, claim *v1.PersistentVolumeClaim) {
	logger := klog.FromContext(ctx)
	if err := ctrl.claims.Delete(claim); err != nil {
		logger.Error(err, "Claim deletion encountered", "PVC", klog.KObj(claim))
	}
	logger.V(4).Info("Claim deleted", "PVC", klog.KObj(claim))
	ctrl.operationTimestamps.Delete(claimKey(claim))
	if claim.Spec.VolumeName == "" {
		logger.V(5).Info("deleteClaim: volume not bound", "PVC", klog.KObj(claim))
		return
	}
	logger.V(5).Info("deleteClaim: scheduling sync of volume", "PVC", klog.KObj(claim), "volumeName", claim.Spec.VolumeName)
	ctrl.volumeQueue.Add(claim.Spec.VolumeName)
}

func (ctrl *Controller) storeVolumeUpdate(logger klog.Logger, volume interface{}) (bool, error) {
	return storeObjectUpdate(logger, ctrl.volumes.store, volume, "volume")
}

func (ctrl *Controller) storeClaimUpdate(logger klog.Logger, claim interface{}) (bool, error) {
	return storeObjectUpdate(logger, ctrl.claims, claim, "claim")
}

// storeObjectUpdate puts obj into store unless the stored version is newer
// and reports whether it did. An equal version is stored (and processed):
// periodic resyncs deliver unchanged objects.
func storeObjectUpdate(logger klog.Logger, store cache.Store, obj interface{}, kind string) (bool, error) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		return false, fmt.Errorf("couldn't get key for object %+v: %w", obj, err)
	}
	newMeta, err := meta.Accessor(obj)
	if err != nil {
		return false, err
	}
	old, found, err := store.Get(obj)
	if err != nil {
		return false, fmt.Errorf("error finding %s %q in controller cache: %w", kind, key, err)
	}
	if !found {
		logger.V(4).Info("storeObjectUpdate, adding obj", "kind", kind, "objName", key, "resourceVersion", newMeta.GetResourceVersion())
		if err := store.Add(obj); err != nil {
			return false, fmt.Errorf("error adding %s %q to controller cache: %w", kind, key, err)
		}
		return true, nil
	}
	oldMeta, err := meta.Accessor(old)
	if err != nil {
		return false, err
	}
	newRV, err := strconv.ParseInt(newMeta.GetResourceVersion(), 10, 64)
	if err != nil {
		return false, fmt.Errorf("error parsing ResourceVersion %q of %s %q: %s", newMeta.GetResourceVersion(), kind, key, err)
	}
	oldRV, err := strconv.ParseInt(oldMeta.GetResourceVersion(), 10, 64)
	if err != nil {
		return false, fmt.Errorf("error parsing old ResourceVersion %q of %s %q: %s", oldMeta.GetResourceVersion(), kind, key, err)
	}
	if oldRV > newRV {
		logger.V(4).Info("storeObjectUpdate: ignoring obj", "kind", kind, "objName", key, "resourceVersion", newMeta.GetResourceVersion())
		return false, nil
	}
	logger.V(4).Info("storeObjectUpdate updating obj with version", "kind", kind, "objName", key, "resourceVersion", newMeta.GetResourceVersion())
	if err := store.Update(obj); err != nil {
		return false, fmt.Errorf("error updating %s %q in controller cache: %w", kind, key, err)
	}
	return true, nil
}

// scheduleOperation starts an asynchronous operation unless one of the same
// name is running or backing off after a failure.
func (ctrl *Controller) scheduleOperation(logger klog.Logger, name string, op func() error) {
	logger.V(4).Info("scheduleOperation", "operationName", name)
	err := ctrl.runningOperations.run(name, op)
	switch err.(type) {
	case nil:
	case operationRunningError:
		logger.V(4).Info("Operation is already running, skipping", "operationName", name)
	case operationBackoffError:
		logger.V(4).Info("Operation postponed due to exponential backoff", "operationName", name)
	default:
		logger.Error(err, "Error scheduling operation", "operationName", name)
	}
}
