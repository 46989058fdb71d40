// Package attachdetach implements the persistentvolume-attach-detach-controller:
// it attaches the volumes that pods scheduled to managed nodes need, and
// detaches them once no pod needs them and the node has unmounted them.
//
// A node is managed when it carries the
// volumes.kubernetes.io/controller-managed-attach-detach annotation (any
// value; the kubelet sets "true"). CSI persistent volumes are attached by
// creating a VolumeAttachment for the driver's external-attacher, unless
// the CSIDriver says attachRequired: false; iSCSI and Fibre Channel
// volumes are "attached" without any API object. What is attached is
// published in each node's status.volumesAttached, which kubelets wait for
// before mounting.
//
// In-tree volume sources with a CSI driver (GCE PD, AWS EBS, Azure Disk
// and File, Cinder, vSphere, Portworx) are translated with
// k8s.io/csi-translation-lib and attached through that driver, as upstream
// does with CSI migration complete. FlexVolume drivers in the flex volume
// plugin directory that advertise attach are called to attach, detach and
// check volumes.
package attachdetach

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	kcache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/operations"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
)

const (
	// ControllerName is the events' source component.
	ControllerName = "attachdetach-controller"
	// ControllerManagedAttachAnnotation marks a node whose volumes this
	// controller attaches (rather than its kubelet).
	ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"
	// pvcQueueName names the PVC queue in workqueue metrics.
	pvcQueueName = "pvcs"
)

// TimerConfig holds the controller's internal periods. Production uses
// DefaultTimerConfig; tests shorten them.
type TimerConfig struct {
	// ReconcilerLoopPeriod is how often the reconciler compares desired
	// and actual state.
	ReconcilerLoopPeriod time.Duration
	// ReconcilerMaxWaitForUnmountDuration is how long a volume no pod
	// needs may stay mounted (per node status) before it is detached
	// anyway from a node that is not Ready.
	ReconcilerMaxWaitForUnmountDuration time.Duration
	// DesiredStateOfWorldPopulatorLoopSleepPeriod is how often the
	// populator drops pods that are gone from the desired state.
	DesiredStateOfWorldPopulatorLoopSleepPeriod time.Duration
	// DesiredStateOfWorldPopulatorListPodsRetryDuration is how often the
	// populator re-adds every active pod.
	DesiredStateOfWorldPopulatorListPodsRetryDuration time.Duration
}

// DefaultTimerConfig is upstream's production timing.
var DefaultTimerConfig = TimerConfig{
	ReconcilerLoopPeriod:                              100 * time.Millisecond,
	ReconcilerMaxWaitForUnmountDuration:               6 * time.Minute,
	DesiredStateOfWorldPopulatorLoopSleepPeriod:       1 * time.Minute,
	DesiredStateOfWorldPopulatorListPodsRetryDuration: 3 * time.Minute,
}

// Controller attaches and detaches volumes for managed nodes.
type Controller struct {
	kubeClient clientset.Interface

	podLister  corelisters.PodLister
	podIndexer kcache.Indexer
	nodeLister corelisters.NodeLister
	pvcLister  corelisters.PersistentVolumeClaimLister
	pvLister   corelisters.PersistentVolumeLister
	vaLister   storagelisters.VolumeAttachmentLister
	synced     []kcache.InformerSynced

	plugins  *plugins.Manager
	specs    volumeSpecs
	dsw      *cache.DesiredStateOfWorld
	asw      *cache.ActualStateOfWorld
	executor *operations.Executor

	reconciler    *reconciler
	populator     *populator
	statusUpdater *nodeStatusUpdater

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	pvcQueue workqueue.TypedRateLimitingInterface[string]
	pvcLoop  controller.WorkLoop[string]
}

