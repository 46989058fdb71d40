package garbagecollector

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// Queue names, as upstream, so workqueue_* metrics match.
const (
	attemptToDeleteQueueName = "garbage_collector_attempt_to_delete"
	attemptToOrphanQueueName = "garbage_collector_attempt_to_orphan"
	graphChangesQueueName    = "garbage_collector_graph_changes"
	// EventComponent is the source of the events the collector records.
	EventComponent = "garbage-collector-controller"
)

type eventType int

const (
	addEvent eventType = iota
	updateEvent
	deleteEvent
)

func (e eventType) String() string {
	switch e {
	case addEvent:
		return "add"
	case updateEvent:
		return "update"
	case deleteEvent:
		return "delete"
	}
	return fmt.Sprintf("unknown(%d)", int(e))
}

// event is one change to feed the graph: an informer notification, or a
// "virtual" delete produced by a worker that found an object absent.
type event struct {
	virtual   bool
	eventType eventType
	obj       interface{}
	oldObj    interface{} // updates only
	gvk       schema.GroupVersionKind
}

// monitor watches one resource through a shared informer.
type monitor struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	store        cache.Store
	// stopCh is nil until the monitor is started.
	stopCh chan struct{}
}

func (m *monitor) hasSynced() bool { return m.registration.HasSynced() }

// GraphBuilder turns informer events for every deletable resource into the
// dependency graph (uidToNode) on a single goroutine, and enqueues nodes for
// the collector's workers when something they care about changes.
type GraphBuilder struct {
	restMapper     meta.RESTMapper
	metadataClient metadata.Interface

	monitorLock sync.RWMutex
	monitors    map[schema.GroupVersionResource]*monitor
	// stopCh and running are set by Run; monitors added before Run starts
	// are started by it.
	stopCh  <-chan struct{}
	running bool

	informersStarted <-chan struct{}
	sharedInformers  InformerFactory
	ignoredResources map[schema.GroupResource]struct{}

	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder

	graphChanges     workqueue.TypedRateLimitingInterface[*event]
	uidToNode        *uidToNode
	attemptToDelete  workqueue.TypedRateLimitingInterface[*node]
	attemptToOrphan  workqueue.TypedRateLimitingInterface[*node]
	absentOwnerCache *referenceCache
	recentDeletes    *recentDeletes

	// teardowns are the namespaces being deleted, as the graph has seen
	// them, and the progress of their deletion.
	teardowns *namespaceTeardowns
}

// NewDependencyGraphBuilder builds the graph half of the collector. Upstream
// keeps it in the ControllerContext so other controllers can share it.
func NewDependencyGraphBuilder(
	ctx context.Context,
	metadataClient metadata.Interface,
	mapper meta.RESTMapper,
	ignoredResources map[schema.GroupResource]struct{},
	sharedInformers InformerFactory,
	informersStarted <-chan struct{},
) *GraphBuilder {
	b, r := controller.NewEventRecorder(ctx, EventComponent)
	return &GraphBuilder{
		restMapper:       mapper,
		metadataClient:   metadataClient,
		monitors:         map[schema.GroupVersionResource]*monitor{},
		informersStarted: informersStarted,
		sharedInformers:  sharedInformers,
		ignoredResources: ignoredResources,
		eventBroadcaster: b,
		eventRecorder:    r,
		graphChanges:     controller.NewNamedTypedQueue[*event](graphChangesQueueName),
		uidToNode:        newUIDToNode(),
		attemptToDelete:  controller.NewNamedTypedQueue[*node](attemptToDeleteQueueName),
		attemptToOrphan:  controller.NewNamedTypedQueue[*node](attemptToOrphanQueueName),
		absentOwnerCache: newReferenceCache(absentOwnerCacheSize),
		recentDeletes:    newRecentDeletes(),

		teardowns: newNamespaceTeardowns(clock.RealClock{}),
	}
}

