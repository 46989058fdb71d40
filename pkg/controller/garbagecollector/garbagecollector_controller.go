// Package garbagecollector is the garbage-collector-controller: it watches
// every deletable resource, keeps a graph of ownerReferences keyed by UID,
// and deletes dependents whose owners are gone (background), deletes
// dependents before their owner (foreground, foregroundDeletion finalizer)
// or strips the owner from its dependents (orphan finalizer).
package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// GarbageCollector owns the workers draining attemptToDelete and
// attemptToOrphan; the GraphBuilder feeds both queues.
type GarbageCollector struct {
	restMapper             meta.ResettableRESTMapper
	metadataClient         metadata.Interface
	kubeClient             clientset.Interface
	dependencyGraphBuilder *GraphBuilder
	attemptToDelete        workqueue.TypedRateLimitingInterface[*node]
	attemptToOrphan        workqueue.TypedRateLimitingInterface[*node]
	absentOwnerCache       *referenceCache
	recentDeletes          *recentDeletes
}

// NewGarbageCollector builds a collector and its graph builder.
// sharedInformers is usually NewInformerFactory(typed, metadata).
func NewGarbageCollector(
	ctx context.Context,
	kubeClient clientset.Interface,
	metadataClient metadata.Interface,
	mapper meta.ResettableRESTMapper,
	ignoredResources map[schema.GroupResource]struct{},
	sharedInformers InformerFactory,
	informersStarted <-chan struct{},
) (*GarbageCollector, error) {
	gb := NewDependencyGraphBuilder(ctx, metadataClient, mapper, ignoredResources, sharedInformers, informersStarted)
	return NewComposedGarbageCollector(ctx, kubeClient, metadataClient, mapper, gb)
}

// NewComposedGarbageCollector builds a collector around an existing graph
// builder (upstream creates the builder with the ControllerContext).
func NewComposedGarbageCollector(
	_ context.Context,
	kubeClient clientset.Interface,
	metadataClient metadata.Interface,
	mapper meta.ResettableRESTMapper,
	gb *GraphBuilder,
) (*GarbageCollector, error) {
	RegisterMetrics()
	return &GarbageCollector{
		restMapper:             mapper,
		metadataClient:         metadataClient,
		kubeClient:             kubeClient,
		dependencyGraphBuilder: gb,
		attemptToDelete:        gb.attemptToDelete,
		attemptToOrphan:        gb.attemptToOrphan,
		absentOwnerCache:       gb.absentOwnerCache,
		recentDeletes:          gb.recentDeletes,
	}, nil
}

// Name is the controller's name in upstream's registry.
func (gc *GarbageCollector) Name() string { return "garbagecollector" }

// GetDependencyGraphBuilder exposes the graph builder (for sharing/tests).
func (gc *GarbageCollector) GetDependencyGraphBuilder() *GraphBuilder {
	return gc.dependencyGraphBuilder
}

// Run runs the graph builder and workers until ctx ends. Workers start once
// all monitors synced or initialSyncTimeout passed, whichever is first: a
// resource whose informer cannot sync must not stop collection elsewhere.
func (gc *GarbageCollector) Run(ctx context.Context, workers int, initialSyncTimeout time.Duration) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(gc.dependencyGraphBuilder.eventBroadcaster, gc.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", "garbagecollector")

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down controller", "controller", "garbagecollector")
		gc.dependencyGraphBuilder.graphChanges.ShutDown()
		gc.attemptToOrphan.ShutDown()
		gc.attemptToDelete.ShutDown()
		wg.Wait()
	}()

	controller.ReportQueue(ctx, graphChangesQueueName, gc.dependencyGraphBuilder.graphChanges.Len)
	controller.ReportQueue(ctx, attemptToDeleteQueueName, gc.attemptToDelete.Len)
	controller.ReportQueue(ctx, attemptToOrphanQueueName, gc.attemptToOrphan.Len)
	wg.Go(func() { gc.dependencyGraphBuilder.Run(ctx) })

	controller.StatusFrom(ctx).ReportSynced(func() bool { return gc.dependencyGraphBuilder.IsSynced(logger) })
	syncCtx, cancel := context.WithTimeout(ctx, initialSyncTimeout)
	defer cancel()
	if cache.WaitForNamedCacheSyncWithContext(syncCtx, func() bool { return gc.dependencyGraphBuilder.IsSynced(logger) }) {
		logger.Info("Garbage collector: all resource monitors have synced")
	} else {
		logger.Info("Garbage collector: not all resource monitors could be synced, proceeding anyways")
	}
	logger.Info("Proceeding to collect garbage")

	for i := 0; i < workers; i++ {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for gc.processAttemptToDeleteWorker(ctx) {
				}
			}, time.Second)
		})
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for gc.processAttemptToOrphanWorker(ctx) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
}

