// Package endpointslicemirroring is the EndpointSlice mirroring controller:
// for every Service without a selector whose Endpoints object was written
// by someone else (a user or an external controller), it keeps
// EndpointSlices that mirror that Endpoints object, one per subset and
// address type, so that EndpointSlice consumers see custom endpoints too.
package endpointslicemirroring

import (
	"context"
	"fmt"
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
	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
)

const (
	// ControllerName is the value of the endpointslice.kubernetes.io/managed-by
	// label on the slices this controller manages.
	ControllerName = "endpointslicemirroring-controller.k8s.io"

	// Event reasons, recorded on the Endpoints object.

	// InvalidIPAddress: some addresses are not IPs and were not mirrored.
	InvalidIPAddress = "InvalidIPAddress"
	// TooManyAddressesToMirror: a subset has more addresses than
	// maxEndpointsPerSubset; the rest were not mirrored.
	TooManyAddressesToMirror = "TooManyAddressesToMirror"

	// queueName is the name label of the workqueue_* metrics.
	queueName = "endpoint_slice_mirroring"
	// maxRetries is how often an Endpoints key is retried before it is
	// dropped (until the next event for it).
	maxRetries = 15
	// Backoff is much longer than the controller default: a failing sync
	// can mean many slice writes, which should not hammer the API server.
	defaultSyncBackOff = 1 * time.Second
	maxSyncBackOff     = 100 * time.Second
)

// Controller mirrors custom Endpoints objects into EndpointSlices.
type Controller struct {
	client           clientset.Interface
	eventBroadcaster record.EventBroadcaster

	endpointsLister      corelisters.EndpointsLister
	serviceLister        corelisters.ServiceLister
	endpointSliceLister  discoverylisters.EndpointSliceLister
	endpointsSynced      cache.InformerSynced
	servicesSynced       cache.InformerSynced
	endpointSlicesSynced cache.InformerSynced

	// tracker remembers the slice generations this controller wrote, per
	// Endpoints object, to detect an EndpointSlice cache that lags behind.
	tracker    *endpointsliceutil.EndpointSliceTracker
	reconciler *reconciler

	// queue holds namespace/name keys, shared by an Endpoints object and
	// its Service.
	queue workqueue.TypedRateLimitingInterface[string]
	loop  *controller.WorkLoop[string]

	// endpointUpdatesBatchPeriod delays syncs triggered by EndpointSlice
	// changes, so several of them lead to one sync.
	endpointUpdatesBatchPeriod time.Duration
}

// NewController wires the controller to its informers. At most
// maxEndpointsPerSubset addresses of each Endpoints subset are mirrored.
func NewController(ctx context.Context, endpointsInformer coreinformers.EndpointsInformer,
	endpointSliceInformer discoveryinformers.EndpointSliceInformer,
	serviceInformer coreinformers.ServiceInformer,
	maxEndpointsPerSubset int32,
	client clientset.Interface,
	endpointUpdatesBatchPeriod time.Duration,
) *Controller {
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "endpoint-slice-mirroring-controller")
	logger := klog.FromContext(ctx)

	c := &Controller{
		client:           client,
		eventBroadcaster: broadcaster,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](defaultSyncBackOff, maxSyncBackOff),
				// Overall retry rate, not per key.
				&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName},
		),
		tracker:                    endpointsliceutil.NewEndpointSliceTracker(),
		endpointUpdatesBatchPeriod: endpointUpdatesBatchPeriod,
	}

	_, _ = endpointsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.onEndpointsAdd(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.onEndpointsUpdate(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.onEndpointsDelete(logger, obj) },
	})
	c.endpointsLister = endpointsInformer.Lister()
	c.endpointsSynced = endpointsInformer.Informer().HasSynced

	_, _ = endpointSliceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEndpointSliceAdd,
		UpdateFunc: func(old, cur interface{}) { c.onEndpointSliceUpdate(logger, old, cur) },
		DeleteFunc: c.onEndpointSliceDelete,
	})
	// Its List finds an Endpoints object's mirrored slices through the
	// EndpointSlice Service index.
	c.endpointSliceLister = controller.ServiceIndexedEndpointSliceLister(endpointSliceInformer.Informer())
	c.endpointSlicesSynced = endpointSliceInformer.Informer().HasSynced

	_, _ = serviceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onServiceAdd,
		UpdateFunc: c.onServiceUpdate,
		DeleteFunc: c.onServiceDelete,
	})
	c.serviceLister = serviceInformer.Lister()
	c.servicesSynced = serviceInformer.Informer().HasSynced

	c.reconciler = &reconciler{
		client:                client,
		tracker:               c.tracker,
		eventRecorder:         recorder,
		maxEndpointsPerSubset: maxEndpointsPerSubset,
		metrics:               newMetricsCache(maxEndpointsPerSubset),
	}
	c.loop = &controller.WorkLoop[string]{
		Name:       queueName,
		Queue:      c.queue,
		Sync:       c.syncEndpoints,
		MaxRetries: maxRetries,
	}
	return c
}