// NewController wires the controller to the shared informers.
// The controller manager gives it the "attachdetach-controller" client.
// CSINodes are only waited for: with CSI migration complete for every
// in-tree plugin, translation does not depend on the node, as upstream.
// FlexVolume drivers are looked for in flexVolumePluginDir (created if
// missing; an unusable directory only disables FlexVolume).
func NewController(
	ctx context.Context,
	kubeClient clientset.Interface,
	podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer,
	pvcInformer coreinformers.PersistentVolumeClaimInformer,
	pvInformer coreinformers.PersistentVolumeInformer,
	csiNodeInformer storageinformers.CSINodeInformer,
	csiDriverInformer storageinformers.CSIDriverInformer,
	volumeAttachmentInformer storageinformers.VolumeAttachmentInformer,
	flexVolumePluginDir string,
	disableReconciliationSync bool,
	reconcilerSyncDuration time.Duration,
	disableForceDetachOnTimeout bool,
	timerConfig TimerConfig,
) (*Controller, error) {
	logger := klog.FromContext(ctx)
	adc := &Controller{
		kubeClient: kubeClient,
		podLister:  podInformer.Lister(),
		podIndexer: podInformer.Informer().GetIndexer(),
		nodeLister: nodeInformer.Lister(),
		pvcLister:  pvcInformer.Lister(),
		pvLister:   pvInformer.Lister(),
		vaLister:   volumeAttachmentInformer.Lister(),
		synced: []kcache.InformerSynced{
			podInformer.Informer().HasSynced,
			nodeInformer.Informer().HasSynced,
			pvcInformer.Informer().HasSynced,
			pvInformer.Informer().HasSynced,
			csiNodeInformer.Informer().HasSynced,
			csiDriverInformer.Informer().HasSynced,
			volumeAttachmentInformer.Informer().HasSynced,
		},
		pvcQueue: controller.NewNamedQueue(pvcQueueName),
	}
	adc.pvcLoop = controller.WorkLoop[string]{Name: pvcQueueName, Queue: adc.pvcQueue, Sync: adc.syncPVC}
	adc.specs = volumeSpecs{pvcLister: adc.pvcLister, pvLister: adc.pvLister}
	adc.plugins = plugins.NewManager(
		plugins.FC{},
		plugins.ISCSI{},
		plugins.NewCSI(kubeClient, csiDriverInformer.Lister(), adc.vaLister),
	)
	if prober, err := plugins.NewFlexProber(logger, flexVolumePluginDir, plugins.DefaultFlexRescanPeriod); err != nil {
		logger.Error(err, "Error initializing dynamic plugin prober")
	} else {
		adc.plugins.SetProber(logger, prober)
	}
	adc.broadcaster, adc.recorder = controller.NewEventRecorder(ctx, ControllerName)
	adc.dsw = cache.NewDesiredStateOfWorld(adc.plugins)
	adc.asw = cache.NewActualStateOfWorld(adc.plugins)
	adc.executor = operations.NewExecutor(kubeClient, adc.plugins, adc.recorder)
	adc.statusUpdater = &nodeStatusUpdater{client: kubeClient, nodeLister: adc.nodeLister, asw: adc.asw}
	adc.reconciler = &reconciler{
		loopPeriod:                  timerConfig.ReconcilerLoopPeriod,
		maxWaitForUnmountDuration:   timerConfig.ReconcilerMaxWaitForUnmountDuration,
		syncDuration:                reconcilerSyncDuration,
		disableReconciliationSync:   disableReconciliationSync,
		disableForceDetachOnTimeout: disableForceDetachOnTimeout,
		dsw:                         adc.dsw,
		asw:                         adc.asw,
		executor:                    adc.executor,
		statusUpdater:               adc.statusUpdater,
		nodeLister:                  adc.nodeLister,
		recorder:                    adc.recorder,
		timeOfLastSync:              time.Now(),
	}
	adc.populator = &populator{
		loopPeriod:        timerConfig.DesiredStateOfWorldPopulatorLoopSleepPeriod,
		listPodsRetryTime: timerConfig.DesiredStateOfWorldPopulatorListPodsRetryDuration,
		podLister:         adc.podLister,
		dsw:               adc.dsw,
		plugins:           adc.plugins,
		addPod:            adc.processPodVolumes,
	}

	_, err := podInformer.Informer().AddEventHandlerWithOptions(kcache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { adc.podAdd(logger, obj) },
		UpdateFunc: func(_, obj interface{}) { adc.podAdd(logger, obj) },
		DeleteFunc: func(obj interface{}) { adc.podDelete(logger, obj) },
	}, kcache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("could not add pod event handler: %w", err)
	}
	// Pods by claim, to re-add a pod's volumes when its claim binds.
	if err := ephemeral.AddPodPVCIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("could not initialize attach detach controller: %w", err)
	}
	_, err = nodeInformer.Informer().AddEventHandlerWithOptions(kcache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { adc.nodeAdd(logger, obj) },
		UpdateFunc: func(_, obj interface{}) { adc.nodeUpdate(logger, obj) },
		DeleteFunc: func(obj interface{}) { adc.nodeDelete(logger, obj) },
	}, kcache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("could not add node event handler: %w", err)
	}
	_, err = pvcInformer.Informer().AddEventHandlerWithOptions(kcache.ResourceEventHandlerFuncs{
		AddFunc:    adc.enqueuePVC,
		UpdateFunc: func(_, obj interface{}) { adc.enqueuePVC(obj) },
	}, kcache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("could not add pvc event handler: %w", err)
	}
	return adc, nil
}