// absentOwnerCacheSize is how many owners verified absent are remembered.
// A namespace's teardown deletes its owners in bursts (every Deployment,
// then every ReplicaSet); a cache smaller than a burst forgets the first
// owners before their dependents come up, and each of those then costs a
// GET answered 404. An entry is a few hundred bytes, and a UID found
// absent never comes back, so a large cache is never wrong.
const absentOwnerCacheSize = 10000

var defaultIgnoredResources = map[schema.GroupResource]struct{}{
	{Group: "", Resource: "events"}:                 {},
	{Group: eventsv1.GroupName, Resource: "events"}: {},
}

// DefaultIgnoredResources returns the resources the collector never
// watches, the default of the component config's GCIgnoredResources: core
// and events.k8s.io events (numerous, short-lived, and never owners).
func DefaultIgnoredResources() map[schema.GroupResource]struct{} {
	out := make(map[schema.GroupResource]struct{}, len(defaultIgnoredResources))
	for k := range defaultIgnoredResources {
		out[k] = struct{}{}
	}
	return out
}

func (gb *GraphBuilder) newMonitor(logger klog.Logger, resource schema.GroupVersionResource, kind schema.GroupVersionKind) (*monitor, error) {
	handlers := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			gb.graphChanges.Add(&event{eventType: addEvent, obj: obj, gvk: kind})
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			// Resyncs are off, so every update is a real change.
			gb.graphChanges.Add(&event{eventType: updateEvent, obj: newObj, oldObj: oldObj, gvk: kind})
		},
		DeleteFunc: func(obj interface{}) {
			obj = controller.Untombstone(obj)
			gb.graphChanges.Add(&event{eventType: deleteEvent, obj: obj, gvk: kind})
		},
	}
	shared, err := gb.sharedInformers.ForResource(resource)
	if err != nil {
		return nil, err
	}
	inf := shared.Informer()
	reg, err := inf.AddEventHandlerWithResyncPeriod(handlers, 0)
	if err != nil {
		return nil, err
	}
	logger.V(4).Info("using a shared informer", "resource", resource, "kind", kind)
	return &monitor{informer: inf, registration: reg, store: inf.GetStore()}, nil
}

// syncMonitors makes the monitors match resources: new ones are created
// (not started), vanished ones are stopped. Errors for single resources do
// not stop the others.
func (gb *GraphBuilder) syncMonitors(logger klog.Logger, resources map[schema.GroupVersionResource]struct{}) error {
	gb.monitorLock.Lock()
	defer gb.monitorLock.Unlock()

	toRemove := gb.monitors
	current := map[schema.GroupVersionResource]*monitor{}
	var errs []error
	kept, added := 0, 0
	for resource := range resources {
		if _, ignored := gb.ignoredResources[resource.GroupResource()]; ignored {
			continue
		}
		if m, ok := toRemove[resource]; ok {
			current[resource] = m
			delete(toRemove, resource)
			kept++
			continue
		}
		kind, err := gb.restMapper.KindFor(resource)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't look up resource %q: %w", resource, err))
			continue
		}
		m, err := gb.newMonitor(logger, resource, kind)
		if err != nil {
			errs = append(errs, fmt.Errorf("couldn't start monitor for resource %q: %w", resource, err))
			continue
		}
		current[resource] = m
		added++
	}
	gb.monitors = current
	for _, m := range toRemove {
		gb.stopMonitor(m)
	}
	logger.V(4).Info("synced monitors", "added", added, "kept", kept, "removed", len(toRemove))
	return utilerrors.NewAggregate(errs)
}

// stopMonitor detaches the collector from a resource's informer. The shared
// informer itself belongs to the factory and keeps running for others.
func (gb *GraphBuilder) stopMonitor(m *monitor) {
	if m.stopCh != nil {
		close(m.stopCh)
	}
	_ = m.informer.RemoveEventHandler(m.registration)
}