// Sync re-discovers deletable resources every period and, when the set
// changed, resets the RESTMapper and adds/removes monitors. discoveryClient
// should not be the mapper's own client, or every check would invalidate
// the mapper's cache.
func (gc *GarbageCollector) Sync(ctx context.Context, discoveryClient discovery.ServerResourcesInterface, period time.Duration) {
	old := map[schema.GroupVersionResource]struct{}{}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		logger := klog.FromContext(ctx)
		current, err := GetDeletableResources(logger, discoveryClient)
		if len(current) == 0 {
			logger.V(2).Info("no resources reported by discovery, skipping garbage collector sync")
			resourcesSyncError.Inc()
			return
		}
		if failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err); ok {
			// Keep synced monitors of groups that failed discovery this time
			// rather than dropping their graph on a transient error.
			for r := range old {
				if _, f := failed[r.GroupVersion()]; f && gc.dependencyGraphBuilder.IsResourceSynced(r) {
					current[r] = struct{}{}
				}
			}
		}
		if reflect.DeepEqual(old, current) {
			logger.V(5).Info("no resource updates from discovery, skipping garbage collector sync")
			return
		}
		logger.V(2).Info("syncing garbage collector with updated resources from discovery", "diff", printDiff(old, current))

		// New resources may be unknown to the mapper's cached discovery.
		gc.restMapper.Reset()
		logger.V(4).Info("reset restmapper")

		if err := gc.resyncMonitors(logger, current); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "failed to sync resource monitors")
			resourcesSyncError.Inc()
			return
		}
		logger.V(4).Info("resynced monitors")

		syncCtx, cancel := context.WithTimeout(ctx, period)
		defer cancel()
		if cache.WaitForNamedCacheSyncWithContext(syncCtx, func() bool { return gc.dependencyGraphBuilder.IsSynced(logger) }) {
			logger.V(2).Info("synced garbage collector")
		} else {
			utilruntime.HandleErrorWithContext(ctx, errors.New("timed out waiting for dependency graph builder sync during GC sync"), "GC sync")
			resourcesSyncError.Inc()
		}
		// Tracked even when unsynced, so a later pass can drop them.
		old = current
	}, period)
}

func (gc *GarbageCollector) resyncMonitors(logger klog.Logger, resources map[schema.GroupVersionResource]struct{}) error {
	if err := gc.dependencyGraphBuilder.syncMonitors(logger, resources); err != nil {
		return err
	}
	gc.dependencyGraphBuilder.startMonitors(logger)
	return nil
}