// Run waits for the caches, rebuilds the actual and desired states from
// the API objects, then runs the reconciler, the populator and the PVC
// worker until ctx is done.
func (adc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(adc.broadcaster, adc.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting attach detach controller")
	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down attach detach controller")
		adc.pvcQueue.ShutDown()
		wg.Wait()
		// Operations watch ctx too; let them finish their bookkeeping.
		adc.executor.Wait()
	}()

	if !controller.WaitForCacheSync(ctx, ControllerName, adc.synced...) {
		return
	}
	if err := adc.populateActualStateOfWorld(logger); err != nil {
		logger.Error(err, "Error populating the actual state of world")
	}
	if err := adc.populateDesiredStateOfWorld(logger); err != nil {
		logger.Error(err, "Error populating the desired state of world")
	}
	registerMetrics(newStateCollector(adc.podLister, adc.specs, adc.plugins, adc.asw, adc.dsw))

	wg.Go(func() { adc.reconciler.run(ctx) })
	wg.Go(func() { adc.populator.run(ctx) })
	wg.Go(func() { adc.pvcLoop.RunWorkers(ctx, 1) })
	<-ctx.Done()
}

// GetDesiredStateOfWorld exposes the desired state, for tests.
func (adc *Controller) GetDesiredStateOfWorld() *cache.DesiredStateOfWorld {
	return adc.dsw
}

// GetActualStateOfWorld exposes the actual state, for tests.
func (adc *Controller) GetActualStateOfWorld() *cache.ActualStateOfWorld {
	return adc.asw
}

func (adc *Controller) podAdd(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod == nil || pod.Spec.NodeName == "" {
		return
	}
	adc.processPodVolumes(logger, pod, wantsVolumes(pod))
}

func (adc *Controller) podDelete(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object type: %T", obj))
		return
	}
	adc.processPodVolumes(logger, pod, false)
}

func (adc *Controller) nodeAdd(logger klog.Logger, obj interface{}) {
	node, ok := obj.(*v1.Node)
	if !ok || node == nil {
		return
	}
	adc.nodeUpdate(logger, node)
	// A (re)created node object lost status.volumesAttached: write it again.
	adc.asw.SetNodeStatusUpdateNeeded(logger, types.NodeName(node.Name))
}

func (adc *Controller) nodeUpdate(logger klog.Logger, obj interface{}) {
	node, ok := obj.(*v1.Node)
	if !ok || node == nil {
		return
	}
	adc.addNodeToDSW(node)
	adc.processVolumesInUse(logger, types.NodeName(node.Name), node.Status.VolumesInUse)
}

func (adc *Controller) nodeDelete(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	node, ok := obj.(*v1.Node)
	if !ok || node == nil {
		return
	}
	name := types.NodeName(node.Name)
	if err := adc.dsw.DeleteNode(name); err != nil {
		// Normal while a drained node still has pods' volumes.
		logger.Info("Error removing node from desired-state-of-world", "node", klog.KObj(node), "err", err)
	}
	adc.processVolumesInUse(logger, name, node.Status.VolumesInUse)
}

