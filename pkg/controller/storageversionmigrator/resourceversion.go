package storageversionmigrator

import (
	"context"
	"fmt"
	"sync"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	svminformers "k8s.io/client-go/informers/storagemigration/v1"
	clientset "k8s.io/client-go/kubernetes"
	svmlisters "k8s.io/client-go/listers/storagemigration/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// ResourceVersionControllerName names the loop and its queue.
	ResourceVersionControllerName = "resource-version-controller"
	// fakeSVMNamespaceName is not a valid namespace name, so no namespace
	// has it: listing in it is the cheapest way to learn the current
	// resourceVersion of a namespaced resource.
	fakeSVMNamespaceName = "@fake:svm_ns!"
	// mapperResetInterval keeps a burst of unknown resources from
	// rediscovering over and over.
	mapperResetInterval = 10 * time.Second
)

// verbsRequiredForMigration are what a resource must serve to be migrated.
var verbsRequiredForMigration = []string{"update", "patch", "list"}

// ResourceVersionController records, in the status of each running
// migration, the resourceVersion of a fresh list of its resource: the
// migrator starts once the collector's cache has caught up with it.
type ResourceVersionController struct {
	kubeClient      clientset.Interface
	discoveryClient discovery.DiscoveryInterfaceWithContext
	metadataClient  metadata.Interface
	svmLister       svmlisters.StorageVersionMigrationLister
	svmSynced       cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]
	mapper          meta.ResettableRESTMapper
	clock           clock.PassiveClock

	lastResetLock sync.Mutex
	lastReset     time.Time
}

// NewResourceVersionController builds the loop. mapper is reset (at most
// every 10s) when a migration names a resource it does not know yet.
func NewResourceVersionController(
	ctx context.Context,
	kubeClient clientset.Interface,
	discoveryClient discovery.DiscoveryInterface,
	metadataClient metadata.Interface,
	svmInformer svminformers.StorageVersionMigrationInformer,
	mapper meta.ResettableRESTMapper,
) *ResourceVersionController {
	logger := klog.FromContext(ctx)
	c := &ResourceVersionController{
		kubeClient:      kubeClient,
		discoveryClient: discovery.ToDiscoveryInterfaceWithContext(discoveryClient),
		metadataClient:  metadataClient,
		svmLister:       svmInformer.Lister(),
		svmSynced:       svmInformer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ResourceVersionControllerName}),
		mapper: mapper,
		clock:  clock.RealClock{},
	}
	_, err := svmInformer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { enqueueSVM(logger, c.queue, "Adding", obj) },
		UpdateFunc: func(_, obj interface{}) { enqueueSVM(logger, c.queue, "Updating", obj) },
	}, cache.HandlerOptions{Logger: &logger})
	utilruntime.Must(err)
	return c
}

// Run waits for the informer and runs one worker until ctx is done.
func (c *ResourceVersionController) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	loop := controller.WorkLoop[string]{Name: ResourceVersionControllerName, Queue: c.queue, Sync: c.syncItem}
	loop.Run(ctx, 1, c.svmSynced)
}

// syncItem is sync with failures retried with backoff and logged
// verbosely only, as upstream.
func (c *ResourceVersionController) syncItem(ctx context.Context, key string) error {
	err := c.sync(ctx, key)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Error syncing SVM resource, retrying", "svm", key, "err", err)
	}
	return controller.Quietly(err)
}