func printDiff(old, current map[schema.GroupVersionResource]struct{}) string {
	var added, removed []string
	for r := range current {
		if _, ok := old[r]; !ok {
			added = append(added, fmt.Sprintf("%+v", r))
		}
	}
	for r := range old {
		if _, ok := current[r]; !ok {
			removed = append(removed, fmt.Sprintf("%+v", r))
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return fmt.Sprintf("added: %v, removed: %v", added, removed)
}

// IsSynced reports whether every monitor has synced.
func (gc *GarbageCollector) IsSynced(logger klog.Logger) bool {
	return gc.dependencyGraphBuilder.IsSynced(logger)
}

// GraphHasUID reports whether uid is in the graph (for tests).
func (gc *GarbageCollector) GraphHasUID(uid types.UID) bool {
	_, ok := gc.dependencyGraphBuilder.uidToNode.Read(uid)
	return ok
}

// GetDeletableResources returns the preferred-version resources supporting
// delete, list and watch. Discovery errors are returned along with whatever
// was discovered, so a failing aggregated API does not hide the rest.
func GetDeletableResources(logger klog.Logger, discoveryClient discovery.ServerResourcesInterface) (map[schema.GroupVersionResource]struct{}, error) {
	preferred, lookupErr := discoveryClient.ServerPreferredResources()
	if lookupErr != nil {
		if failed, ok := discovery.GroupDiscoveryFailedErrorGroups(lookupErr); ok {
			logger.Info("failed to discover some groups", "groups", fmt.Sprintf("%q", failed))
		} else {
			logger.Info("failed to discover preferred resources", "error", lookupErr)
		}
	}
	out := map[schema.GroupVersionResource]struct{}{}
	if preferred == nil {
		return out, lookupErr
	}
	deletable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, preferred)
	for _, rl := range deletable {
		gv, err := schema.ParseGroupVersion(rl.GroupVersion)
		if err != nil {
			logger.Info("ignoring invalid discovered resource", "groupversion", rl.GroupVersion, "error", err)
			continue
		}
		for _, r := range rl.APIResources {
			out[gv.WithResource(r.Name)] = struct{}{}
		}
	}
	return out, lookupErr
}

var (
	// errEnqueuedVirtualDeleteEvent: the item was found absent and the graph
	// will handle it; do not requeue.
	errEnqueuedVirtualDeleteEvent = errors.New("enqueued virtual delete event")
	// errNamespacedOwnerOfClusterScopedObject never resolves by retrying.
	errNamespacedOwnerOfClusterScopedObject = errors.New("cluster-scoped objects cannot refer to namespaced owners")
)

type queueAction int

const (
	requeueItem queueAction = iota
	forgetItem
	// requeueItemAfter: look again after the returned wait, not counted as
	// a failure.
	requeueItemAfter
)

func (gc *GarbageCollector) processAttemptToDeleteWorker(ctx context.Context) bool {
	item, quit := gc.attemptToDelete.Get()
	if quit {
		return false
	}
	defer gc.attemptToDelete.Done(item)
	switch action, after := gc.attemptToDeleteWorker(ctx, item); action {
	case forgetItem:
		gc.attemptToDelete.Forget(item)
	case requeueItem:
		gc.attemptToDelete.AddRateLimited(item)
	case requeueItemAfter:
		gc.attemptToDelete.Forget(item)
		gc.attemptToDelete.AddAfter(item, after)
	}
	return true
}

func (gc *GarbageCollector) attemptToDeleteWorker(ctx context.Context, n *node) (queueAction, time.Duration) {
	logger := klog.FromContext(ctx)
	if n.isObserved() {
		// Its deletion was observed while it waited: a lookup would only
		// confirm that.
		if _, ok := gc.dependencyGraphBuilder.uidToNode.Read(n.identity.UID); !ok {
			logger.V(5).Info("item deleted while queued, skipping attemptToDeleteItem", "item", n.identity)
			return forgetItem, 0
		}
	} else {
		// A requeued virtual node may have been replaced or removed since.
		current, ok := gc.dependencyGraphBuilder.uidToNode.Read(n.identity.UID)
		if !ok {
			logger.V(5).Info("item no longer in the graph, skipping attemptToDeleteItem", "item", n.identity)
			return forgetItem, 0
		}
		if current.isObserved() {
			logger.V(5).Info("item no longer virtual in the graph, skipping attemptToDeleteItem on virtual node", "item", n.identity)
			return forgetItem, 0
		}
	}

	err := gc.attemptToDeleteItem(ctx, n)
	var deferred *deferredToTeardown
	switch {
	case errors.As(err, &deferred):
		return requeueItemAfter, deferred.after
	case errors.Is(err, errEnqueuedVirtualDeleteEvent), errors.Is(err, errNamespacedOwnerOfClusterScopedObject):
		return forgetItem, 0
	case err != nil:
		var rme *restMappingError
		if errors.As(err, &rme) {
			// An unknown kind may be a CRD not yet discovered: retry quietly.
			logger.V(5).Info("error syncing item", "item", n.identity, "err", err)
		} else {
			utilruntime.HandleErrorWithContext(ctx, err, "error syncing item", "item", n.identity)
		}
		return requeueItem, 0
	case !n.isObserved():
		// Keep checking a virtual node until an informer event or a
		// NotFound resolves it (https://issue.k8s.io/56121).
		logger.V(5).Info("item hasn't been observed via informer yet", "item", n.identity)
		return requeueItem, 0
	}
	return forgetItem, 0
}

// isDangling reports whether reference (of item) names an owner that does
// not exist; if it looked the owner up it returns it too.
func (gc *GarbageCollector) isDangling(ctx context.Context, reference metav1.OwnerReference, item *node) (bool, *metav1.PartialObjectMetadata, error) {
	logger := klog.FromContext(ctx)
	key := objectReference{OwnerReference: ownerReferenceCoordinates(reference)}
	if gc.absentOwnerCache.Has(key) {
		logger.V(5).Info("according to the absentOwnerCache, item's owner does not exist", "item", item.identity, "owner", reference)
		return true, nil, nil
	}
	key.Namespace = item.identity.Namespace
	if gc.absentOwnerCache.Has(key) {
		logger.V(5).Info("according to the absentOwnerCache, item's owner does not exist in namespace", "item", item.identity, "owner", reference)
		return true, nil, nil
	}

	resource, namespaced, err := gc.apiResource(reference.APIVersion, reference.Kind)
	if err != nil {
		return false, nil, err
	}
	if !namespaced {
		key.Namespace = ""
	}
	if item.identity.Namespace == "" && namespaced {
		logger.V(2).Info("item is cluster-scoped, but refers to a namespaced owner", "item", item.identity, "owner", reference)
		return false, nil, errNamespacedOwnerOfClusterScopedObject
	}

	// The owner is looked up in the dependent's namespace: a reference
	// cannot cross namespaces.
	owner, err := gc.metadataClient.Resource(resource).Namespace(namespaceFor(namespaced, item.identity.Namespace)).
		Get(ctx, reference.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		gc.absentOwnerCache.Add(key)
		logger.V(5).Info("item's owner is not found", "item", item.identity, "owner", reference)
		return true, nil, nil
	case err != nil:
		return false, nil, err
	}
	if owner.GetUID() != reference.UID {
		logger.V(5).Info("item's owner is not found, UID mismatch", "item", item.identity, "owner", reference)
		gc.absentOwnerCache.Add(key)
		return true, nil, nil
	}
	return false, owner, nil
}

// classifyReferences sorts references into solid (owner exists and is not
// deleting in foreground), dangling (owner absent) and
// waitingForDependentsDeletion (owner deleting in foreground).
func (gc *GarbageCollector) classifyReferences(ctx context.Context, item *node, refs []metav1.OwnerReference) (solid, dangling, waiting []metav1.OwnerReference, err error) {
	for _, ref := range refs {
		isDangling, owner, err := gc.isDangling(ctx, ref, item)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case isDangling:
			dangling = append(dangling, ref)
		case owner.GetDeletionTimestamp() != nil && hasDeleteDependentsFinalizer(owner):
			waiting = append(waiting, ref)
		default:
			solid = append(solid, ref)
		}
	}
	return solid, dangling, waiting, nil
}