// addNodeToDSW manages the node if it asks for controller attach/detach.
// Nodes are never unmanaged while they exist, as upstream.
func (adc *Controller) addNodeToDSW(node *v1.Node) {
	if _, ok := node.Annotations[ControllerManagedAttachAnnotation]; ok {
		adc.dsw.AddNode(types.NodeName(node.Name))
	}
}

func (adc *Controller) processVolumesInUse(logger klog.Logger, node types.NodeName, inUse []v1.UniqueVolumeName) {
	logger.V(4).Info("processVolumesInUse for node", "node", klog.KRef("", string(node)))
	adc.asw.SetVolumesMountedByNode(logger, inUse, node)
}

func (adc *Controller) enqueuePVC(obj interface{}) {
	key, err := kcache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	adc.pvcQueue.Add(key)
}

// syncPVC re-adds the volumes of the running, scheduled pods using a
// claim once it is bound: a pod seen before its claim bound had nothing
// to attach then.
func (adc *Controller) syncPVC(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	logger.V(5).Info("syncPVCByKey", "pvcKey", key)
	namespace, name, err := kcache.SplitMetaNamespaceKey(key)
	if err != nil {
		logger.V(4).Info("Error getting namespace & name of pvc to get pvc from informer", "pvcKey", key, "err", err)
		return nil
	}
	pvc, err := adc.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("Error getting pvc from informer", "pvcKey", key, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	pods, err := ephemeral.PodsForPVC(adc.podIndexer, namespace, name)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || isPodTerminated(pod) {
			continue
		}
		adc.processPodVolumes(logger, pod, wantsVolumes(pod))
	}
	return nil
}

// populateActualStateOfWorld rebuilds what is attached from the nodes'
// status.volumesAttached (without specs: a volume no pod claims is
// detached by its unique name alone) and from VolumeAttachments not
// reported by any node (marked uncertain, so that they are attached again
// if wanted and deleted otherwise).
func (adc *Controller) populateActualStateOfWorld(logger klog.Logger) error {
	logger.V(5).Info("Populating ActualStateOfworld")
	nodes, err := adc.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, node := range nodes {
		name := types.NodeName(node.Name)
		for _, av := range node.Status.VolumesAttached {
			if err := adc.asw.MarkVolumeAsAttached(logger, av.Name, nil, name, av.DevicePath); err != nil {
				logger.Error(err, "Failed to mark the volume as attached")
			}
		}
		adc.asw.SetVolumesMountedByNode(logger, node.Status.VolumesInUse, name)
		adc.addNodeToDSW(node)
	}
	if err := adc.processVolumeAttachments(logger); err != nil {
		logger.Error(err, "Failed to process volume attachments")
		return err
	}
	return nil
}