// startMonitors starts the shared informers of monitors not started yet,
// once the app has started its informers (so the factory is not started
// before every controller registered what it needs).
func (gb *GraphBuilder) startMonitors(logger klog.Logger) {
	gb.monitorLock.Lock()
	defer gb.monitorLock.Unlock()
	if !gb.running {
		return
	}
	<-gb.informersStarted
	started := 0
	for _, m := range gb.monitors {
		if m.stopCh == nil {
			m.stopCh = make(chan struct{})
			started++
		}
	}
	if started > 0 {
		// Start is idempotent per informer: only new ones begin running.
		gb.sharedInformers.Start(gb.stopCh)
	}
	logger.V(4).Info("started new monitors", "new", started, "current", len(gb.monitors))
}

func (gb *GraphBuilder) stopMonitors(logger klog.Logger) {
	gb.monitorLock.Lock()
	defer gb.monitorLock.Unlock()
	n := len(gb.monitors)
	for _, m := range gb.monitors {
		gb.stopMonitor(m)
	}
	gb.monitors = map[schema.GroupVersionResource]*monitor{}
	logger.Info("stopped monitors", "total", n)
}

// IsResourceSynced reports whether resource has a monitor whose initial
// list has been delivered to the graph.
func (gb *GraphBuilder) IsResourceSynced(resource schema.GroupVersionResource) bool {
	gb.monitorLock.RLock()
	defer gb.monitorLock.RUnlock()
	m, ok := gb.monitors[resource]
	return ok && m.hasSynced()
}

// IsSynced reports whether every monitor has synced (false with none).
func (gb *GraphBuilder) IsSynced(logger klog.Logger) bool {
	gb.monitorLock.RLock()
	defer gb.monitorLock.RUnlock()
	if len(gb.monitors) == 0 {
		logger.V(4).Info("garbage controller monitor not synced: no monitors")
		return false
	}
	for resource, m := range gb.monitors {
		if !m.hasSynced() {
			logger.V(4).Info("garbage controller monitor not yet synced", "resource", resource)
			return false
		}
	}
	return true
}

// Run starts the monitors and processes graph changes until ctx ends.
func (gb *GraphBuilder) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	logger.Info("Running", "component", "GraphBuilder")
	defer logger.Info("Stopping", "component", "GraphBuilder")

	gb.monitorLock.Lock()
	gb.stopCh = ctx.Done()
	gb.running = true
	gb.monitorLock.Unlock()

	gb.startMonitors(logger)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for gb.processGraphChanges(logger) {
		}
	}, time.Second)

	gb.monitorLock.Lock()
	gb.running = false
	gb.monitorLock.Unlock()
	gb.stopMonitors(logger)
}

// enqueueVirtualDeleteEvent tells the graph that ref was found absent.
func (gb *GraphBuilder) enqueueVirtualDeleteEvent(ref objectReference) {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	gb.graphChanges.Add(&event{
		virtual:   true,
		eventType: deleteEvent,
		gvk:       gv.WithKind(ref.Kind),
		obj: &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, UID: ref.UID, Name: ref.Name},
		},
	})
}

// addDependentToOwners links n under each owner, creating virtual owner
// nodes (to be verified by attemptToDelete) for owners not seen yet. If a
// reference cannot be right (owner in another namespace, or coordinates
// that disagree with the observed owner), n itself is queued so the worker
// verifies its owners against the API server.
func (gb *GraphBuilder) addDependentToOwners(logger klog.Logger, n *node, owners []metav1.OwnerReference) {
	suspicious := false
	for _, ref := range owners {
		ownerNode, found := gb.uidToNode.Read(ref.UID)
		if !found {
			// Assume the owner shares the dependent's namespace until observed.
			ownerNode = newNode(objectReference{OwnerReference: ownerReferenceCoordinates(ref), Namespace: n.identity.Namespace}, nil)
			ownerNode.virtual = true
			logger.V(5).Info("add virtual item", "identity", ownerNode.identity)
			gb.uidToNode.Write(ownerNode)
		}
		ownerNode.addDependent(n)
		if !found {
			gb.attemptToDelete.Add(ownerNode)
			continue
		}
		if suspicious {
			continue
		}
		ownerNamespaced := len(ownerNode.identity.Namespace) > 0
		switch {
		case ownerNamespaced && ownerNode.identity.Namespace != n.identity.Namespace:
			if ownerNode.isObserved() {
				logger.V(2).Info("item references an owner but does not match namespaces", "item", n.identity, "owner", ownerNode.identity)
				gb.reportInvalidNamespaceOwnerRef(n, ref.UID)
			}
			suspicious = true
		case !ownerReferenceMatchesCoordinates(ref, ownerNode.identity.OwnerReference):
			if ownerNode.isObserved() {
				logger.V(2).Info("item references an owner with coordinates that do not match the observed identity", "item", n.identity, "owner", ownerNode.identity)
			}
			suspicious = true
		case !ownerNamespaced && ownerNode.identity.Namespace != n.identity.Namespace && !ownerNode.isObserved():
			// A virtual cluster-scoped owner from another dependent's view.
			suspicious = true
		}
	}
	if suspicious {
		gb.attemptToDelete.Add(n)
	}
}

