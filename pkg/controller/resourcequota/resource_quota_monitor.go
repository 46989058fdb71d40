package resourcequota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
)

// resourceChangesQueue labels the monitor's workqueue metrics, as upstream.
const resourceChangesQueue = "resource_quota_controller_resource_changes"

// InformerFactory hands out shared informers by resource; see
// NewInformerFactory. Pods, services and claims must come typed, or their
// update filter never fires.
type InformerFactory interface {
	ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error)
	Start(stopCh <-chan struct{})
}

type eventType int

const (
	updateEvent eventType = iota
	deleteEvent
)

func (e eventType) String() string {
	switch e {
	case updateEvent:
		return "update"
	case deleteEvent:
		return "delete"
	}
	return fmt.Sprintf("unknown(%d)", int(e))
}

// event is a change of a monitored object that may lower quota usage.
type event struct {
	eventType eventType
	obj       interface{}
	gvr       schema.GroupVersionResource
}

// monitor is one resource's event handler on its shared informer.
type monitor struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	// started is set once the informer factory was asked to run it.
	started bool
}

// QuotaMonitor watches every quota-tracked resource and calls back with
// the namespace of any object that was deleted or updated in a way that
// may change usage, so that namespace's quotas are recalculated at once
// rather than at the next full resync. Creations need no callback: the
// apiserver's admission already charged them.
type QuotaMonitor struct {
	monitorLock sync.RWMutex
	monitors    map[schema.GroupVersionResource]*monitor
	// stopCh and running are set by Run; monitors start only while running.
	stopCh  <-chan struct{}
	running bool

	// informersStarted closes once the controller manager started the
	// shared informers; starting them earlier would run informers other
	// controllers have not registered handlers on yet.
	informersStarted <-chan struct{}
	informerFactory  InformerFactory
	ignoredResources map[schema.GroupResource]struct{}
	resyncPeriod     func() time.Duration

	resourceChanges   workqueue.TypedRateLimitingInterface[*event]
	replenishmentFunc ReplenishmentFunc
	registry          evaluator.Registry
	updateFilter      evaluator.UpdateFilter
}

// NewMonitor returns a monitor without monitors; SyncMonitors adds them.
// resyncPeriod (may be nil) is the resync of the event handlers.
func NewMonitor(informersStarted <-chan struct{}, informerFactory InformerFactory, ignoredResources map[schema.GroupResource]struct{},
	resyncPeriod func() time.Duration, replenishmentFunc ReplenishmentFunc, registry evaluator.Registry, updateFilter evaluator.UpdateFilter) *QuotaMonitor {
	return &QuotaMonitor{
		informersStarted:  informersStarted,
		informerFactory:   informerFactory,
		ignoredResources:  ignoredResources,
		resyncPeriod:      resyncPeriod,
		resourceChanges:   controller.NewNamedTypedQueue[*event](resourceChangesQueue),
		replenishmentFunc: replenishmentFunc,
		registry:          registry,
		updateFilter:      updateFilter,
	}
}

// newMonitor registers the change handlers on resource's shared informer.
func (qm *QuotaMonitor) newMonitor(ctx context.Context, resource schema.GroupVersionResource) (*monitor, error) {
	logger := klog.FromContext(ctx)
	handlers := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			if qm.updateFilter != nil && qm.updateFilter(resource, oldObj, newObj) {
				qm.resourceChanges.Add(&event{eventType: updateEvent, obj: newObj, gvr: resource})
			}
		},
		DeleteFunc: func(obj interface{}) {
			obj = controller.Untombstone(obj)
			qm.resourceChanges.Add(&event{eventType: deleteEvent, obj: obj, gvr: resource})
		},
	}
	shared, err := qm.informerFactory.ForResource(resource)
	if err != nil {
		logger.V(4).Info("QuotaMonitor unable to use a shared informer", "resource", resource.String(), "err", err)
		return nil, fmt.Errorf("unable to monitor quota for resource %q", resource.String())
	}
	logger.V(4).Info("QuotaMonitor using a shared informer", "resource", resource.String())
	var resync time.Duration
	if qm.resyncPeriod != nil {
		resync = qm.resyncPeriod()
	}
	inf := shared.Informer()
	reg, err := inf.AddEventHandlerWithResyncPeriod(handlers, resync)
	if err != nil {
		return nil, fmt.Errorf("unable to monitor quota for resource %q: %w", resource.String(), err)
	}
	return &monitor{informer: inf, registration: reg}, nil
}

