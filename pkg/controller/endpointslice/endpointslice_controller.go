// Package endpointslice is the EndpointSlice controller: for every Service
// with a selector it maintains EndpointSlices (one group per address family
// and port mapping, at most maxEndpointsPerSlice endpoints each) listing the
// selected pods, owned by the Service so the garbage collector removes them
// with it.
package endpointslice

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
	// label on the slices this controller manages.
	ControllerName = "endpointslice-controller.k8s.io"

	// maxRetries is how often a Service is retried before it is dropped
	// (until the next event for it).
	maxRetries = 15
	// endpointSliceChangeMinSyncDelay is the least delay before a Service
	// is synced after a change to one of its slices.
	endpointSliceChangeMinSyncDelay = 1 * time.Second
	defaultSyncBackOff              = 1 * time.Second
	maxSyncBackOff                  = 1000 * time.Second
	// topologyQueueItemKey is the only key of the topology queue: any node
	// change triggers one recomputation of the zone CPU shares.
	topologyQueueItemKey = "topologyQueueItemKey"
)

// Controller manages the EndpointSlices of selector-based Services.
type Controller struct {
	client           clientset.Interface
	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder

	serviceLister corelisters.ServiceLister
	// serviceIndexer finds the Services selecting a pod by its labels.
	serviceIndexer       cache.Indexer
	podLister            corelisters.PodLister
	nodeLister           corelisters.NodeLister
	endpointSliceLister  discoverylisters.EndpointSliceLister
	servicesSynced       cache.InformerSynced
	podsSynced           cache.InformerSynced
	nodesSynced          cache.InformerSynced
	endpointSlicesSynced cache.InformerSynced

	tracker            *endpointsliceutil.EndpointSliceTracker
	triggerTimeTracker *endpointsliceutil.TriggerTimeTracker
	reconciler         *reconciler

	serviceQueue  workqueue.TypedRateLimitingInterface[string]
	podQueue      workqueue.TypedRateLimitingInterface[*endpointsliceutil.PodProjectionKey]
	topologyQueue workqueue.TypedRateLimitingInterface[string]
	topology      *topologyCache
	serviceLoop   *controller.WorkLoop[string]
	podLoop       *controller.WorkLoop[*endpointsliceutil.PodProjectionKey]
	topologyLoop  *controller.WorkLoop[string]

	maxEndpointsPerSlice       int32
	endpointUpdatesBatchPeriod time.Duration
}

// NewController wires the controller to its informers. Pod events are
// batched for endpointUpdatesBatchPeriod before the Service is synced.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer,
	serviceInformer coreinformers.ServiceInformer,
	nodeInformer coreinformers.NodeInformer,
	endpointSliceInformer discoveryinformers.EndpointSliceInformer,
	maxEndpointsPerSlice int32,
	client clientset.Interface,
	endpointUpdatesBatchPeriod time.Duration,
) *Controller {
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "endpoint-slice-controller")

	c := &Controller{
		client:           client,
		eventBroadcaster: broadcaster,
		eventRecorder:    recorder,
		serviceQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](defaultSyncBackOff, maxSyncBackOff),
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpoint_slice"},
		),
		// Unnamed as upstream: no workqueue metrics for the pod queue.
		podQueue:                   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[*endpointsliceutil.PodProjectionKey]()),
		topologyQueue:              workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		topology:                   newTopologyCache(),
		tracker:                    endpointsliceutil.NewEndpointSliceTracker(),
		triggerTimeTracker:         endpointsliceutil.NewTriggerTimeTracker(),
		maxEndpointsPerSlice:       maxEndpointsPerSlice,
		endpointUpdatesBatchPeriod: endpointUpdatesBatchPeriod,
	}

	logger := klog.FromContext(ctx)
	_, _ = serviceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueService,
		UpdateFunc: func(_, cur interface{}) { c.enqueueService(cur) },
		DeleteFunc: c.enqueueService,
	})
	c.serviceLister = serviceInformer.Lister()
	c.serviceIndexer = controller.SelectorIndexedServices(serviceInformer.Informer())
	c.servicesSynced = serviceInformer.Informer().HasSynced

	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.onPodUpdate(nil, obj) },
		UpdateFunc: c.onPodUpdate,
		DeleteFunc: func(obj interface{}) { c.onPodUpdate(obj, nil) },
	})
	// Its List finds a selector's pods through the pod labels index.
	c.podLister = controller.LabelIndexedPodLister(podInformer.Informer())
	c.podsSynced = podInformer.Informer().HasSynced

	c.nodeLister = nodeInformer.Lister()
	c.nodesSynced = nodeInformer.Informer().HasSynced
	// Node additions, deletions and readiness or zone changes can overload
	// a zone's topology hints.
	_, _ = nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { c.topologyQueue.Add(topologyQueueItemKey) },
		UpdateFunc: func(old, cur interface{}) {
			o, ok1 := old.(*v1.Node)
			n, ok2 := cur.(*v1.Node)
			if !ok1 || !ok2 || nodeIsReady(o) != nodeIsReady(n) || o.Labels[v1.LabelTopologyZone] != n.Labels[v1.LabelTopologyZone] {
				c.topologyQueue.Add(topologyQueueItemKey)
			}
		},
		DeleteFunc: func(interface{}) { c.topologyQueue.Add(topologyQueueItemKey) },
	})

	_, _ = endpointSliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEndpointSliceAdd,
		UpdateFunc: func(old, cur interface{}) { c.onEndpointSliceUpdate(logger, old, cur) },
		DeleteFunc: c.onEndpointSliceDelete,
	})
	// Its List finds a Service's slices through the EndpointSlice Service index.
	c.endpointSliceLister = controller.ServiceIndexedEndpointSliceLister(endpointSliceInformer.Informer())
	c.endpointSlicesSynced = endpointSliceInformer.Informer().HasSynced

	c.reconciler = &reconciler{
		client:               client,
		nodeLister:           c.nodeLister,
		maxEndpointsPerSlice: maxEndpointsPerSlice,
		tracker:              c.tracker,
		metrics:              newMetricsCache(maxEndpointsPerSlice),
		controllerName:       ControllerName,
		// PreferSameTrafficDistribution is GA (locked on) in v1.37.
		preferSameTrafficDistribution: true,
		topology:                      c.topology,
		eventRecorder:                 recorder,
	}

	c.serviceLoop = &controller.WorkLoop[string]{
		Name:       "endpoint_slice",
		Queue:      c.serviceQueue,
		Sync:       c.syncServiceTracked,
		MaxRetries: maxRetries,
	}
	c.podLoop = &controller.WorkLoop[*endpointsliceutil.PodProjectionKey]{
		Name:       "endpoint_slice_pods",
		Queue:      c.podQueue,
		Sync:       c.syncPod,
		MaxRetries: maxRetries,
	}
	c.topologyLoop = &controller.WorkLoop[string]{
		Name:  "endpoint_slice_topology",
		Queue: c.topologyQueue,
		Sync:  c.checkNodeTopologyDistribution,
	}
	return c
}