// reportInvalidNamespaceOwnerRef records a warning on the dependent n whose
// reference to invalidOwnerUID points at an owner in another namespace.
func (gb *GraphBuilder) reportInvalidNamespaceOwnerRef(n *node, invalidOwnerUID types.UID) {
	var bad *metav1.OwnerReference
	for _, ref := range n.getOwners() {
		if ref.UID == invalidOwnerUID {
			bad = &ref
			break
		}
	}
	if bad == nil {
		return
	}
	involved := &v1.ObjectReference{
		Kind:       n.identity.Kind,
		APIVersion: n.identity.APIVersion,
		Namespace:  n.identity.Namespace,
		Name:       n.identity.Name,
		UID:        n.identity.UID,
	}
	invalid := objectReference{OwnerReference: ownerReferenceCoordinates(*bad), Namespace: n.identity.Namespace}
	gb.eventRecorder.Eventf(involved, v1.EventTypeWarning, "OwnerRefInvalidNamespace",
		"ownerRef %s does not exist in namespace %q", invalid, n.identity.Namespace)
}

func (gb *GraphBuilder) insertNode(logger klog.Logger, n *node) {
	gb.uidToNode.Write(n)
	gb.addDependentToOwners(logger, n, n.getOwners())
}

func (gb *GraphBuilder) removeDependentFromOwners(n *node, owners []metav1.OwnerReference) {
	for _, ref := range owners {
		if o, ok := gb.uidToNode.Read(ref.UID); ok {
			o.deleteDependent(n)
		}
	}
}

// removeNode drops n from the index and from its owners' dependents; the
// owner nodes stay (they are removed by their own delete events).
func (gb *GraphBuilder) removeNode(n *node) {
	gb.uidToNode.Delete(n.identity.UID)
	gb.removeDependentFromOwners(n, n.getOwners())
}

type ownerRefPair struct{ oldRef, newRef metav1.OwnerReference }

// referencesDiffs compares owner references by UID.
func referencesDiffs(old, new []metav1.OwnerReference) (added, removed []metav1.OwnerReference, changed []ownerRefPair) {
	oldByUID := make(map[types.UID]metav1.OwnerReference, len(old))
	for _, r := range old {
		oldByUID[r.UID] = r
	}
	for _, r := range new {
		o, ok := oldByUID[r.UID]
		if !ok {
			added = append(added, r)
			continue
		}
		if !reflect.DeepEqual(o, r) {
			changed = append(changed, ownerRefPair{oldRef: o, newRef: r})
		}
		delete(oldByUID, r.UID)
	}
	for _, r := range old {
		if _, ok := oldByUID[r.UID]; ok {
			removed = append(removed, r)
		}
	}
	return added, removed, changed
}

func beingDeleted(o metav1.Object) bool { return o.GetDeletionTimestamp() != nil }

func hasFinalizer(o metav1.Object, f string) bool { return slices.Contains(o.GetFinalizers(), f) }

func hasDeleteDependentsFinalizer(o metav1.Object) bool {
	return hasFinalizer(o, metav1.FinalizerDeleteDependents)
}

