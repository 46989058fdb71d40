// Package resourcequota is the resourcequota-controller. It keeps every
// ResourceQuota's status current: status.hard mirrors spec.hard and
// status.used holds what the namespace's objects use of each hard
// resource. The apiserver's ResourceQuota admission plugin charges new
// objects as they are created; this controller recalculates from the
// informer caches, which releases usage when objects go away or stop
// counting (a pod finishing, a service losing its node ports).
//
// Quotas are recalculated when their spec changes (on a priority queue),
// when a monitored object of their namespace is deleted or changes in a
// way that matters (replenishment), and all of them every resync period.
package resourcequota

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
)

// Queue names, which label the workqueue metrics, as upstream.
const (
	primaryQueue  = "resourcequota_primary"
	priorityQueue = "resourcequota_priority"
)

// NamespacedResourcesFunc discovers the server's namespaced resources,
// normally a discovery client's ServerPreferredNamespacedResources.
type NamespacedResourcesFunc func() ([]*metav1.APIResourceList, error)

// ReplenishmentFunc signals that an object of groupResource changed in
// namespace in a way that may change quota usage.
type ReplenishmentFunc func(ctx context.Context, groupResource schema.GroupResource, namespace string)

// ControllerOptions configures NewController.
type ControllerOptions struct {
	// QuotaClient must be allowed to update resourcequotas/status.
	QuotaClient corev1client.ResourceQuotasGetter
	// ResourceQuotaInformer is the shared ResourceQuota informer.
	ResourceQuotaInformer coreinformers.ResourceQuotaInformer
	// ResyncPeriod is how often all quotas are recalculated
	// (--resource-quota-sync-period); zero or less disables it.
	ResyncPeriod func() time.Duration
	// Registry holds the evaluators; the monitor adds object counts to it.
	Registry evaluator.Registry
	// DiscoveryFunc finds the resources to monitor. Without it there is no
	// monitor: usage is only recalculated on spec changes and resyncs.
	DiscoveryFunc NamespacedResourcesFunc
	// IgnoredResourcesFunc returns resources never monitored (may be nil).
	IgnoredResourcesFunc func() map[schema.GroupResource]struct{}
	// InformersStarted closes once the shared informers were started.
	InformersStarted <-chan struct{}
	// InformerFactory gives the monitors their shared informers.
	InformerFactory InformerFactory
	// ReplenishmentResyncPeriod is the monitors' handler resync (may be nil).
	ReplenishmentResyncPeriod func() time.Duration
	// UpdateFilter picks the updates that trigger replenishment.
	UpdateFilter evaluator.UpdateFilter
}

// Controller keeps ResourceQuota status up to date.
type Controller struct {
	rqClient corev1client.ResourceQuotasGetter
	rqLister corelisters.ResourceQuotaLister
	// informerSyncedFuncs gate the workers: quotas and every monitor.
	informerSyncedFuncs []cache.InformerSynced
	// queue holds quotas to recalculate: replenishments and resyncs.
	queue workqueue.TypedRateLimitingInterface[string]
	// missingUsageQueue holds quotas whose status lacks hard limits or
	// usage: new or edited quotas, which users are waiting on.
	missingUsageQueue workqueue.TypedRateLimitingInterface[string]
	// syncHandler is syncResourceQuotaFromKey; tests replace it.
	syncHandler  func(ctx context.Context, key string) error
	resyncPeriod func() time.Duration
	registry     evaluator.Registry
	quotaMonitor *QuotaMonitor
	// workerLock is held for reading by every sync and for writing while
	// Sync changes the monitors, so no quota is calculated from a cache
	// that is not filled yet.
	workerLock sync.RWMutex
}

