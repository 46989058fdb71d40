// Package endpoint is the Endpoints controller: for every Service with a
// selector it keeps a core/v1 Endpoints object of the same name listing the
// selected pods (ready ones in addresses, the others in notReadyAddresses),
// truncated to 1000 addresses, and deletes it with the Service.
package endpoint

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// maxRetries is how often a Service is retried before it is dropped.
	maxRetries = 15
	// maxCapacity is the most addresses an Endpoints object keeps.
	maxCapacity = 1000
	// truncated is the value of the over-capacity annotation.
	truncated = "truncated"

	// LabelManagedBy marks the Endpoints this controller manages.
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	// ControllerName is the LabelManagedBy value and the event source.
	ControllerName = "endpoint-controller"
)

// Controller manages the Endpoints of selector-based Services.
type Controller struct {
	client           clientset.Interface
	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder

	serviceLister corelisters.ServiceLister
	// serviceIndexer finds the Services selecting a pod by its labels.
	serviceIndexer  cache.Indexer
	podLister       corelisters.PodLister
	endpointsLister corelisters.EndpointsLister
	servicesSynced  cache.InformerSynced
	podsSynced      cache.InformerSynced
	endpointsSynced cache.InformerSynced

	staleEndpoints     *staleEndpointsTracker
	triggerTimeTracker *endpointsliceutil.TriggerTimeTracker

	queue    workqueue.TypedRateLimitingInterface[string]
	podQueue workqueue.TypedRateLimitingInterface[*endpointsliceutil.PodProjectionKey]
	loop     *controller.WorkLoop[string]
	podLoop  *controller.WorkLoop[*endpointsliceutil.PodProjectionKey]

	endpointUpdatesBatchPeriod time.Duration
}

// NewController wires the controller to its informers.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, serviceInformer coreinformers.ServiceInformer,
	endpointsInformer coreinformers.EndpointsInformer, client clientset.Interface, endpointUpdatesBatchPeriod time.Duration) *Controller {
	broadcaster, recorder := controller.NewEventRecorder(ctx, ControllerName)
	e := &Controller{
		client:                     client,
		eventBroadcaster:           broadcaster,
		eventRecorder:              recorder,
		queue:                      controller.NewNamedQueue("endpoint"),
		podQueue:                   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[*endpointsliceutil.PodProjectionKey]()),
		staleEndpoints:             newStaleEndpointsTracker(),
		triggerTimeTracker:         endpointsliceutil.NewTriggerTimeTracker(),
		endpointUpdatesBatchPeriod: endpointUpdatesBatchPeriod,
	}

	_, _ = serviceInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.enqueue,
		UpdateFunc: func(_, cur interface{}) { e.enqueue(cur) },
		DeleteFunc: e.enqueue,
	})
	e.serviceLister = serviceInformer.Lister()
	e.serviceIndexer = controller.SelectorIndexedServices(serviceInformer.Informer())
	e.servicesSynced = serviceInformer.Informer().HasSynced

	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { e.onPodUpdate(nil, obj) },
		UpdateFunc: e.onPodUpdate,
		DeleteFunc: func(obj interface{}) { e.onPodUpdate(obj, nil) },
	})
	// Its List finds a selector's pods through the pod labels index.
	e.podLister = controller.LabelIndexedPodLister(podInformer.Informer())
	e.podsSynced = podInformer.Informer().HasSynced

	// A deleted Endpoints is recreated if its Service still wants it.
	_, _ = endpointsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: e.enqueue,
	})
	e.endpointsLister = endpointsInformer.Lister()
	e.endpointsSynced = endpointsInformer.Informer().HasSynced

	e.loop = &controller.WorkLoop[string]{Name: "endpoint", Queue: e.queue, Sync: e.syncService, MaxRetries: maxRetries}
	e.podLoop = &controller.WorkLoop[*endpointsliceutil.PodProjectionKey]{Name: "endpoint_pods", Queue: e.podQueue, Sync: e.syncPod, MaxRetries: maxRetries}
	return e
}

// Run starts the workers after the caches synced, queues every existing
// Endpoints once (to delete those whose Service is gone), and blocks until
// ctx is done.
func (e *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(e.eventBroadcaster, e.client)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting endpoint controller")
	defer logger.Info("Shutting down endpoint controller")

	if !controller.WaitForCacheSync(ctx, "endpoint", e.podsSynced, e.servicesSynced, e.endpointsSynced) {
		e.queue.ShutDown()
		e.podQueue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.podLoop.RunWorkers(ctx, workers) })
	wg.Go(e.checkLeftoverEndpoints)
	e.loop.RunWorkers(ctx, workers)
	wg.Wait()
}

func (e *Controller) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	e.queue.Add(key)
}

func (e *Controller) onPodUpdate(old, cur interface{}) {
	if key := endpointsliceutil.GetPodUpdateProjectionKey(old, cur); key != nil {
		e.podQueue.Add(key)
	}
}

func (e *Controller) syncPod(_ context.Context, key *endpointsliceutil.PodProjectionKey) error {
	services, err := controller.ServicesToUpdate(e.serviceIndexer, key)
	if err != nil {
		return err
	}
	for svc := range services {
		e.queue.AddAfter(svc, e.endpointUpdatesBatchPeriod)
	}
	return nil
}