// Run starts workers service workers and as many pod workers, after the
// caches have synced, and blocks until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(c.eventBroadcaster, c.client)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting endpoint slice controller")
	defer logger.Info("Shutting down endpoint slice controller")

	if !controller.WaitForCacheSync(ctx, "endpoint_slice", c.podsSynced, c.servicesSynced, c.endpointSlicesSynced, c.nodesSynced) {
		c.serviceQueue.ShutDown()
		c.podQueue.ShutDown()
		c.topologyQueue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.podLoop.RunWorkers(ctx, workers) })
	wg.Go(func() { c.topologyLoop.RunWorkers(ctx, 1) })
	c.serviceLoop.RunWorkers(ctx, workers)
	wg.Wait()
}

// checkNodeTopologyDistribution recomputes the zone CPU shares and
// resyncs the Services whose hints they now overload.
func (c *Controller) checkNodeTopologyDistribution(ctx context.Context, _ string) error {
	logger := klog.FromContext(ctx)
	nodes, err := c.nodeLister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Error listing Nodes")
		return nil
	}
	c.topology.setNodes(logger, nodes)
	for _, key := range c.topology.overloadedServices() {
		logger.V(2).Info("Queuing Service after Node change due to overloading", "key", key)
		c.serviceQueue.Add(key)
	}
	return nil
}

// syncServiceTracked records the endpoint_slice_controller_syncs result.
func (c *Controller) syncServiceTracked(ctx context.Context, key string) error {
	err := c.syncService(ctx, key)
	result := "success"
	if err != nil {
		result = "error"
		if IsStaleInformerCacheErr(err) {
			result = "stale"
		}
	}
	endpointSliceSyncs.WithLabelValues(result).Inc()
	return err
}