// NewController builds the controller and, given a DiscoveryFunc, its
// monitor for every discovered resource. A partial discovery failure is
// logged; the next Sync picks the missing resources up.
func NewController(ctx context.Context, options *ControllerOptions) (*Controller, error) {
	rq := &Controller{
		rqClient:            options.QuotaClient,
		rqLister:            options.ResourceQuotaInformer.Lister(),
		informerSyncedFuncs: []cache.InformerSynced{options.ResourceQuotaInformer.Informer().HasSynced},
		queue:               controller.NewNamedQueue(primaryQueue),
		missingUsageQueue:   controller.NewNamedQueue(priorityQueue),
		resyncPeriod:        options.ResyncPeriod,
		registry:            options.Registry,
	}
	if rq.resyncPeriod == nil {
		rq.resyncPeriod = func() time.Duration { return 0 }
	}
	rq.syncHandler = rq.syncResourceQuotaFromKey

	logger := klog.FromContext(ctx)
	_, err := options.ResourceQuotaInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { rq.addQuota(logger, obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			// Only spec edits matter here: status updates are this
			// controller's own writes, and recalculating on each of them
			// would relist namespaces for nothing. Usage changes arrive
			// through replenishment and the periodic resync instead.
			oldQuota, newQuota := oldObj.(*v1.ResourceQuota), newObj.(*v1.ResourceQuota)
			if evaluator.Equals(oldQuota.Spec.Hard, newQuota.Spec.Hard) {
				return
			}
			rq.addQuota(logger, newQuota)
		},
		// The sync finds it gone and does nothing.
		DeleteFunc: func(obj interface{}) { rq.enqueueResourceQuota(logger, obj) },
	}, rq.resyncPeriod())
	if err != nil {
		return nil, err
	}

	if options.DiscoveryFunc != nil {
		var ignored map[schema.GroupResource]struct{}
		if options.IgnoredResourcesFunc != nil {
			ignored = options.IgnoredResourcesFunc()
		}
		qm := NewMonitor(options.InformersStarted, options.InformerFactory, ignored,
			options.ReplenishmentResyncPeriod, rq.replenishQuota, rq.registry, options.UpdateFilter)
		rq.quotaMonitor = qm

		resources, err := GetQuotableResources(options.DiscoveryFunc)
		if discovery.IsGroupDiscoveryFailedError(err) {
			utilruntime.HandleErrorWithContext(ctx, err, "Initial discovery check failure, continuing and counting on future sync update")
		} else if err != nil {
			return nil, err
		}
		if err := qm.SyncMonitors(ctx, resources); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Initial monitor sync has error")
		}
		rq.informerSyncedFuncs = append(rq.informerSyncedFuncs, func() bool { return qm.IsSynced(ctx) })
	}
	return rq, nil
}

// enqueueAll queues every quota for a full recalculation.
func (rq *Controller) enqueueAll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	defer logger.V(4).Info("Resource quota controller queued all resource quota for full calculation of usage")
	quotas, err := rq.rqLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Unable to enqueue all - error listing resource quotas")
		return
	}
	for _, q := range quotas {
		rq.enqueueResourceQuota(logger, q)
	}
}

// enqueueResourceQuota queues obj (a quota or a tombstone) for recalculation.
func (rq *Controller) enqueueResourceQuota(logger klog.Logger, obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		logger.Error(err, "Couldn't get key", "object", obj)
		return
	}
	rq.queue.Add(key)
}

// addQuota queues a new or edited quota, on the priority queue when its
// status does not yet reflect its spec or lacks usage this controller can
// calculate.
func (rq *Controller) addQuota(logger klog.Logger, obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		logger.Error(err, "Couldn't get key", "object", obj)
		return
	}
	quota := obj.(*v1.ResourceQuota)
	if !apiequality.Semantic.DeepEqual(quota.Spec.Hard, quota.Status.Hard) {
		rq.missingUsageQueue.Add(key)
		return
	}
	for name := range quota.Status.Hard {
		if _, ok := quota.Status.Used[name]; ok {
			continue
		}
		for _, e := range rq.registry.List() {
			if len(e.MatchingResources([]v1.ResourceName{name})) > 0 {
				rq.missingUsageQueue.Add(key)
				return
			}
		}
	}
	rq.queue.Add(key)
}