func hasOrphanFinalizer(o metav1.Object) bool {
	return hasFinalizer(o, metav1.FinalizerOrphanDependents)
}

// deletionStartsWithFinalizer: newObj is being deleted with finalizer f,
// and oldObj (if any) was not yet in that state.
func deletionStartsWithFinalizer(oldObj interface{}, newObj metav1.Object, f string) bool {
	if !beingDeleted(newObj) || !hasFinalizer(newObj, f) {
		return false
	}
	if oldObj == nil {
		return true
	}
	old, err := meta.Accessor(oldObj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("cannot access oldObj: %w", err))
		return false
	}
	return !beingDeleted(old) || !hasFinalizer(old, f)
}

// addUnblockedOwnersToDeleteQueue requeues owners (deleting in foreground)
// that a dependent stopped blocking by dropping or unblocking its reference.
func (gb *GraphBuilder) addUnblockedOwnersToDeleteQueue(logger klog.Logger, removed []metav1.OwnerReference, changed []ownerRefPair) {
	blocks := func(r metav1.OwnerReference) bool { return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion }
	enqueue := func(uid types.UID) {
		n, ok := gb.uidToNode.Read(uid)
		if !ok {
			logger.V(5).Info("cannot find uid in uidToNode", "uid", uid)
			return
		}
		gb.attemptToDelete.Add(n)
	}
	for _, r := range removed {
		if blocks(r) {
			enqueue(r.UID)
		}
	}
	for _, c := range changed {
		if blocks(c.oldRef) && !blocks(c.newRef) {
			enqueue(c.newRef.UID)
		}
	}
}

// processTransitions queues owners that just began an orphan or foreground
// deletion.
func (gb *GraphBuilder) processTransitions(logger klog.Logger, oldObj interface{}, obj metav1.Object, n *node) {
	if deletionStartsWithFinalizer(oldObj, obj, metav1.FinalizerOrphanDependents) {
		logger.V(5).Info("add item to attemptToOrphan", "item", n.identity)
		gb.attemptToOrphan.Add(n)
		return
	}
	if deletionStartsWithFinalizer(oldObj, obj, metav1.FinalizerDeleteDependents) {
		logger.V(2).Info("add item to attemptToDelete, because it's waiting for its dependents to be deleted", "item", n.identity)
		n.markDeletingDependents()
		for _, d := range n.getDependents() {
			gb.attemptToDelete.Add(d)
		}
		gb.attemptToDelete.Add(n)
	}
}

func identityFromEvent(e *event, o metav1.Object) objectReference {
	return objectReference{
		OwnerReference: metav1.OwnerReference{
			APIVersion: e.gvk.GroupVersion().String(),
			Kind:       e.gvk.Kind,
			UID:        o.GetUID(),
			Name:       o.GetName(),
		},
		Namespace: o.GetNamespace(),
	}
}

// processGraphChanges applies one event to the graph. It returns false once
// the queue is shut down.
func (gb *GraphBuilder) processGraphChanges(logger klog.Logger) bool {
	ev, quit := gb.graphChanges.Get()
	if quit {
		return false
	}
	defer gb.graphChanges.Done(ev)
	gb.applyEvent(logger, ev)
	return true
}