// SyncMonitors makes the monitored set equal resources (minus ignored
// ones): it keeps existing monitors, adds missing ones and drops the rest.
// A resource no evaluator knows gets an object-count evaluator. It tries
// every resource and returns the errors together. New monitors start with
// StartMonitors.
func (qm *QuotaMonitor) SyncMonitors(ctx context.Context, resources map[schema.GroupVersionResource]struct{}) error {
	logger := klog.FromContext(ctx)
	qm.monitorLock.Lock()
	defer qm.monitorLock.Unlock()

	old := qm.monitors
	current := map[schema.GroupVersionResource]*monitor{}
	var errs []error
	kept, added := 0, 0
	for resource := range resources {
		if _, ignored := qm.ignoredResources[resource.GroupResource()]; ignored {
			continue
		}
		if m, ok := old[resource]; ok {
			current[resource] = m
			delete(old, resource)
			kept++
			continue
		}
		m, err := qm.newMonitor(ctx, resource)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't start monitor for resource %q: %w", resource, err))
			continue
		}
		if qm.registry.Get(resource.GroupResource()) == nil {
			lister := evaluator.ListerFuncForResourceFunc(qm.informerFactory.ForResource)
			qm.registry.Add(evaluator.NewObjectCountEvaluator(resource.GroupResource(), evaluator.ListResourceUsingListerFunc(lister, resource), ""))
			logger.Info("QuotaMonitor created object count evaluator", "resource", resource.GroupResource())
		}
		current[resource] = m
		added++
	}
	qm.monitors = current
	for _, m := range old {
		qm.removeHandler(ctx, m)
	}
	logger.V(4).Info("quota synced monitors", "added", added, "kept", kept, "removed", len(old))
	return utilerrors.NewAggregate(errs)
}

// removeHandler detaches a dropped monitor; the shared informer itself
// stays, other controllers may use it.
func (qm *QuotaMonitor) removeHandler(ctx context.Context, m *monitor) {
	if err := m.informer.RemoveEventHandler(m.registration); err != nil {
		klog.FromContext(ctx).V(4).Info("QuotaMonitor could not remove an event handler", "err", err)
	}
}

// StartMonitors starts the informers of monitors not started yet. Before
// Run it does nothing; Run starts them.
func (qm *QuotaMonitor) StartMonitors(ctx context.Context) {
	qm.monitorLock.Lock()
	defer qm.monitorLock.Unlock()
	if !qm.running {
		return
	}
	select {
	case <-qm.informersStarted:
	case <-qm.stopCh:
		return
	}
	started := 0
	for _, m := range qm.monitors {
		if !m.started {
			m.started = true
			started++
		}
	}
	if started > 0 {
		// Start only runs the informers that are not running yet.
		qm.informerFactory.Start(qm.stopCh)
	}
	klog.FromContext(ctx).V(4).Info("QuotaMonitor finished starting monitors", "new", started, "total", len(qm.monitors))
}

// IsSynced reports whether there are monitors and all of their informers
// have synced. It can turn false again when monitors are added.
func (qm *QuotaMonitor) IsSynced(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	qm.monitorLock.RLock()
	defer qm.monitorLock.RUnlock()
	if len(qm.monitors) == 0 {
		logger.V(4).Info("quota monitor not synced: no monitors")
		return false
	}
	for resource, m := range qm.monitors {
		if !m.informer.HasSynced() {
			logger.V(4).Info("quota monitor not synced", "resource", resource)
			return false
		}
	}
	return true
}

// Run starts the monitors and forwards changes to the replenishment
// function until ctx ends, then detaches every monitor.
func (qm *QuotaMonitor) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("QuotaMonitor running")

	qm.monitorLock.Lock()
	qm.stopCh = ctx.Done()
	qm.running = true
	qm.monitorLock.Unlock()

	qm.StartMonitors(ctx)

	var wg sync.WaitGroup
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			for qm.processResourceChanges(ctx) {
			}
		}, time.Second)
	})
	<-ctx.Done()
	logger.Info("QuotaMonitor stopping")
	qm.resourceChanges.ShutDown()
	wg.Wait()

	qm.monitorLock.Lock()
	defer qm.monitorLock.Unlock()
	// No monitor may start after this point.
	qm.running = false
	for _, m := range qm.monitors {
		qm.removeHandler(ctx, m)
	}
	logger.Info("QuotaMonitor stopped monitors", "total", len(qm.monitors))
	qm.monitors = nil
}

// processResourceChanges handles one change; false once shut down.
func (qm *QuotaMonitor) processResourceChanges(ctx context.Context) bool {
	e, quit := qm.resourceChanges.Get()
	if quit {
		return false
	}
	defer qm.resourceChanges.Done(e)
	obj, err := meta.Accessor(e.obj)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Cannot access object")
		return true
	}
	klog.FromContext(ctx).V(4).Info("QuotaMonitor process object",
		"resource", e.gvr.String(), "namespace", obj.GetNamespace(), "name", obj.GetName(),
		"uid", string(obj.GetUID()), "eventType", e.eventType)
	qm.replenishmentFunc(ctx, e.gvr.GroupResource(), obj.GetNamespace())
	return true
}