func (c *Controller) syncService(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing service endpoint slices", "key", key, "elapsedTime", time.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	service, err := c.serviceLister.Services(namespace).Get(name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		// The slices are owned by the Service: the garbage collector
		// deletes them. Only forget our bookkeeping.
		c.triggerTimeTracker.DeleteService(namespace, name)
		c.reconciler.metrics.deleteService(serviceNN(namespace, name))
		c.tracker.DeleteService(namespace, name)
		return nil
	}
	if service.Spec.Type == v1.ServiceTypeExternalName || service.Spec.Selector == nil {
		// Selectorless Services are left to their owners (or the mirroring
		// controller).
		return nil
	}

	pods, err := c.podLister.Pods(namespace).List(labels.Set(service.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		c.eventRecorder.Eventf(service, v1.EventTypeWarning, "FailedToListPods",
			"Error listing Pods for Service %s/%s: %v", namespace, name, err)
		return err
	}
	sliceSelector := labels.Set{
		discovery.LabelServiceName: service.Name,
		discovery.LabelManagedBy:   ControllerName,
	}.AsSelectorPreValidated()
	slices, err := c.endpointSliceLister.EndpointSlices(namespace).List(sliceSelector)
	if err != nil {
		c.eventRecorder.Eventf(service, v1.EventTypeWarning, "FailedToListEndpointSlices",
			"Error listing Endpoint Slices for Service %s/%s: %v", namespace, name, err)
		return err
	}
	slices = dropSlicesPendingDeletion(slices)

	if c.tracker.StaleSlices(service, slices) {
		return NewStaleInformerCache("EndpointSlice informer cache is out of date")
	}

	triggerTime := c.triggerTimeTracker.ComputeEndpointLastChangeTriggerTime(namespace, service, pods)
	if err := c.reconciler.reconcile(ctx, service, pods, slices, triggerTime); err != nil {
		c.eventRecorder.Eventf(service, v1.EventTypeWarning, "FailedToUpdateEndpointSlices",
			"Error updating Endpoint Slices for Service %s/%s: %v", namespace, name, err)
		return err
	}
	return nil
}

func (c *Controller) syncPod(_ context.Context, key *endpointsliceutil.PodProjectionKey) error {
	services, err := controller.ServicesToUpdate(c.serviceIndexer, key)
	if err != nil {
		return err
	}
	for svc := range services {
		c.serviceQueue.AddAfter(svc, c.endpointUpdatesBatchPeriod)
	}
	return nil
}

func (c *Controller) enqueueService(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.serviceQueue.Add(key)
}

func (c *Controller) onPodUpdate(old, cur interface{}) {
	if key := endpointsliceutil.GetPodUpdateProjectionKey(old, cur); key != nil {
		c.podQueue.Add(key)
	}
}

func (c *Controller) onEndpointSliceAdd(obj interface{}) {
	slice, ok := obj.(*discovery.EndpointSlice)
	if !ok || slice == nil {
		utilruntime.HandleError(fmt.Errorf("invalid EndpointSlice provided to onEndpointSliceAdd()"))
		return
	}
	if c.reconciler.managedByController(slice) && c.tracker.ShouldSync(slice) {
		c.queueServiceForEndpointSlice(slice)
	}
}

func (c *Controller) onEndpointSliceUpdate(logger klog.Logger, oldObj, curObj interface{}) {
	old, ok1 := oldObj.(*discovery.EndpointSlice)
	cur, ok2 := curObj.(*discovery.EndpointSlice)
	if !ok1 || !ok2 || old == nil || cur == nil {
		utilruntime.HandleError(fmt.Errorf("invalid EndpointSlice provided to onEndpointSliceUpdate()"))
		return
	}
	// A moved slice concerns both Services.
	if cur.Labels[discovery.LabelServiceName] != old.Labels[discovery.LabelServiceName] {
		logger.Info("label changed", "label", discovery.LabelServiceName,
			"oldService", old.Labels[discovery.LabelServiceName], "newService", cur.Labels[discovery.LabelServiceName],
			"endpointslice", klog.KObj(cur))
		c.queueServiceForEndpointSlice(cur)
		c.queueServiceForEndpointSlice(old)
		return
	}
	managedByChanged := c.reconciler.managedByController(old) != c.reconciler.managedByController(cur)
	if managedByChanged || (c.reconciler.managedByController(cur) && c.tracker.ShouldSync(cur)) {
		c.queueServiceForEndpointSlice(cur)
	}
}

func (c *Controller) onEndpointSliceDelete(obj interface{}) {
	slice, ok := obj.(*discovery.EndpointSlice)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		if slice, ok = tombstone.Obj.(*discovery.EndpointSlice); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not an EndpointSlice: %#v", obj))
			return
		}
	}
	if slice != nil && c.reconciler.managedByController(slice) && c.tracker.Has(slice) {
		// Someone else deleted a slice we still want: recreate it.
		if !c.tracker.HandleDeletion(slice) {
			c.queueServiceForEndpointSlice(slice)
		}
	}
}

func (c *Controller) queueServiceForEndpointSlice(slice *discovery.EndpointSlice) {
	key, err := ServiceControllerKey(slice)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for EndpointSlice %+v: %w", slice, err))
		return
	}
	delay := endpointSliceChangeMinSyncDelay
	if c.endpointUpdatesBatchPeriod > delay {
		delay = c.endpointUpdatesBatchPeriod
	}
	c.serviceQueue.AddAfter(key, delay)
}

func dropSlicesPendingDeletion(slices []*discovery.EndpointSlice) []*discovery.EndpointSlice {
	out := make([]*discovery.EndpointSlice, 0, len(slices))
	for _, s := range slices {
		if s.DeletionTimestamp == nil {
			out = append(out, s)
		}
	}
	return out
}
