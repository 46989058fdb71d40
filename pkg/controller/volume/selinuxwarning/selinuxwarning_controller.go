// Package selinuxwarning implements the selinux-warning-controller. It
// watches all pods and reports, as events on both pods and as the
// selinux_warning_controller_selinux_volume_conflict metric, pairs of pods
// that use the same volume with SELinux labels or SELinuxChangePolicies
// that cannot both be honoured on one node. It changes no API object.
package selinuxwarning

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
)

const (
	// queueName labels the workqueue metrics, as upstream.
	queueName = "selinux_warning"
	// eventComponent is the source of the events, as upstream.
	eventComponent = "selinux_warning"
)

// Controller keys its queue by pod.
type Controller struct {
	client           clientset.Interface
	podLister        corelisters.PodLister
	podIndexer       cache.Indexer
	podsSynced       cache.InformerSynced
	pvcLister        corelisters.PersistentVolumeClaimLister
	pvcsSynced       cache.InformerSynced
	pvLister         corelisters.PersistentVolumeLister
	pvsSynced        cache.InformerSynced
	csiDriverLister  storagelisters.CSIDriverLister
	csiDriversSynced cache.InformerSynced

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	loop  controller.WorkLoop[cache.ObjectName]

	cache *volumeCache
}

// NewController wires the controller to its informers and registers the
// conflict metric.
func NewController(ctx context.Context, client clientset.Interface,
	podInformer coreinformers.PodInformer,
	pvcInformer coreinformers.PersistentVolumeClaimInformer,
	pvInformer coreinformers.PersistentVolumeInformer,
	csiDriverInformer storageinformers.CSIDriverInformer) (*Controller, error) {
	broadcaster, recorder := controller.NewEventRecorder(ctx, eventComponent)
	c := &Controller{
		client:           client,
		podLister:        podInformer.Lister(),
		podIndexer:       podInformer.Informer().GetIndexer(),
		podsSynced:       podInformer.Informer().HasSynced,
		pvcLister:        pvcInformer.Lister(),
		pvcsSynced:       pvcInformer.Informer().HasSynced,
		pvLister:         pvInformer.Lister(),
		pvsSynced:        pvInformer.Informer().HasSynced,
		csiDriverLister:  csiDriverInformer.Lister(),
		csiDriversSynced: csiDriverInformer.Informer().HasSynced,
		broadcaster:      broadcaster,
		recorder:         recorder,
		queue:            controller.NewNamedTypedQueue[cache.ObjectName](queueName),
		cache:            newVolumeCache(),
	}
	c.loop = controller.WorkLoop[cache.ObjectName]{Name: queueName, Queue: c.queue, Sync: c.sync}

	if err := ephemeral.AddPodPVCIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("could not initialize SELinux warning controller: %w", err)
	}
	logger := klog.FromContext(ctx)
	opts := cache.HandlerOptions{Logger: &logger}
	handlers := []struct {
		informer cache.SharedIndexInformer
		funcs    cache.ResourceEventHandlerFuncs
	}{
		{podInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueuePod,
			UpdateFunc: c.updatePod,
			DeleteFunc: c.enqueuePod,
		}},
		{pvcInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { c.pvcChanged(logger, nil, obj) },
			UpdateFunc: func(old, cur interface{}) { c.pvcChanged(logger, old, cur) },
		}},
		{pvInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { c.pvChanged(logger, nil, obj) },
			UpdateFunc: func(old, cur interface{}) { c.pvChanged(logger, old, cur) },
		}},
		{csiDriverInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    c.addCSIDriver,
			UpdateFunc: c.updateCSIDriver,
			DeleteFunc: c.deleteCSIDriver,
		}},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandlerWithOptions(h.funcs, opts); err != nil {
			return nil, err
		}
	}
	registerMetrics(c.cache)
	return c, nil
}

// Run sends events and syncs pods with workers goroutines until ctx is
// cancelled.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting SELinux warning controller")
	defer logger.Info("Shutting down SELinux warning controller")

	stop := controller.StartEventSink(c.broadcaster, c.client)
	defer stop()

	if !controller.WaitForCacheSync(ctx, queueName, c.podsSynced, c.pvcsSynced, c.pvsSynced, c.csiDriversSynced) {
		c.queue.ShutDown()
		return
	}
	c.loop.RunWorkers(ctx, workers)
}

func (c *Controller) enqueuePod(obj interface{}) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for pod %#v: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// updatePod reacts only to a pod reaching Succeeded or Failed: what the
// controller reads of a pod's spec is immutable, and a finished pod's
// volumes get unmounted, so it leaves the cache.
func (c *Controller) updatePod(old, cur interface{}) {
	oldPod, ok1 := old.(*v1.Pod)
	newPod, ok2 := cur.(*v1.Pod)
	if !ok1 || !ok2 || oldPod.Status.Phase == newPod.Status.Phase {
		return
	}
	if isFinished(newPod) {
		c.enqueuePod(cur)
	}
}