func (gb *GraphBuilder) applyEvent(logger klog.Logger, ev *event) {
	obj, err := meta.Accessor(ev.obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("cannot access obj: %w", err))
		return
	}
	logger.V(5).Info("GraphBuilder process object",
		"apiVersion", ev.gvk.GroupVersion().String(), "kind", ev.gvk.Kind,
		"object", klog.KObj(obj), "uid", string(obj.GetUID()),
		"eventType", ev.eventType, "virtual", ev.virtual)

	if !ev.virtual && ev.gvk.Group == "" && ev.gvk.Kind == "Namespace" {
		gb.teardowns.track(ev.eventType, obj)
	}

	if ev.eventType == deleteEvent || beingDeleted(obj) {
		// The deletion is seen (the collector only remembers deletes of
		// objects not yet being deleted), so the cache has moved past the
		// version deleted at.
		ours := gb.recentDeletes.forget(obj.GetUID())
		if !ev.virtual && !ours && firstSignOfDeletion(ev, obj) {
			gb.teardowns.progressed(obj.GetNamespace())
		}
	}

	existing, found := gb.uidToNode.Read(obj.GetUID())
	if found && !ev.virtual && !existing.isObserved() {
		// A real event for a node known only as somebody's owner: the
		// informer now tells us its true identity.
		observed := identityFromEvent(ev, obj)
		if observed != existing.identity {
			// Dependents whose reference disagrees with reality must be
			// re-verified; ones in another namespace get a warning.
			_, mismatched := partitionDependents(existing.getDependents(), observed)
			for _, dep := range mismatched {
				if len(observed.Namespace) > 0 && dep.identity.Namespace != observed.Namespace {
					logger.V(2).Info("item references an owner but does not match namespaces", "item", dep.identity, "owner", observed)
					gb.reportInvalidNamespaceOwnerRef(dep, observed.UID)
				}
				gb.attemptToDelete.Add(dep)
			}
			logger.V(2).Info("replacing virtual item with observed item", "virtual", existing.identity, "observed", observed)
			// Workers may hold the old node; swap in a copy rather than
			// mutating an identity they read without locks.
			existing = existing.clone()
			existing.identity = observed
			gb.uidToNode.Write(existing)
		}
		existing.markObserved()
	}

	switch {
	case (ev.eventType == addEvent || ev.eventType == updateEvent) && !found:
		n := newNode(identityFromEvent(ev, obj), obj.GetOwnerReferences())
		n.deletingDependents = beingDeleted(obj) && hasDeleteDependentsFinalizer(obj)
		n.beingDeleted = beingDeleted(obj)
		gb.insertNode(logger, n)
		gb.processTransitions(logger, ev.oldObj, obj, n)

	case ev.eventType == addEvent || ev.eventType == updateEvent:
		added, removed, changed := referencesDiffs(existing.getOwners(), obj.GetOwnerReferences())
		if len(added) != 0 || len(removed) != 0 || len(changed) != 0 {
			// Owners waiting in foreground on this dependent may proceed.
			gb.addUnblockedOwnersToDeleteQueue(logger, removed, changed)
			existing.setOwners(obj.GetOwnerReferences())
			gb.addDependentToOwners(logger, existing, added)
			gb.removeDependentFromOwners(existing, removed)
		}
		if beingDeleted(obj) {
			existing.markBeingDeleted()
		}
		gb.processTransitions(logger, ev.oldObj, obj, existing)

	case ev.eventType == deleteEvent:
		if !found {
			logger.V(5).Info("item doesn't exist in the graph, this shouldn't happen", "item", obj.GetUID())
			return
		}
		remove := true
		if ev.virtual {
			// A worker verified one identity absent. Other dependents may
			// name the same UID with other coordinates; keep the node for them.
			deleted := identityFromEvent(ev, obj)
			if !existing.isObserved() {
				matching, nonmatching := partitionDependents(existing.getDependents(), deleted)
				if len(nonmatching) > 0 {
					remove = false
					if len(matching) > 0 {
						gb.absentOwnerCache.Add(deleted)
						for _, dep := range matching {
							gb.attemptToDelete.Add(dep)
						}
					}
					if existing.identity == deleted {
						// Verify the next candidate identity of this UID.
						if alt := getAlternateOwnerIdentity(nonmatching, deleted); alt != nil {
							repl := existing.clone()
							repl.identity = *alt
							gb.uidToNode.Write(repl)
							gb.attemptToDelete.AddRateLimited(repl)
						}
					}
				}
			} else if existing.identity != deleted {
				// The real object exists; only references with wrong
				// coordinates are dangling.
				remove = false
				matching, _ := partitionDependents(existing.getDependents(), deleted)
				if len(matching) > 0 {
					gb.absentOwnerCache.Add(deleted)
					for _, dep := range matching {
						gb.attemptToDelete.Add(dep)
					}
				}
			}
		}
		if !remove {
			return
		}
		gb.removeNode(existing)
		deps := existing.getDependents()
		if len(deps) > 0 {
			// Spare every dependent a lookup of this owner.
			gb.absentOwnerCache.Add(identityFromEvent(ev, obj))
		}
		for _, dep := range deps {
			if gb.teardowns.terminating(dep.identity.Namespace) {
				gb.attemptToDelete.AddAfter(dep, terminatingNamespaceDelay)
				continue
			}
			gb.attemptToDelete.Add(dep)
		}
		// Owners deleting in foreground may now have no blocking dependents.
		for _, ref := range existing.getOwners() {
			if o, ok := gb.uidToNode.Read(ref.UID); ok && o.isDeletingDependents() {
				gb.attemptToDelete.Add(o)
			}
		}
	}
}