// Run runs the monitor and workers workers per queue, and queues all
// quotas every resync period, until ctx ends. Workers start once the
// quota informer and every monitor have synced.
func (rq *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Starting resource quota controller")

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down resource quota controller")
		rq.missingUsageQueue.ShutDown()
		rq.queue.ShutDown()
		wg.Wait()
	}()

	if rq.quotaMonitor != nil {
		wg.Go(func() { rq.quotaMonitor.Run(ctx) })
	}
	if !controller.WaitForCacheSync(ctx, "resource quota", rq.informerSyncedFuncs...) {
		return
	}

	for name, q := range map[string]workqueue.TypedRateLimitingInterface[string]{primaryQueue: rq.queue, priorityQueue: rq.missingUsageQueue} {
		loop := &controller.WorkLoop[string]{Name: name, Queue: q, Sync: rq.lockedSync}
		wg.Go(func() { loop.RunWorkers(ctx, workers) })
	}

	if period := rq.resyncPeriod(); period > 0 {
		wg.Go(func() { wait.UntilWithContext(ctx, rq.enqueueAll, period) })
	} else {
		logger.Info("periodic quota controller resync disabled")
	}
	<-ctx.Done()
}

// lockedSync runs one sync while monitors are not being changed.
func (rq *Controller) lockedSync(ctx context.Context, key string) error {
	rq.workerLock.RLock()
	defer rq.workerLock.RUnlock()
	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "queueKey", key))
	return rq.syncHandler(ctx, key)
}

// syncResourceQuotaFromKey recalculates the quota named by key, if it
// still exists.
func (rq *Controller) syncResourceQuotaFromKey(ctx context.Context, key string) error {
	start := time.Now()
	logger := klog.FromContext(ctx)
	defer func() {
		logger.V(4).Info("Finished syncing resource quota", "key", key, "duration", time.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	quota, err := rq.rqLister.ResourceQuotas(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.Info("Resource quota has been deleted", "key", key)
		return nil
	}
	if err != nil {
		logger.Error(err, "Unable to retrieve resource quota from store", "key", key)
		return err
	}
	return rq.syncResourceQuota(ctx, quota)
}

// syncResourceQuota sets status.hard to spec.hard and status.used to the
// usage of exactly the hard resources, writing only when that changes
// anything. Usage an evaluator failed to calculate keeps its previous
// value; the error is returned so the quota is retried.
func (rq *Controller) syncResourceQuota(ctx context.Context, quota *v1.ResourceQuota) error {
	// A first sync always writes, even if nothing is used, so admission
	// knows the usage is known.
	dirty := !apiequality.Semantic.DeepEqual(quota.Spec.Hard, quota.Status.Hard) ||
		quota.Status.Hard == nil || quota.Status.Used == nil

	used := v1.ResourceList{}
	if quota.Status.Used != nil {
		used = evaluator.Add(v1.ResourceList{}, quota.Status.Used)
	}
	hard := evaluator.Add(v1.ResourceList{}, quota.Spec.Hard)

	var errs []error
	newUsage, err := evaluator.CalculateUsage(quota.Namespace, quota.Spec.Scopes, hard, rq.registry, quota.Spec.ScopeSelector)
	if err != nil {
		errs = append(errs, err)
	}
	for name, q := range newUsage {
		used[name] = q
	}
	used = evaluator.Mask(used, evaluator.ResourceNames(hard))

	updated := quota.DeepCopy()
	updated.Status = v1.ResourceQuotaStatus{Hard: hard, Used: used}
	dirty = dirty || !evaluator.Equals(updated.Status.Used, quota.Status.Used)
	if dirty {
		if _, err := rq.rqClient.ResourceQuotas(updated.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// replenishQuota queues the quotas of namespace that track a resource of
// groupResource, after an object of it changed.
func (rq *Controller) replenishQuota(ctx context.Context, groupResource schema.GroupResource, namespace string) {
	e := rq.registry.Get(groupResource)
	if e == nil {
		return
	}
	quotas, err := rq.rqLister.ResourceQuotas(namespace).List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error checking to see if namespace has any ResourceQuota associated with it", "namespace", namespace)
		return
	}
	logger := klog.FromContext(ctx)
	for _, q := range quotas {
		if len(e.MatchingResources(evaluator.ResourceNames(q.Status.Hard))) > 0 {
			rq.enqueueResourceQuota(logger, q)
		}
	}
}

// Sync re-discovers resources every period and, when they changed,
// updates the monitors with the workers paused, then waits (at most one
// period) for the new monitors to sync. Resources of groups that failed
// discovery keep their monitors.
func (rq *Controller) Sync(ctx context.Context, discoveryFunc NamespacedResourcesFunc, period time.Duration) {
	oldResources := map[schema.GroupVersionResource]struct{}{}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		newResources, err := GetQuotableResources(discoveryFunc)
		if err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Error during resource discovery")
			failed, partial := discovery.GroupDiscoveryFailedErrorGroups(err)
			if !partial || len(newResources) == 0 {
				return
			}
			for r := range oldResources {
				if _, ok := failed[r.GroupVersion()]; ok {
					newResources[r] = struct{}{}
				}
			}
		}

		logger := klog.FromContext(ctx)
		if reflect.DeepEqual(oldResources, newResources) {
			logger.V(4).Info("no resource updates from discovery, skipping resource quota sync")
			return
		}

		rq.workerLock.Lock()
		defer rq.workerLock.Unlock()

		if v := logger.V(2); v.Enabled() {
			v.Info("syncing resource quota controller with updated resources from discovery", "diff", printDiff(oldResources, newResources))
		}
		if err := rq.resyncMonitors(ctx, newResources); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Failed to sync resource monitors")
			return
		}
		oldResources = newResources

		// Bounded, so a resource whose informer never syncs cannot stop
		// quota processing for good; later passes keep waiting.
		if rq.quotaMonitor != nil {
			syncCtx, cancel := context.WithTimeout(ctx, period)
			defer cancel()
			if !cache.WaitForNamedCacheSyncWithContext(syncCtx, func() bool { return rq.quotaMonitor.IsSynced(ctx) }) {
				utilruntime.HandleErrorWithContext(ctx, nil, "Timed out waiting for quota monitor sync")
				return
			}
		}
		logger.V(2).Info("synced quota controller")
	}, period)
}