func ownerRefsToUIDs(refs []metav1.OwnerReference) []types.UID {
	var out []types.UID
	for _, r := range refs {
		out = append(out, r.UID)
	}
	return out
}

// attemptToDeleteItem reads the live object behind item and deletes it if
// all its owners are gone, with the propagation its state calls for. A
// missing object (or one with another UID) becomes a virtual delete event.
func (gc *GarbageCollector) attemptToDeleteItem(ctx context.Context, item *node) error {
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Processing item", "item", item.identity, "virtual", !item.isObserved())

	// Deletion is one-way; wait for the final delete unless we are the
	// ones holding it (foreground).
	if item.isBeingDeleted() && !item.isDeletingDependents() {
		logger.V(5).Info("processing item returned at once, because its DeletionTimestamp is non-nil", "item", item.identity)
		return nil
	}

	latest, fromCache, err := gc.latestObject(ctx, item.identity)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(5).Info("item not found, generating a virtual delete event", "item", item.identity)
		gc.dependencyGraphBuilder.enqueueVirtualDeleteEvent(item.identity)
		return errEnqueuedVirtualDeleteEvent
	case err != nil:
		return err
	}
	if latest.GetUID() != item.identity.UID {
		logger.V(5).Info("UID doesn't match, item not found, generating a virtual delete event", "item", item.identity)
		gc.dependencyGraphBuilder.enqueueVirtualDeleteEvent(item.identity)
		return errEnqueuedVirtualDeleteEvent
	}
	if fromCache && gc.recentDeletes.deletedAt(latest.UID, latest.ResourceVersion) {
		logger.V(5).Info("item already deleted at the cached resourceVersion, waiting for the informer to report it", "item", item.identity, "resourceVersion", latest.ResourceVersion)
		return nil
	}

	if item.isDeletingDependents() {
		return gc.processDeletingDependentsItem(ctx, item, latest)
	}

	refs := latest.GetOwnerReferences()
	if len(refs) == 0 {
		logger.V(2).Info("item doesn't have an owner, continue on next item", "item", item.identity)
		return nil
	}

	solid, dangling, waiting, err := gc.classifyReferences(ctx, item, refs)
	if err != nil {
		return err
	}
	logger.V(5).Info("classify item's references", "item", item.identity, "solid", solid, "dangling", dangling, "waitingForDependentsDeletion", waiting)

	switch {
	case len(solid) != 0:
		logger.V(2).Info("item has at least one existing owner, will not garbage collect", "item", item.identity, "owner", solid)
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// Drop references to absent owners, and to owners deleting in
		// foreground, which would otherwise wait on this item forever.
		logger.V(2).Info("remove dangling references and waiting references for item", "item", item.identity, "dangling", dangling, "waitingForDependentsDeletion", waiting)
		uids := append(ownerRefsToUIDs(dangling), ownerRefsToUIDs(waiting)...)
		p, err := controller.GenerateDeleteOwnerRefStrategicMergeBytes(item.identity.UID, uids)
		if err != nil {
			return err
		}
		_, err = gc.patch(ctx, item, p, func(ctx context.Context, n *node) ([]byte, error) {
			return gc.deleteOwnerRefJSONMergePatch(ctx, n, uids...)
		})
		return err

	case len(waiting) != 0 && item.dependentsLength() != 0:
		// An owner waits on us and we have dependents: delete in foreground
		// too. If a dependent also deletes in foreground this may be a cycle;
		// stop blocking our owners first so it cannot deadlock. In a
		// namespace being torn down neither write is ours to make yet.
		if err := gc.deferToTeardown(logger, item); err != nil {
			return err
		}
		if unblocked := unblockedOwnerReferences(refs); len(unblocked) != 0 {
			for _, dep := range item.getDependents() {
				if !dep.isDeletingDependents() {
					continue
				}
				logger.V(2).Info("processing item, some of its owners and its dependent have FinalizerDeletingDependents, to prevent potential cycle, its ownerReferences are going to be modified to be non-blocking, then the item is going to be deleted with Foreground",
					"item", item.identity, "dependent", dep.identity)
				p, err := item.unblockOwnerReferencesStrategicMergePatch(unblocked)
				if err != nil {
					return err
				}
				patched, err := gc.patch(ctx, item, p, gc.unblockOwnerReferencesJSONMergePatch)
				if err != nil {
					return err
				}
				// Delete at the patched version, so the delete's precondition
				// does not trip over our own write.
				latest = patched
				break
			}
		}
		logger.V(2).Info("at least one owner of item has FinalizerDeletingDependents, and the item itself has dependents, so it is going to be deleted in Foreground", "item", item.identity)
		policy := metav1.DeletePropagationForeground
		return gc.deleteItem(ctx, item, latest, policy)

	default:
		// No solid owner left: collect it, honouring a propagation already
		// requested through finalizers.
		policy := metav1.DeletePropagationBackground
		switch {
		case hasOrphanFinalizer(latest):
			policy = metav1.DeletePropagationOrphan
		case hasDeleteDependentsFinalizer(latest):
			policy = metav1.DeletePropagationForeground
		}
		if err := gc.deferToTeardown(logger, item); err != nil {
			return err
		}
		logger.V(2).Info("Deleting item", "item", item.identity, "propagationPolicy", policy)
		return gc.deleteItem(ctx, item, latest, policy)
	}
}

