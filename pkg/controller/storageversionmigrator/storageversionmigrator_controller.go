// Package storageversionmigrator is the storage-version-migrator-controller
// (alias svm). A StorageVersionMigration names a group and resource whose
// objects must all be rewritten, so that etcd holds them in the current
// storage version (or under the current encryption key). Three loops share
// the StorageVersionMigration informer, as upstream:
//
//   - the migration runner (NewCustomResourceController) lets one
//     migration per resource run at a time (condition Running), marks a
//     custom resource's CRD StorageMigrating while it runs, and afterwards
//     sets Running=False and trims the CRD's storedVersions;
//   - the resource version controller records in status.resourceVersion
//     the resourceVersion of a fresh list of the resource, the point the
//     migration must cover;
//   - the migrator (NewController) waits until the garbage collector's
//     cache of the resource has caught up to that point, then writes every
//     object it holds that is not newer with an empty merge patch, and sets
//     Succeeded or Failed.
package storageversionmigrator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	svminformers "k8s.io/client-go/informers/storagemigration/v1"
	clientset "k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// migratorWorkers is upstream's fixed worker count: the controller has
	// no flag.
	migratorWorkers = 5
	// discoveryGrace is how long after its creation a migration waits for
	// its resource to show up in discovery and in the collector before it
	// is failed: discovery is refreshed every 30s, so twice that.
	discoveryGrace = time.Minute
	// monitorWait bounds the wait for the collector's cache of a resource
	// so that one unsynced resource does not hold a worker.
	monitorWait = 10 * time.Second
)

// Controller migrates the objects of each StorageVersionMigration once
// the resource version controller recorded where the migration ends.
type Controller struct {
	controllerName string
	kubeClient     clientset.Interface
	dynamicClient  dynamic.Interface
	svmLister      svmlisters.StorageVersionMigrationLister
	svmSynced      cache.InformerSynced
	queue          workqueue.TypedRateLimitingInterface[string]
	loop           controller.WorkLoop[string]
	// rateLimiter is the queue's, kept to combine its backoff with a
	// server-suggested delay.
	rateLimiter workqueue.TypedRateLimiter[string]
	restMapper  meta.RESTMapper
	graph       GraphBuilder
	clock       clock.PassiveClock
}

// NewController builds the migrator. dynamicClient writes the migrated
// objects; graph gives the cached objects of a resource (the garbage
// collector's graph builder upstream, see MetadataMonitors); controllerName
// names the queue and is the field manager of the writes.
func NewController(
	ctx context.Context,
	kubeClient clientset.Interface,
	dynamicClient dynamic.Interface,
	svmInformer svminformers.StorageVersionMigrationInformer,
	controllerName string,
	mapper meta.RESTMapper,
	graph GraphBuilder,
) *Controller {
	logger := klog.FromContext(ctx)
	rateLimiter := workqueue.DefaultTypedControllerRateLimiter[string]()
	c := &Controller{
		controllerName: controllerName,
		kubeClient:     kubeClient,
		dynamicClient:  dynamicClient,
		svmLister:      svmInformer.Lister(),
		svmSynced:      svmInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: controllerName}),
		rateLimiter: rateLimiter,
		restMapper:  mapper,
		graph:       graph,
		clock:       clock.RealClock{},
	}
	c.loop = controller.WorkLoop[string]{Name: controllerName, Queue: c.queue, Sync: c.syncItem}
	_, err := svmInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueueSVM(logger, c.queue, "Adding", obj) },
		UpdateFunc: func(_, obj interface{}) { enqueueSVM(logger, c.queue, "Updating", obj) },
	}, cache.HandlerOptions{Logger: &logger})
	utilruntime.Must(err)
	return c
}

// Name is the controller's name.
func (c *Controller) Name() string { return c.controllerName }

// enqueueSVM queues a migration by name (they are cluster-scoped).
func enqueueSVM(logger klog.Logger, queue workqueue.TypedInterface[string], what string, obj interface{}) {
	svm, ok := obj.(*svmv1.StorageVersionMigration)
	if !ok {
		return
	}
	logger.V(4).Info(what, "svm", klog.KObj(svm))
	queue.Add(svm.Name)
}

// Run waits for the informer and runs the workers until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, migratorWorkers, c.svmSynced)
}

