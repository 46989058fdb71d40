// Package pvcprotection implements the
// persistentvolumeclaim-protection-controller. The kubernetes.io/pvc-protection
// finalizer keeps a PersistentVolumeClaim that a pod uses from disappearing
// under it: this controller removes the finalizer from a PVC being deleted
// once no pod uses it, and adds it to PVCs that lack it (the
// StorageObjectInUseProtection admission plugin normally adds it at
// creation; this covers older PVCs). With PersistentVolumeClaimUnusedSinceTime
// it also keeps the Unused condition of bound PVCs up to date.
//
// PVC keys go through two stages: one worker moves them from the main
// queue into per-namespace batches, and the sync workers process a whole
// namespace batch at a time, sharing one live pod list.
package pvcprotection

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/protectionutil"
)

const (
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "pvcprotection"
	// Finalizer is the finalizer this controller manages.
	Finalizer = "kubernetes.io/pvc-protection"
)

// Controller manages the PVC protection finalizer.
type Controller struct {
	client clientset.Interface

	pvcLister corelisters.PersistentVolumeClaimLister
	pvcSynced cache.InformerSynced
	// podIndexer has ephemeral.PodPVCIndex, to find a PVC's pods.
	podIndexer cache.Indexer
	podSynced  cache.InformerSynced

	// queue holds namespace/name keys of PVCs. A key stays in processing
	// from the moment it joins a batch until that batch is done with it.
	queue   workqueue.TypedRateLimitingInterface[string]
	batches *namespaceBatches

	// trackUnused is Features.UnusedSinceTime.
	trackUnused bool
	// clock stamps the Unused condition.
	clock clock.PassiveClock
}

// Features holds the feature gates the controller consults; the caller
// reads them from the component's feature gate.
type Features struct {
	// UnusedSinceTime (PersistentVolumeClaimUnusedSinceTime): keep the
	// Unused condition of bound PVCs up to date.
	UnusedSinceTime bool
}

// NewController wires the controller to the PVC and pod
// informers and adds ephemeral.PodPVCIndex to the latter.
func NewController(logger klog.Logger, pvcInformer coreinformers.PersistentVolumeClaimInformer, podInformer coreinformers.PodInformer, cl clientset.Interface, features Features) (*Controller, error) {
	c := &Controller{
		client:      cl,
		pvcLister:   pvcInformer.Lister(),
		pvcSynced:   pvcInformer.Informer().HasSynced,
		podIndexer:  podInformer.Informer().GetIndexer(),
		podSynced:   podInformer.Informer().HasSynced,
		queue:       controller.NewNamedQueue(queueName),
		batches:     newNamespaceBatches(),
		trackUnused: features.UnusedSinceTime,
		clock:       clock.RealClock{},
	}
	// A deleted PVC needs nothing: the finalizer is what held it.
	if _, err := pvcInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.pvcAddedUpdated(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { c.pvcAddedUpdated(logger, cur) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add PVC event handler: %w", err)
	}
	if err := ephemeral.AddPodPVCIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("could not initialize pvc protection controller: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.podAddedDeletedUpdated(logger, nil, obj, false) },
		UpdateFunc: func(old, cur interface{}) { c.podAddedDeletedUpdated(logger, old, cur, false) },
		DeleteFunc: func(obj interface{}) { c.podAddedDeletedUpdated(logger, nil, obj, true) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return nil, fmt.Errorf("could not add Pod event handler: %w", err)
	}
	return c, nil
}

// Run waits for the caches, then runs one worker filling the namespace
// batches and workers goroutines processing them, until ctx is cancelled.
// On return every worker has exited.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "name", queueName)

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down controller", "name", queueName)
		c.queue.ShutDown()
		c.batches.shutDown()
		wg.Wait()
	}()
	controller.ReportQueue(ctx, queueName, c.queue.Len)
	if !controller.WaitForCacheSync(ctx, queueName, c.pvcSynced, c.podSynced) {
		return
	}
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) {
			for c.batchNextKey() {
			}
		}, time.Second)
	})
	for i := 0; i < workers; i++ {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for c.processNextNamespace(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
}

// batchNextKey moves one key from the main queue into its namespace's
// batch. It returns false once the queue is shut down.
func (c *Controller) batchNextKey() bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("error parsing PVC key %q: %w", key, err))
		c.queue.Forget(key)
		c.queue.Done(key)
		return true
	}
	c.batches.add(namespace, claimRef{key: key, name: name})
	return true
}