func (c *ResourceVersionController) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()

	cached, err := c.svmLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	svm := cached.DeepCopy()

	// Only the migration the runner let run gets its end point.
	if !isRunning(svm) {
		logger.V(4).Info("Migration is not running yet, skipping", "svm", name)
		return nil
	}
	if isTerminal(svm) {
		logger.V(4).Info("Migration has already succeeded or failed previously, skipping", "svm", name)
		return nil
	}
	if svm.Status.ResourceVersion != "" {
		logger.V(4).Info("Resource version is already set", "svm", name)
		return nil
	}

	gvr, exists, err := resourceFor(c.mapper, svm.Spec.Resource)
	if err != nil {
		return err
	}
	if !exists {
		// A custom resource created a moment ago may not be discovered yet.
		if svm.CreationTimestamp.Add(discoveryGrace).After(c.clock.Now()) {
			c.resetMapperIfStale()
			return fmt.Errorf("resource does not exist in our rest mapper, requeuing to attempt again")
		}
		return c.failMigration(ctx, svm, "resource does not exist in discovery")
	}

	migratable, err := c.isResourceMigratable(ctx, *gvr)
	if err != nil {
		return err
	}
	if !migratable {
		err := fmt.Errorf("resource %q does not support discovery operations: %v", gvr.String(), verbsRequiredForMigration)
		logger.Error(err, "resource is not able to be migrated, not retrying", "gvr", gvr.String())
		return c.failMigration(ctx, svm, err.Error())
	}

	latest, err := c.latestResourceVersion(ctx, *gvr)
	if err != nil {
		return err
	}
	// Comparing it with itself validates it: the migrator could not use a
	// resourceVersion it cannot compare.
	if _, err := resourceversion.CompareResourceVersion(latest, latest); err != nil {
		return c.failMigration(ctx, svm, fmt.Errorf("latest resourceVersion for %s is not valid: %w", gvr.String(), err).Error())
	}

	svm.Status.ResourceVersion = latest
	if _, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, svm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("error updating status for %s: %w", svm.Name, err)
	}
	logger.V(4).Info("Resource version has been successfully added", "svm", name, "elapsed", c.clock.Since(start))
	return nil
}

// latestResourceVersion lists at most one object of gvr (in a namespace
// that cannot exist, if namespaced) and returns the list's resourceVersion.
func (c *ResourceVersionController) latestResourceVersion(ctx context.Context, gvr schema.GroupVersionResource) (string, error) {
	namespaced, err := c.isNamespaced(ctx, gvr)
	if err != nil {
		return "", err
	}
	client := c.metadataClient.Resource(gvr)
	opts := metav1.ListOptions{Limit: 1}
	var list *metav1.PartialObjectMetadataList
	if namespaced {
		list, err = client.Namespace(fakeSVMNamespaceName).List(ctx, opts)
	} else {
		list, err = client.List(ctx, opts)
	}
	if err != nil {
		return "", fmt.Errorf("error getting latest resourceVersion for %s: %w", gvr.String(), err)
	}
	return list.GetResourceVersion(), nil
}

func (c *ResourceVersionController) isNamespaced(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.discoveryClient.ServerResourcesForGroupVersionWithContext(ctx, gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return r.Namespaced, nil
		}
	}
	return false, fmt.Errorf("resource %q not found", gvr.String())
}

// isResourceMigratable reports whether discovery lists every verb the
// migration uses for gvr; an error when discovery cannot say.
func (c *ResourceVersionController) isResourceMigratable(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.discoveryClient.ServerResourcesForGroupVersionWithContext(ctx, gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	// A partial list may come with an error; use what it has.
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				return hasAllVerbs(r, verbsRequiredForMigration), nil
			}
		}
	}
	if err != nil {
		return false, err
	}
	return false, fmt.Errorf("resource %q not found in discovery", gvr.String())
}

// failMigration adds Failed (unless already decided) and writes the status.
func (c *ResourceVersionController) failMigration(ctx context.Context, svm *svmv1.StorageVersionMigration, message string) error {
	_, err := c.kubeClient.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx,
		addConditionOnce(svm, svmv1.MigrationFailed, migrationFailedReason, message), metav1.UpdateOptions{})
	return err
}

func (c *ResourceVersionController) resetMapperIfStale() {
	c.lastResetLock.Lock()
	defer c.lastResetLock.Unlock()
	if c.clock.Since(c.lastReset) > mapperResetInterval {
		c.mapper.Reset()
		c.lastReset = c.clock.Now()
	}
}