// Run starts workers after the caches have synced and blocks until ctx is
// done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(c.eventBroadcaster, c.client)
	defer stopEvents()
	c.loop.Run(ctx, workers, c.endpointsSynced, c.endpointSlicesSynced, c.servicesSynced)
}

func (c *Controller) syncEndpoints(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		endpointsSyncDuration.WithLabelValues().Observe(time.Since(start).Seconds())
		logger.V(4).Info("Finished syncing EndpointSlices for Endpoints", "key", key, "elapsedTime", time.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	ep, err := c.endpointsLister.Endpoints(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(4).Info("Endpoints not found, cleaning up any mirrored EndpointSlices", "endpoints", klog.KRef(namespace, name))
		return c.deleteMirroredSlices(ctx, namespace, name)
	case err != nil:
		return err
	case !shouldMirror(ep):
		logger.V(4).Info("Endpoints should not be mirrored, cleaning up any mirrored EndpointSlices", "endpoints", klog.KRef(namespace, name))
		return c.deleteMirroredSlices(ctx, namespace, name)
	}

	svc, err := c.serviceLister.Services(namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(4).Info("Service not found, cleaning up any mirrored EndpointSlices", "service", klog.KRef(namespace, name))
		return c.deleteMirroredSlices(ctx, namespace, name)
	case err != nil:
		return err
	case svc.Spec.Selector != nil:
		// The EndpointSlice controller owns the endpoints of a Service
		// with a selector.
		logger.V(4).Info("Service has a selector, cleaning up any mirrored EndpointSlices", "service", klog.KRef(namespace, name))
		return c.deleteMirroredSlices(ctx, namespace, name)
	}

	slices, err := c.mirroredSlices(namespace, name)
	if err != nil {
		return err
	}
	if c.tracker.StaleSlices(svc, slices) {
		return endpointslice.NewStaleInformerCache("EndpointSlice informer cache is out of date")
	}
	return c.reconciler.reconcile(ctx, ep, slices)
}

// deleteMirroredSlices removes all slices mirrored for namespace/name.
func (c *Controller) deleteMirroredSlices(ctx context.Context, namespace, name string) error {
	slices, err := c.mirroredSlices(namespace, name)
	if err != nil {
		return err
	}
	// Nothing of this Endpoints object is tracked anymore: the deletes are
	// not expected generations, and their events are ignored.
	c.tracker.DeleteService(namespace, name)
	return c.reconciler.deleteAll(ctx, namespace, name, slices)
}

// mirroredSlices lists the slices this controller mirrored for the
// Endpoints object namespace/name.
func (c *Controller) mirroredSlices(namespace, name string) ([]*discovery.EndpointSlice, error) {
	selector := labels.Set{
		discovery.LabelServiceName: name,
		discovery.LabelManagedBy:   ControllerName,
	}.AsSelectorPreValidated()
	return c.endpointSliceLister.EndpointSlices(namespace).List(selector)
}

func (c *Controller) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	c.queue.Add(key)
}

// Only selector-less Services matter, plus transitions to or from having a
// selector (which start or stop mirroring).

func (c *Controller) onServiceAdd(obj interface{}) {
	if svc, ok := obj.(*v1.Service); ok && svc.Spec.Selector == nil {
		c.enqueue(svc)
	}
}

func (c *Controller) onServiceUpdate(oldObj, curObj interface{}) {
	old, ok1 := oldObj.(*v1.Service)
	cur, ok2 := curObj.(*v1.Service)
	if !ok1 || !ok2 {
		utilruntime.HandleError(fmt.Errorf("onServiceUpdate() expected v1.Service, got %T, %T", oldObj, curObj))
		return
	}
	if (old.Spec.Selector == nil) != (cur.Spec.Selector == nil) {
		c.enqueue(cur)
	}
}