// deferToTeardown returns a deferredToTeardown error while item's namespace
// is being deleted and its teardown makes progress: the namespace
// controller will delete item with the rest.
func (gc *GarbageCollector) deferToTeardown(logger klog.Logger, item *node) error {
	wait := gc.dependencyGraphBuilder.teardowns.deferral(item.identity.Namespace)
	if wait <= 0 {
		return nil
	}
	logger.V(5).Info("item's namespace is being deleted, leaving the item to it", "item", item.identity, "recheckAfter", wait)
	return &deferredToTeardown{after: wait}
}

// deleteItem deletes item at latest's resourceVersion and remembers that,
// so the lagging cache copy does not make us delete it again.
func (gc *GarbageCollector) deleteItem(ctx context.Context, item *node, latest *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	// Remembered before the call: the graph may process the resulting event
	// before the call returns, and must find the entry to forget. An object
	// already being deleted is not remembered, as deleting it again may
	// change nothing, and then no event would come to move the cache on.
	remember := latest.ResourceVersion != "" && latest.DeletionTimestamp == nil
	if remember {
		gc.recentDeletes.remember(item.identity.UID, latest.ResourceVersion)
	}
	err := gc.deleteObject(ctx, item.identity, latest.ResourceVersion, latest.OwnerReferences, &policy)
	if err != nil && remember {
		gc.recentDeletes.forget(item.identity.UID)
	}
	if apierrors.IsNotFound(err) {
		gc.dependencyGraphBuilder.enqueueVirtualDeleteEvent(item.identity)
		return errEnqueuedVirtualDeleteEvent
	}
	return err
}