// checkLeftoverEndpoints queues every Endpoints object (except leader
// election locks) so those of deleted Services get cleaned up.
func (e *Controller) checkLeftoverEndpoints() {
	list, err := e.endpointsLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("unable to list endpoints (%w); orphaned endpoints will not be cleaned up", err))
		return
	}
	for _, ep := range list {
		if _, ok := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; ok {
			continue
		}
		e.enqueue(ep)
	}
}

func (e *Controller) syncService(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	defer func() {
		logger.V(4).Info("Finished syncing service endpoints", "service", klog.KRef(namespace, name), "startTime", time.Since(start))
	}()

	service, err := e.serviceLister.Services(namespace).Get(name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		// Endpoints carry no owner reference: delete them ourselves.
		err = e.client.CoreV1().Endpoints(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		e.triggerTimeTracker.DeleteService(namespace, name)
		e.staleEndpoints.Delete(namespace, name)
		return nil
	}
	if service.Spec.Type == v1.ServiceTypeExternalName || service.Spec.Selector == nil {
		return nil
	}

	pods, err := e.podLister.Pods(namespace).List(labels.Set(service.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		return err
	}
	triggerTime := e.triggerTimeTracker.ComputeEndpointLastChangeTriggerTime(namespace, service, pods)
	subsets, ready, notReady := desiredSubsets(logger, service, pods)

	current, err := e.endpointsLister.Endpoints(namespace).Get(name)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		current = &endpoints{ObjectMeta: metav1.ObjectMeta{Name: service.Name, Labels: service.Labels}}
	} else if e.staleEndpoints.IsStale(current) {
		return fmt.Errorf("endpoints informer cache is out of date, resource version %s already processed for endpoints %s", current.ResourceVersion, key)
	}

	create := current.ResourceVersion == ""
	if !create &&
		(subsetsEqualIgnoringResourceVersion(current.Subsets, subsets) ||
			subsetsEqualIgnoringResourceVersion(RepackSubsets(current.Subsets), subsets)) &&
		labelsCorrect(current.Labels, service.Labels) &&
		capacityAnnotationCorrect(current.Annotations, current.Subsets) {
		logger.V(5).Info("endpoints are equal, skipping update", "service", klog.KObj(service))
		return nil
	}

	desired := current.DeepCopy()
	desired.Subsets = subsets
	desired.Labels = copyLabels(service.Labels)
	if desired.Annotations == nil {
		desired.Annotations = map[string]string{}
	}
	if triggerTime.IsZero() {
		delete(desired.Annotations, v1.EndpointsLastChangeTriggerTime)
	} else {
		desired.Annotations[v1.EndpointsLastChangeTriggerTime] = triggerTime.UTC().Format(time.RFC3339Nano)
	}
	if truncateEndpoints(desired) {
		desired.Annotations[v1.EndpointsOverCapacity] = truncated
	} else {
		delete(desired.Annotations, v1.EndpointsOverCapacity)
	}
	if service.Spec.ClusterIP == v1.ClusterIPNone || service.Spec.ClusterIP == "" {
		desired.Labels[v1.IsHeadlessService] = ""
	} else {
		delete(desired.Labels, v1.IsHeadlessService)
	}
	desired.Labels[LabelManagedBy] = ControllerName

	logger.V(4).Info("Update endpoints", "service", klog.KObj(service), "readyEndpoints", ready, "notreadyEndpoints", notReady)
	var updated *endpoints
	if create {
		_, err = e.client.CoreV1().Endpoints(namespace).Create(ctx, desired, metav1.CreateOptions{})
	} else {
		updated, err = e.client.CoreV1().Endpoints(namespace).Update(ctx, desired, metav1.UpdateOptions{})
	}
	if err != nil {
		if create && apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			return nil
		}
		if create {
			e.eventRecorder.Eventf(desired, v1.EventTypeWarning, "FailedToCreateEndpoint", "Failed to create endpoint for service %v/%v: %v", namespace, name, err)
		} else {
			e.eventRecorder.Eventf(desired, v1.EventTypeWarning, "FailedToUpdateEndpoint", "Failed to update endpoint %v/%v: %v", namespace, name, err)
		}
		return err
	}
	// Until the informer shows a newer version, the one we replaced is stale.
	if updated != nil && updated.ResourceVersion != current.ResourceVersion {
		e.staleEndpoints.Stale(current)
	}
	return nil
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in)+2)
	for k, v := range in {
		out[k] = v
	}
	return out
}

// labelsCorrect reports whether the Endpoints carry exactly the Service's
// labels plus the managed-by (and possibly headless) label.
func labelsCorrect(epLabels, svcLabels map[string]string) bool {
	if epLabels[LabelManagedBy] != ControllerName {
		return false
	}
	skipped := 0
	for k, v := range epLabels {
		if k == v1.IsHeadlessService || k == LabelManagedBy {
			skipped++
			continue
		}
		if sv, ok := svcLabels[k]; !ok || sv != v {
			return false
		}
	}
	return len(svcLabels) == len(epLabels)-skipped
}