func (c *Controller) onServiceDelete(obj interface{}) {
	svc, ok := fromDeleteEvent[*v1.Service](obj)
	if ok && svc.Spec.Selector == nil {
		c.enqueue(svc)
	}
}

func (c *Controller) onEndpointsAdd(logger klog.Logger, obj interface{}) {
	ep, ok := obj.(*endpoints)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("onEndpointsAdd() expected v1.Endpoints, got %T", obj))
		return
	}
	if !shouldMirror(ep) {
		logger.V(5).Info("Skipping mirroring", "endpoints", klog.KObj(ep))
		return
	}
	c.enqueue(ep)
}

// onEndpointsUpdate also queues an object that stopped being mirrored, so
// its slices are removed.
func (c *Controller) onEndpointsUpdate(logger klog.Logger, oldObj, curObj interface{}) {
	old, ok1 := oldObj.(*endpoints)
	cur, ok2 := curObj.(*endpoints)
	if !ok1 || !ok2 {
		utilruntime.HandleError(fmt.Errorf("onEndpointsUpdate() expected v1.Endpoints, got %T, %T", oldObj, curObj))
		return
	}
	if !shouldMirror(old) && !shouldMirror(cur) {
		logger.V(5).Info("Skipping mirroring", "endpoints", klog.KObj(cur))
		return
	}
	c.enqueue(cur)
}

func (c *Controller) onEndpointsDelete(logger klog.Logger, obj interface{}) {
	ep, ok := fromDeleteEvent[*endpoints](obj)
	if !ok {
		return
	}
	if !shouldMirror(ep) {
		logger.V(5).Info("Skipping mirroring", "endpoints", klog.KObj(ep))
		return
	}
	c.enqueue(ep)
}

// Slice events matter only when they are not the echo of our own writes
// (the tracker knows those), so that a slice changed or deleted by someone
// else is put back.

func (c *Controller) onEndpointSliceAdd(obj interface{}) {
	slice, ok := obj.(*discovery.EndpointSlice)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("onEndpointSliceAdd() expected discovery.EndpointSlice, got %T", obj))
		return
	}
	if managedByController(slice) && c.tracker.ShouldSync(slice) {
		c.queueEndpointsForSlice(slice)
	}
}

func (c *Controller) onEndpointSliceUpdate(logger klog.Logger, oldObj, curObj interface{}) {
	old, ok1 := oldObj.(*discovery.EndpointSlice)
	cur, ok2 := curObj.(*discovery.EndpointSlice)
	if !ok1 || !ok2 {
		utilruntime.HandleError(fmt.Errorf("onEndpointSliceUpdate() expected discovery.EndpointSlice, got %T, %T", oldObj, curObj))
		return
	}
	// Label changes do not bump the generation, so a slice moved to
	// another Service is caught here, for both Services.
	if cur.Labels[discovery.LabelServiceName] != old.Labels[discovery.LabelServiceName] {
		logger.Info("Label changed", "label", discovery.LabelServiceName,
			"oldName", old.Labels[discovery.LabelServiceName], "newName", cur.Labels[discovery.LabelServiceName],
			"endpointSlice", klog.KObj(cur))
		c.queueEndpointsForSlice(cur)
		c.queueEndpointsForSlice(old)
		return
	}
	if managedByController(old) != managedByController(cur) ||
		(managedByController(cur) && c.tracker.ShouldSync(cur)) {
		c.queueEndpointsForSlice(cur)
	}
}

func (c *Controller) onEndpointSliceDelete(obj interface{}) {
	slice, ok := fromDeleteEvent[*discovery.EndpointSlice](obj)
	if !ok || !managedByController(slice) || !c.tracker.Has(slice) {
		return
	}
	// A deletion we did not do: mirror the slice again.
	if !c.tracker.HandleDeletion(slice) {
		c.queueEndpointsForSlice(slice)
	}
}

func (c *Controller) queueEndpointsForSlice(slice *discovery.EndpointSlice) {
	key, err := endpointslice.ServiceControllerKey(slice)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err))
		return
	}
	c.queue.AddAfter(key, c.endpointUpdatesBatchPeriod)
}