// syncItem is sync with upstream's retries: a server-suggested delay is
// waited out, though never shorter than the key's backoff (which it
// counts), other errors back off. Failures are logged verbosely only.
func (c *Controller) syncItem(ctx context.Context, key string) error {
	err := c.sync(ctx, key)
	if err == nil {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Error syncing SVM resource, retrying", "svm", key, "err", err)
	if seconds, ok := apierrors.SuggestsClientDelay(err); ok {
		return controller.RequeueAfter(max(time.Duration(seconds)*time.Second, c.rateLimiter.When(key)))
	}
	return controller.Quietly(err)
}

func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()

	cached, err := c.svmLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The other loops write the same object: never touch the cached one.
	svm := cached.DeepCopy()

	if isTerminal(svm) {
		logger.V(4).Info("Migration has already succeeded or failed previously, skipping", "svm", name)
		return nil
	}
	if svm.Status.ResourceVersion == "" {
		// The resource version controller has not recorded the end point
		// yet; its status write brings the migration back here.
		logger.V(4).Info("The latest resource version is empty. We will attempt to migrate once the resource version is available.")
		return nil
	}

	gvr, exists, err := resourceFor(c.restMapper, svm.Spec.Resource)
	if err != nil {
		return err
	}
	if !exists {
		logger.V(4).Info("resource does not exist in our rest mapper", "resource", svm.Spec.Resource.String())
		if c.withinDiscoveryGrace(svm) {
			return fmt.Errorf("resource does not exist in rest mapper, requeuing to attempt again: %w", err)
		}
		return c.failMigration(ctx, svm, fmt.Errorf("unable to obtain GVR from discovery"))
	}

	monCtx, cancel := context.WithTimeout(ctx, monitorWait)
	defer cancel()
	monitor, synced, err := c.graph.GetMonitor(monCtx, *gvr)
	if err != nil {
		return err
	}
	if !synced {
		logger.V(4).Info("resource does not exist in GC", "gvr", gvr.String())
		// A custom resource created a moment ago may not be watched yet.
		if c.withinDiscoveryGrace(svm) {
			return fmt.Errorf("resource does not exist in GC, requeuing to attempt again: %w", err)
		}
		return c.failMigration(ctx, svm, fmt.Errorf("resource does not exist in GC: %w", err))
	}

	// The cache must have seen everything up to the recorded point, or
	// objects written before it could be missed.
	cacheRV := monitor.Controller.LastSyncResourceVersion()
	targetRV := svm.Status.ResourceVersion
	cmp, err := resourceversion.CompareResourceVersion(cacheRV, targetRV)
	if err != nil {
		return c.failMigration(ctx, svm, fmt.Errorf("error comparing resource versions between GC and SVM resource: %w", err))
	}
	if cmp < 0 {
		return fmt.Errorf("GC cache is not up to date, requeuing to attempt again. gcListResourceVersion: %s, listResourceVersion: %s", cacheRV, targetRV)
	}

	if err := c.migrate(ctx, *gvr, monitor, svm, targetRV); err != nil {
		return err
	}
	logger.V(4).Info("Finished syncing svm resource", "key", name, "gr", svm.Spec.Resource.String(), "elapsed", c.clock.Since(start))
	return nil
}

func (c *Controller) withinDiscoveryGrace(svm *svmv1.StorageVersionMigration) bool {
	return svm.CreationTimestamp.Add(discoveryGrace).After(c.clock.Now())
}

// migrationPatch is the body of the write each object gets: only its kind
// and the resourceVersion it was cached at, so the apiserver re-encodes the
// stored object unchanged, and refuses (409) if it changed meanwhile, in
// which case that change already rewrote it.
type migrationPatch struct {
	Kind       string             `json:"kind,omitempty"`
	APIVersion string             `json:"apiVersion,omitempty"`
	Metadata   migrationPatchMeta `json:"metadata"`
}

type migrationPatchMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// migrate writes every cached object of gvr not newer than targetRV and
// records the outcome in svm's status. It returns an error only for what
// should be retried; a migration marked Failed returns nil.
func (c *Controller) migrate(ctx context.Context, gvr schema.GroupVersionResource, monitor *Monitor, svm *svmv1.StorageVersionMigration, targetRV string) error {
	logger := klog.FromContext(ctx)
	gvk, err := c.restMapper.KindFor(gvr)
	if err != nil {
		return c.failMigration(ctx, svm, err)
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()

	all := monitor.Store.List()
	p := progress{total: len(all)}
	var candidates []metav1.Object
	for _, obj := range all {
		o, err := meta.Accessor(obj)
		if err != nil {
			return c.failMigration(ctx, svm, err)
		}
		cmp, err := resourceversion.CompareResourceVersion(o.GetResourceVersion(), targetRV)
		if err != nil {
			logger.Error(err, "Unable to compare the resource version of the resource", "namespace", o.GetNamespace(), "name", o.GetName(),
				"gvr", gvr.String(), "accessorRV", o.GetResourceVersion(), "listResourceVersion", targetRV)
			return c.failMigration(ctx, svm, err)
		}
		if cmp > 0 {
			// Written after the migration's start: already in the new form.
			logger.V(6).Info("Resource ignored due to resource version being greater than the SVM checkpoint", "namespace", o.GetNamespace(),
				"name", o.GetName(), "gvr", gvr.String(), "accessorRV", o.GetResourceVersion(), "listResourceVersion", targetRV)
			continue
		}
		candidates = append(candidates, o)
	}
	p.remaining = len(candidates)

	for _, o := range candidates {
		body, err := json.Marshal(migrationPatch{Kind: kind, APIVersion: apiVersion, Metadata: migrationPatchMeta{ResourceVersion: o.GetResourceVersion()}})
		if err != nil {
			return c.failMigrationWithProgress(ctx, svm, err, p)
		}
		_, err = c.dynamicClient.Resource(gvr).Namespace(o.GetNamespace()).
			Patch(ctx, o.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: c.controllerName})
		switch {
		case err == nil:
			p.remaining--
			logger.V(4).Info("Successfully migrated the resource", "namespace", o.GetNamespace(), "name", o.GetName(), "gvr", gvr.String())
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			// Updated (so rewritten) or deleted since it was cached:
			// nothing left to migrate.
			logger.V(6).Info("Resource ignored due to conflict", "namespace", o.GetNamespace(), "name", o.GetName(), "gvr", gvr.String(), "err", err)
			p.remaining--
		case isRetriable(err):
			logger.V(6).Info("Resource patch failed due to an error that can be retried", "namespace", o.GetNamespace(), "name", o.GetName(), "gvr", gvr.String(), "err", err)
			_ = c.setRunning(ctx, svm, p, err)
			return err
		default:
			logger.Error(err, "Failed to migrate the resource", "namespace", o.GetNamespace(), "name", o.GetName(), "gvr", gvr.String(), "reason", apierrors.ReasonForError(err))
			return c.failMigrationWithProgress(ctx, svm, err, p)
		}
	}

	changed := meta.SetStatusCondition(&svm.Status.Conditions, runningCondition(&p, nil))
	if meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{
		Type:               string(svmv1.MigrationSucceeded),
		Status:             metav1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             migrationSucceededReason,
		Message:            "Migration completed",
	}) {
		changed = true
	}
	if !changed {
		return nil
	}
	_, err = c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// setRunning reports progress and the transient error that stopped a pass.
func (c *Controller) setRunning(ctx context.Context, svm *svmv1.StorageVersionMigration, p progress, transient error) error {
	if !meta.SetStatusCondition(&svm.Status.Conditions, runningCondition(&p, transient)) {
		return nil
	}
	_, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// isRetriable reports errors that say nothing about the object: the pass
// is retried later.
func isRetriable(err error) bool {
	return utilnet.IsConnectionReset(err) ||
		utilnet.IsHTTP2ConnectionLost(err) ||
		utilnet.IsProbableEOF(err) ||
		apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err)
}

func failedCondition(message string) metav1.Condition {
	return metav1.Condition{
		Type:               string(svmv1.MigrationFailed),
		Status:             metav1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             migrationFailedReason,
		Message:            message,
	}
}

// failMigration marks the migration Failed for an error it cannot get past.
func (c *Controller) failMigration(ctx context.Context, svm *svmv1.StorageVersionMigration, cause error) error {
	if !meta.SetStatusCondition(&svm.Status.Conditions, failedCondition(fmt.Sprintf("migration encountered unhandled error: %s", cause))) {
		return nil
	}
	_, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}

// failMigrationWithProgress is failMigration in the middle of the writes:
// Running and Failed both say how many objects were left.
func (c *Controller) failMigrationWithProgress(ctx context.Context, svm *svmv1.StorageVersionMigration, cause error, p progress) error {
	changed := meta.SetStatusCondition(&svm.Status.Conditions, runningCondition(&p, nil))
	msg := fmt.Sprintf("%d/%d not yet migrated. migration encountered unhandled error: %s", p.remaining, p.total, cause)
	if meta.SetStatusCondition(&svm.Status.Conditions, failedCondition(msg)) {
		changed = true
	}
	if !changed {
		return nil
	}
	_, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{})
	return err
}