// processNextNamespace syncs every PVC of the next namespace batch; a
// failing PVC is requeued with backoff and does not stop the others. It
// returns false once the batches are shut down.
func (c *Controller) processNextNamespace(ctx context.Context) bool {
	namespace, claims, ok := c.batches.next()
	if !ok {
		return false
	}
	live := &livePodList{}
	for _, claim := range claims {
		if err := c.syncPVC(ctx, namespace, claim.name, live); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Error syncing PVC; requeuing", "PVC", klog.KRef(namespace, claim.name))
			c.queue.AddRateLimited(claim.key)
		} else {
			c.queue.Forget(claim.key)
		}
		c.queue.Done(claim.key)
	}
	return true
}

// syncPVC updates the Unused condition of a bound PVC, then removes the
// finalizer of an unused PVC being deleted or adds the missing finalizer.
func (c *Controller) syncPVC(ctx context.Context, namespace, name string, live *livePodList) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Processing PVC", "PVC", klog.KRef(namespace, name))
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished processing PVC", "PVC", klog.KRef(namespace, name), "duration", time.Since(start))
	}()

	pvc, err := c.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("PVC not found, ignoring", "PVC", klog.KRef(namespace, name))
		return nil
	}
	if err != nil {
		return err
	}

	// Only bound claims: a pending one is still being bound by the PV
	// controller, whose status writes must not conflict with ours.
	if c.trackUnused && pvc.DeletionTimestamp == nil && pvc.Status.Phase == v1.ClaimBound {
		used, err := c.isBeingUsed(ctx, pvc, live, podReferencesPVC)
		if err != nil {
			return err
		}
		if pvc, err = c.syncUnusedCondition(ctx, pvc, used); err != nil {
			return err
		}
	}

	inUse := func() (bool, error) { return c.isBeingUsed(ctx, pvc, live, podBlocksDeletion) }
	return c.finalizer().Reconcile(ctx, pvc, inUse, 2)
}

// finalizer writes this controller's finalizer through the client.
func (c *Controller) finalizer() protectionutil.Finalizer[*v1.PersistentVolumeClaim] {
	return protectionutil.Finalizer[*v1.PersistentVolumeClaim]{
		Name: Finalizer,
		Kind: "PVC",
		Update: func(ctx context.Context, obj *v1.PersistentVolumeClaim, opts metav1.UpdateOptions) (*v1.PersistentVolumeClaim, error) {
			return c.client.CoreV1().PersistentVolumeClaims(obj.Namespace).Update(ctx, obj, opts)
		},
		ErrorLogs: true,
	}
}

// pvcAddedUpdated queues a PVC the sync may have to write: one lacking the
// finalizer, one being deleted that still has it, or (with Unused
// tracking) one that has no Unused condition yet.
func (c *Controller) pvcAddedUpdated(logger klog.Logger, obj interface{}) {
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "PVC informer returned non-PVC object", "type", fmt.Sprintf("%T", obj))
		return
	}
	logger.V(4).Info("Got event on PVC", "pvc", klog.KObj(pvc))
	if protectionutil.NeedsWrite(pvc, Finalizer) ||
		c.trackUnused && findCondition(pvc.Status.Conditions, conditionTypeUnused) == nil {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// podAddedDeletedUpdated queues the PVCs a pod event may concern. An update
// can hide a delete and re-create under the same name: the old pod's PVCs
// are then queued as if it had been deleted, or a PVC only it used would be
// kept forever.
func (c *Controller) podAddedDeletedUpdated(logger klog.Logger, old, cur interface{}, deleted bool) {
	pod := podFrom(logger, cur)
	if pod == nil {
		return
	}
	c.enqueuePVCs(logger, pod, deleted)
	if oldPod := podFrom(logger, old); oldPod != nil && oldPod.UID != pod.UID {
		c.enqueuePVCs(logger, oldPod, true)
	}
}

func podFrom(logger klog.Logger, obj interface{}) *v1.Pod {
	if obj == nil {
		return nil
	}
	obj = controller.Untombstone(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "Pod informer returned non-Pod object", "type", fmt.Sprintf("%T", obj))
		return nil
	}
	return pod
}

// enqueuePVCs queues every claim the pod names. Without Unused tracking
// only events that can free a claim matter: a deleted, terminated or
// unscheduled pod.
func (c *Controller) enqueuePVCs(logger klog.Logger, pod *v1.Pod, deleted bool) {
	if !c.trackUnused && !deleted && !isPodTerminated(pod) && pod.Spec.NodeName != "" {
		return
	}
	logger.V(4).Info("Enqueuing PVCs for Pod", "pod", klog.KObj(pod), "podUID", pod.UID)
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		switch {
		case vol.PersistentVolumeClaim != nil:
			c.queue.Add(pod.Namespace + "/" + vol.PersistentVolumeClaim.ClaimName)
		case vol.Ephemeral != nil:
			c.queue.Add(pod.Namespace + "/" + ephemeralutil.VolumeClaimName(pod, vol))
		}
	}
}