// processDeletingDependentsItem handles an owner deleted in foreground:
// once no dependent blocks it, its foregroundDeletion finalizer goes;
// until then its blocking dependents are queued for deletion. latest is
// the item as just read.
func (gc *GarbageCollector) processDeletingDependentsItem(ctx context.Context, item *node, latest *metav1.PartialObjectMetadata) error {
	logger := klog.FromContext(ctx)
	blocking := item.blockingDependents()
	if len(blocking) == 0 {
		logger.V(2).Info("remove DeleteDependents finalizer for item", "item", item.identity)
		return gc.removeFinalizer(ctx, item, metav1.FinalizerDeleteDependents, latest)
	}
	for _, dep := range blocking {
		if !dep.isDeletingDependents() {
			logger.V(2).Info("adding dependent to attemptToDelete, because its owner is deletingDependents", "item", item.identity, "dependent", dep.identity)
			gc.attemptToDelete.Add(dep)
		}
	}
	return nil
}

// orphanDependents removes owner's reference from every dependent, in
// parallel. A missing reference or dependent is not an error.
func (gc *GarbageCollector) orphanDependents(ctx context.Context, owner objectReference, dependents []*node) error {
	errCh := make(chan error, len(dependents))
	var wg sync.WaitGroup
	for _, dep := range dependents {
		wg.Go(func() {
			p, err := controller.GenerateDeleteOwnerRefStrategicMergeBytes(dep.identity.UID, []types.UID{owner.UID})
			if err != nil {
				errCh <- fmt.Errorf("orphaning %s failed, %w", dep.identity, err)
				return
			}
			_, err = gc.patch(ctx, dep, p, func(ctx context.Context, n *node) ([]byte, error) {
				return gc.deleteOwnerRefJSONMergePatch(ctx, n, owner.UID)
			})
			if err != nil && !apierrors.IsNotFound(err) {
				errCh <- fmt.Errorf("orphaning %s failed, %w", dep.identity, err)
			}
		})
	}
	wg.Wait()
	close(errCh)
	var errs []error
	for err := range errCh {
		errs = append(errs, err)
	}
	if len(errs) != 0 {
		return fmt.Errorf("failed to orphan dependents of owner %s, got errors: %s", owner, utilerrors.NewAggregate(errs).Error())
	}
	klog.FromContext(ctx).V(5).Info("successfully updated all dependents", "owner", owner)
	return nil
}

func (gc *GarbageCollector) processAttemptToOrphanWorker(ctx context.Context) bool {
	item, quit := gc.attemptToOrphan.Get()
	if quit {
		return false
	}
	defer gc.attemptToOrphan.Done(item)
	switch gc.attemptToOrphanWorker(ctx, item) {
	case forgetItem:
		gc.attemptToOrphan.Forget(item)
	case requeueItem:
		gc.attemptToOrphan.AddRateLimited(item)
	}
	return true
}

// attemptToOrphanWorker orphans owner's dependents, then removes the
// orphan finalizer so the owner's deletion completes.
func (gc *GarbageCollector) attemptToOrphanWorker(ctx context.Context, owner *node) queueAction {
	if err := gc.orphanDependents(ctx, owner.identity, owner.getDependents()); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "orphanDependents failed", "owner", owner.identity)
		return requeueItem
	}
	if err := gc.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents, nil); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "removeOrphanFinalizer failed", "owner", owner.identity)
		return requeueItem
	}
	return forgetItem
}