// partitionDependents splits dependents into those whose reference matches
// owner's identity and those whose reference (or namespace) does not; a
// dependent with several references to the UID can be in both.
func partitionDependents(dependents []*node, owner objectReference) (matching, nonmatching []*node) {
	ownerNamespaced := len(owner.Namespace) > 0
	for _, dep := range dependents {
		match, mismatch := false, false
		if ownerNamespaced && owner.Namespace != dep.identity.Namespace {
			mismatch = true
		} else {
			for _, ref := range dep.getOwners() {
				if ref.UID != owner.UID {
					continue
				}
				if ownerReferenceMatchesCoordinates(ref, owner.OwnerReference) {
					match = true
				} else {
					mismatch = true
				}
			}
		}
		if match {
			matching = append(matching, dep)
		}
		if mismatch {
			nonmatching = append(nonmatching, dep)
		}
	}
	return matching, nonmatching
}

func referenceLessThan(a, b objectReference) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.APIVersion != b.APIVersion {
		return a.APIVersion < b.APIVersion
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// getAlternateOwnerIdentity picks the next identity (in a stable order
// after the absent one, wrapping around) that dependents claim for the UID,
// so every claimed identity is eventually verified.
func getAlternateOwnerIdentity(deps []*node, absent objectReference) *objectReference {
	absentClusterScoped := len(absent.Namespace) == 0
	seen := map[objectReference]bool{absent: true}
	var first, firstFollowing *objectReference
	for _, dep := range deps {
		for _, ref := range dep.getOwners() {
			if ref.UID != absent.UID {
				continue
			}
			if ownerReferenceMatchesCoordinates(ref, absent.OwnerReference) &&
				(absentClusterScoped || absent.Namespace == dep.identity.Namespace) {
				continue // this is the identity just verified absent
			}
			cand := objectReference{OwnerReference: ownerReferenceCoordinates(ref), Namespace: dep.identity.Namespace}
			if absentClusterScoped && cand.APIVersion == absent.APIVersion && cand.Kind == absent.Kind {
				// Same kind as a cluster-scoped owner: it is cluster-scoped too.
				cand.Namespace = ""
			}
			if seen[cand] {
				continue
			}
			seen[cand] = true
			c := cand
			if first == nil || referenceLessThan(c, *first) {
				first = &c
			}
			if referenceLessThan(absent, c) && (firstFollowing == nil || referenceLessThan(c, *firstFollowing)) {
				firstFollowing = &c
			}
		}
	}
	if firstFollowing != nil {
		return firstFollowing
	}
	return first
}

// firstSignOfDeletion: ev is where the graph first sees obj deleted: an
// update giving it a deletion timestamp, or the delete event of an object
// that had none (deleted at once). The final delete of an object already
// marked (a pod the kubelet finished) is the same deletion again, whoever
// asked for it.
func firstSignOfDeletion(ev *event, obj metav1.Object) bool {
	switch ev.eventType {
	case deleteEvent:
		return !beingDeleted(obj)
	case updateEvent:
		if !beingDeleted(obj) || ev.oldObj == nil {
			return false
		}
		old, err := meta.Accessor(ev.oldObj)
		return err == nil && !beingDeleted(old)
	}
	return false
}