func isFinished(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// pvcChanged requeues the claim's pods once it gets bound.
func (c *Controller) pvcChanged(logger klog.Logger, old, cur interface{}) {
	pvc, ok := cur.(*v1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeName == "" {
		return
	}
	if oldPVC, ok := old.(*v1.PersistentVolumeClaim); ok && oldPVC.Spec.VolumeName == pvc.Spec.VolumeName {
		return
	}
	c.enqueuePodsForPVC(logger, pvc.Namespace, pvc.Name)
}

// pvChanged requeues the pods of the PV's claim once the PV gets bound
// (claimRef with a UID) or re-bound.
func (c *Controller) pvChanged(logger klog.Logger, old, cur interface{}) {
	pv, ok := cur.(*v1.PersistentVolume)
	if !ok || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
		return
	}
	if oldPV, ok := old.(*v1.PersistentVolume); ok && oldPV.Spec.ClaimRef != nil && oldPV.Spec.ClaimRef.UID == pv.Spec.ClaimRef.UID {
		return
	}
	c.enqueuePodsForPVC(logger, pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name)
}

func (c *Controller) enqueuePodsForPVC(logger klog.Logger, namespace, name string) {
	pods, err := ephemeral.PodsForPVC(c.podIndexer, namespace, name)
	if err != nil {
		logger.Error(err, "listing pods from cache")
		return
	}
	for _, pod := range pods {
		c.enqueuePod(pod)
	}
}

// A CSIDriver's seLinuxMount decides whether its volumes are mounted with
// -o context, i.e. whether the pods' labels and policies matter: requeue
// its pods when that may have changed. A missing CSIDriver means false.
func (c *Controller) addCSIDriver(obj interface{}) {
	if d, ok := obj.(*storagev1.CSIDriver); ok {
		c.enqueuePodsForCSIDriver(d.Name)
	}
}

func (c *Controller) updateCSIDriver(old, cur interface{}) {
	oldDriver, ok1 := old.(*storagev1.CSIDriver)
	newDriver, ok2 := cur.(*storagev1.CSIDriver)
	if ok1 && ok2 && ptr.Deref(oldDriver.Spec.SELinuxMount, false) != ptr.Deref(newDriver.Spec.SELinuxMount, false) {
		c.enqueuePodsForCSIDriver(newDriver.Name)
	}
}

func (c *Controller) deleteCSIDriver(obj interface{}) {
	if d, ok := obj.(*storagev1.CSIDriver); ok && ptr.Deref(d.Spec.SELinuxMount, false) {
		c.enqueuePodsForCSIDriver(d.Name)
	}
}

func (c *Controller) enqueuePodsForCSIDriver(driver string) {
	for _, key := range c.cache.podsForCSIDriver(driver) {
		c.queue.Add(key)
	}
}

// sync adds a pod's volumes to the cache, or removes a deleted or finished
// pod from it.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx)
	pod, err := c.podLister.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) || (err == nil && isFinished(pod)) {
		logger.V(4).Info("Deleting pod", "key", key)
		c.cache.deletePod(key)
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncPod(logger, pod)
}

// syncPod handles every mounted volume and returns their errors (unbound
// claims, multiple labels) together, so the pod is retried.
func (c *Controller) syncPod(logger klog.Logger, pod *v1.Pod) error {
	logger.V(4).Info("Syncing pod", "pod", klog.KObj(pod))
	var errs []error
	specs := map[string]*plugins.Spec{}
	for _, vol := range pod.Spec.Volumes {
		spec, err := c.podVolumeSpec(logger, vol, pod)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		specs[vol.Name] = spec
	}
	names, opts := mountedVolumes(pod)
	for _, name := range names {
		spec, ok := specs[name]
		if !ok {
			continue
		}
		if err := c.syncVolume(logger, pod, name, spec, opts[name]); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

func (c *Controller) syncVolume(logger klog.Logger, pod *v1.Pod, name string, spec *plugins.Spec, opts []*v1.SELinuxOptions) error {
	plugin := pluginFor(spec)
	supported, err := c.supportsContextMount(plugin, spec)
	if err != nil {
		return err
	}
	label, err := mountLabel(pod, opts, supported)
	if err != nil {
		var multi *errMultipleLabels
		if errors.As(err, &multi) {
			c.recorder.Eventf(pod, v1.EventTypeWarning, reasonMultipleLabels, "Volume %q is mounted twice with different SELinux labels inside this pod", name)
		}
		return err
	}
	if plugin == "" {
		// Not a volume that pods can share.
		return nil
	}
	volume, err := uniqueVolumeName(plugin, spec)
	if err != nil {
		return err
	}
	// Without a context mount (or a label to mount with) the kubelet
	// relabels recursively whatever the pod asked for.
	policy := podPolicy(pod)
	if !supported || label == "" {
		policy = v1.SELinuxChangePolicyRecursive
	}
	logger.V(4).Info("Syncing pod volume", "pod", klog.KObj(pod), "volume", spec.Name(), "label", label, "uniqueVolumeName", volume, "changePolicy", policy)
	conflicts := c.cache.addVolume(volume, cache.MetaObjectToName(pod), label, policy, csiDriverName(spec))
	c.reportConflicts(logger, conflicts)
	return nil
}

// reportConflicts emits one event per conflict on its pod. When a pod is
// gone the conflict is moot, and the rest of the batch is dropped too.
func (c *Controller) reportConflicts(logger klog.Logger, conflicts []Conflict) {
	for _, conflict := range conflicts {
		pod, err := c.podLister.Pods(conflict.Pod.Namespace).Get(conflict.Pod.Name)
		if err != nil {
			logger.V(2).Info("failed to get first pod for event", "pod", conflict.Pod, "err", err)
			return
		}
		c.recorder.Event(pod, v1.EventTypeNormal, conflict.EventReason, conflict.EventMessage())
	}
}