// resyncMonitors makes the monitors match resources and starts new ones.
func (rq *Controller) resyncMonitors(ctx context.Context, resources map[schema.GroupVersionResource]struct{}) error {
	if rq.quotaMonitor == nil {
		return nil
	}
	if err := rq.quotaMonitor.SyncMonitors(ctx, resources); err != nil {
		return err
	}
	rq.quotaMonitor.StartMonitors(ctx)
	return nil
}

// printDiff summarises which resources discovery added and removed.
func printDiff(oldResources, newResources map[schema.GroupVersionResource]struct{}) string {
	var added, removed []string
	for r := range newResources {
		if _, ok := oldResources[r]; !ok {
			added = append(added, fmt.Sprintf("%+v", r))
		}
	}
	for r := range oldResources {
		if _, ok := newResources[r]; !ok {
			removed = append(removed, fmt.Sprintf("%+v", r))
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return fmt.Sprintf("added: %v, removed: %v", added, removed)
}

// GetQuotableResources returns the discovered resources quota can track:
// those supporting create, list, watch and delete. With a partial
// discovery failure it returns what it found and the error.
func GetQuotableResources(discoveryFunc NamespacedResourcesFunc) (map[schema.GroupVersionResource]struct{}, error) {
	possible, discoveryErr := discoveryFunc()
	if discoveryErr != nil && len(possible) == 0 {
		return nil, fmt.Errorf("failed to discover resources: %w", discoveryErr)
	}
	quotable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"create", "list", "watch", "delete"}}, possible)
	gvrs, err := discovery.GroupVersionResources(quotable)
	if err != nil {
		return nil, fmt.Errorf("failed to parse resources: %w", err)
	}
	return gvrs, discoveryErr
}