func (adc *Controller) processVolumeAttachments(logger klog.Logger) error {
	vas, err := adc.vaLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Failed to list VolumeAttachment objects")
		return err
	}
	for _, va := range vas {
		node := types.NodeName(va.Spec.NodeName)
		pvName := va.Spec.Source.PersistentVolumeName
		if pvName == nil {
			logger.Info("Skipping the va as its pvName is nil", "node", klog.KRef("", string(node)), "vaName", va.Name)
			continue
		}
		pv, err := adc.pvLister.Get(*pvName)
		if err != nil {
			logger.Error(err, "Unable to lookup pv object", "PV", klog.KRef("", *pvName))
			continue
		}
		spec := plugins.SpecFromPV(pv.DeepCopy(), false)
		var p plugins.Plugin
		if inTree := plugins.InTreePluginName(spec); inTree != "" {
			// The CSI plugin handles it whether or not its driver still
			// requires attach: the attachment must be cleaned up anyway.
			p, _ = adc.plugins.FindByName(plugins.CSIPluginName)
			// Azure File names do not depend on the namespace here.
			spec, err = plugins.TranslateInTreeSpecToCSI(logger, spec, "")
			if err != nil {
				logger.Error(err, "Failed to translate intree volumeSpec to CSI volumeSpec for volume", "node", klog.KRef("", string(node)), "inTreePluginName", inTree, "vaName", va.Name, "PV", klog.KRef("", *pvName))
				continue
			}
		}
		if p == nil {
			p, err = adc.plugins.FindAttachableBySpec(spec)
			if err != nil || p == nil {
				logger.Info("Skipping processing the volume on node, no attacher interface found", "node", klog.KRef("", string(node)), "PV", klog.KRef("", *pvName), "err", err)
				continue
			}
		}
		volumeName, err := plugins.UniqueVolumeName(p, spec)
		if err != nil {
			logger.Error(err, "Failed to find unique name for volume", "node", klog.KRef("", string(node)), "vaName", va.Name, "PV", klog.KRef("", *pvName))
			continue
		}
		if state := adc.asw.GetAttachState(volumeName, node); state == cache.AttachStateDetached {
			logger.V(1).Info("Marking volume attachment as uncertain as volume is not attached", "node", klog.KRef("", string(node)), "volumeName", volumeName, "attachState", state)
			if err := adc.asw.MarkVolumeAsUncertain(logger, volumeName, spec, node); err != nil {
				logger.Error(err, "MarkVolumeAsUncertain fail to add the volume to ASW", "node", klog.KRef("", string(node)), "volumeName", volumeName)
			}
		}
	}
	return nil
}

// populateDesiredStateOfWorld adds every pod's volumes and gives the
// attached volumes found at start-up the specs of the pods using them.
func (adc *Controller) populateDesiredStateOfWorld(logger klog.Logger) error {
	logger.V(5).Info("Populating DesiredStateOfworld")
	pods, err := adc.podLister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, pod := range pods {
		adc.podAdd(logger, pod)
		node := types.NodeName(pod.Spec.NodeName)
		for _, podVolume := range pod.Spec.Volumes {
			spec, err := adc.specs.forPodVolume(logger, podVolume, pod)
			if err != nil {
				logger.Error(err, "Error creating spec for volume of pod", "pod", klog.KObj(pod), "volumeName", podVolume.Name)
				continue
			}
			p, err := adc.plugins.FindAttachableBySpec(spec)
			if err != nil || p == nil {
				logger.V(10).Info("Skipping volume for pod: it does not implement attacher interface", "pod", klog.KObj(pod), "volumeName", podVolume.Name, "err", err)
				continue
			}
			volumeName, err := plugins.UniqueVolumeName(p, spec)
			if err != nil {
				logger.Error(err, "Failed to find unique name for volume of pod", "pod", klog.KObj(pod), "volumeName", podVolume.Name)
				continue
			}
			if adc.asw.GetAttachState(volumeName, node) != cache.AttachStateAttached {
				continue
			}
			logger.V(10).Info("Volume is attached to node. Marking as attached in ActualStateOfWorld", "node", klog.KRef("", string(node)), "volumeName", volumeName)
			devicePath, err := adc.nodeVolumeDevicePath(volumeName, node)
			if err != nil {
				logger.Error(err, "Failed to find device path")
				continue
			}
			if err := adc.asw.MarkVolumeAsAttached(logger, volumeName, spec, node, devicePath); err != nil {
				logger.Error(err, "Failed to update volume spec for node", "node", klog.KRef("", string(node)))
			}
		}
	}
	return nil
}

// nodeVolumeDevicePath is the device path the node reports for the volume.
func (adc *Controller) nodeVolumeDevicePath(volume v1.UniqueVolumeName, nodeName types.NodeName) (string, error) {
	node, err := adc.nodeLister.Get(string(nodeName))
	if err != nil {
		return "", err
	}
	for _, av := range node.Status.VolumesAttached {
		if av.Name == volume {
			return av.DevicePath, nil
		}
	}
	return "", fmt.Errorf("Volume %s not found on node %s", volume, nodeName) //nolint:staticcheck // upstream's message
}
