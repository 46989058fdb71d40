// Package namespace is the namespace-controller: when a namespace is
// deleted it removes everything in it and then releases the namespace by
// removing the "kubernetes" finalizer.
//
// Its flags are --concurrent-namespace-syncs (default 10 workers) and
// --namespace-sync-period (default 5m, the informer resync), as upstream.
package namespace

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace/deletion"
)

// queueName names the workqueue (and its workqueue_* metrics) as upstream.
const queueName = "namespace"

// deletionGracePeriod delays every sync of a deleted namespace so that HA
// apiservers see the deletion (and stop admitting new content) and lagging
// etcd members see last-moment creations before we clean up.
const deletionGracePeriod = 5 * time.Second

// Controller empties and finalizes namespaces being deleted.
type Controller struct {
	lister       corelisters.NamespaceLister
	listerSynced cache.InformerSynced
	queue        workqueue.TypedRateLimitingInterface[string]
	deleter      deletion.NamespacedResourcesDeleterInterface
	// gracePeriod is deletionGracePeriod; tests shorten it.
	gracePeriod time.Duration

	// podsLeft counts, per namespace waiting for its pods to terminate, the
	// pods still cached; set only after WakeWhenPodsGone.
	podsLeft *podCountdown
}

// NewController wires the controller to the namespace informer.
// discoverResourcesFn is normally the discovery client's
// ServerPreferredNamespacedResources; it is called once here (the process
// exits if it yields nothing, as upstream) and on every sync.
func NewController(
	ctx context.Context,
	kubeClient clientset.Interface,
	metadataClient metadata.Interface,
	discoverResourcesFn func() ([]*metav1.APIResourceList, error),
	namespaceInformer coreinformers.NamespaceInformer,
	resyncPeriod time.Duration,
	finalizerToken v1.FinalizerName) *Controller {
	nc := &Controller{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter(),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName}),
		deleter: deletion.NewNamespacedResourcesDeleter(ctx, kubeClient.CoreV1().Namespaces(), metadataClient,
			kubeClient.CoreV1(), discoverResourcesFn, finalizerToken),
		gracePeriod: deletionGracePeriod,
	}
	// Deletes need no handler: a namespace only disappears once we are done.
	_, _ = namespaceInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { nc.enqueue(ctx, obj) },
		UpdateFunc: func(_, obj interface{}) { nc.enqueue(ctx, obj) },
	}, resyncPeriod)
	nc.lister = namespaceInformer.Lister()
	nc.listerSynced = namespaceInformer.Informer().HasSynced
	return nc
}

// rateLimiter retries failures faster than the controller default (capped
// at a minute instead of ~16m): namespaces being deleted are few, and users
// wait on them.
func rateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// enqueue queues namespaces that are being deleted, after the grace period.
func (nc *Controller) enqueue(ctx context.Context, obj interface{}) {
	ns, ok := obj.(*v1.Namespace)
	if !ok {
		return
	}
	if ns.DeletionTimestamp == nil || ns.DeletionTimestamp.IsZero() {
		return
	}
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(ns)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Couldn't get key for object", "object", obj)
		return
	}
	nc.queue.AddAfter(key, nc.gracePeriod)
}

// Run waits for the namespace cache and syncs with workers goroutines until
// ctx is cancelled.
func (nc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	loop := nc.workLoop()
	loop.Run(ctx, workers, nc.listerSynced)
}

// workLoop drains nc.queue (read when called: tests swap the queue).
func (nc *Controller) workLoop() *controller.WorkLoop[string] {
	return &controller.WorkLoop[string]{Name: queueName, Queue: nc.queue, Sync: nc.syncItem}
}

// syncItem is syncNamespace with content still terminating looked at again
// after half its estimate plus a second, well before the longest grace
// period runs out. That wait keeps the key's backoff, as upstream's
// AddAfter does; failures retry with backoff rather than wait for a resync.
func (nc *Controller) syncItem(ctx context.Context, key string) error {
	err := nc.syncNamespace(ctx, key)
	var remaining *deletion.ResourcesRemainingError
	if !errors.As(err, &remaining) {
		return err
	}
	delay := remaining.Estimate/2 + 1
	klog.FromContext(ctx).V(4).Info("Content remaining in namespace", "namespace", key, "waitSeconds", delay)
	if nc.podsLeft != nil {
		nc.podsLeft.watch(key)
	}
	return controller.RequeueAfter(time.Duration(delay) * time.Second)
}

// syncNamespace runs one deletion pass over the namespace named key.
func (nc *Controller) syncNamespace(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() {
		logger.V(4).Info("Finished syncing namespace", "namespace", key, "duration", time.Since(start))
	}()

	ns, err := nc.lister.Get(key)
	if apierrors.IsNotFound(err) {
		logger.Info("Namespace has been deleted", "namespace", key)
		return nil
	}
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Unable to retrieve namespace from store", "namespace", key)
		return err
	}
	return nc.deleter.Delete(ctx, ns.Name)
}
