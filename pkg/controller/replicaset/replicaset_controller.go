// Package replicaset keeps the number of pods of each ReplicaSet equal to
// its spec.replicas and reports their state in its status. The same logic,
// parameterised by an Adapter, runs ReplicationControllers (package
// replication).
package replicaset

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// BurstReplicas is the default cap on pods created or deleted per sync.
	BurstReplicas = 500

	// statusUpdateRetries is how many times a failed status write is retried
	// (after a fresh GET) before the key is requeued.
	statusUpdateRetries = 1

	// DefaultStatusMinInterval is the Options.StatusMinInterval both kinds
	// run with: intermediate replica counts are at most this stale, while
	// settled states and condition changes are written at once.
	DefaultStatusMinInterval = 2 * time.Second
	// RolloutStepStatusInterval bounds the hold of an availableReplicas
	// change while an older sibling still has replicas (a Deployment's
	// rollout waits on it): counted from the first sync that sees the
	// change, long enough to write the pods of one creation batch that
	// become available close together once (one rollout step, not one per
	// pod), short beside a step.
	RolloutStepStatusInterval = 500 * time.Millisecond
	// TerminatingStatusInterval is the hold of a status whose only change
	// is the terminating count (nothing steps on it): during a rollout, long
	// beside a step, so the pods one step deleted go out with the next
	// step's write even on a busy cluster, where steps come tens of seconds
	// apart. The last terminating pod of an owner that is not stepped down
	// again is written at once.
	TerminatingStatusInterval = 30 * time.Second
)

var podsResource = schema.GroupResource{Resource: "pods"}

// Controller keeps ReplicaSets' pods at spec.replicas.
type Controller struct {
	*BaseController
}

// Features are the feature gates the ReplicaSet controller consults.
type Features struct {
	// TerminatingReplicas (DeploymentReplicaSetTerminatingReplicas) reports
	// status.terminatingReplicas.
	TerminatingReplicas bool
	// StaleControllerConsistency (StaleControllerConsistencyReplicaSet)
	// skips syncs until the informers have seen the controller's writes.
	StaleControllerConsistency bool
	// PodDeletionCost honours the pod-deletion-cost annotation on scale-down.
	PodDeletionCost bool
}

// NewController returns the ReplicaSet controller; start it with Run.
func NewController(ctx context.Context, rsInformer appsinformers.ReplicaSetInformer, podInformer coreinformers.PodInformer, kubeClient clientset.Interface, burstReplicas int, features Features) *Controller {
	adapter := newRSAdapter(ctx, rsInformer, kubeClient)
	opts := Options{
		GVK:                 apps.SchemeGroupVersion.WithKind("ReplicaSet"),
		QueueName:           "replicaset",
		EventComponent:      "replicaset-controller",
		TerminatingReplicas: features.TerminatingReplicas,
		PodDeletionCost:     features.PodDeletionCost,
		StatusMinInterval:   DefaultStatusMinInterval,
	}
	if features.StaleControllerConsistency {
		opts.Resource = apps.Resource("replicasets")
	}
	return &Controller{NewBaseController(ctx, adapter, podInformer, kubeClient, burstReplicas, opts)}
}

// BaseController is the controller shared by ReplicaSets and
// ReplicationControllers.
type BaseController struct {
	gvk     schema.GroupVersionKind
	adapter Adapter
	opts    Options

	kubeClient       clientset.Interface
	podControl       controller.PodControlInterface
	eventBroadcaster record.EventBroadcaster

	// burstReplicas caps creations/deletions per sync; the rest wait for the
	// next sync, once the watch has shown these.
	burstReplicas int
	// expectations holds each owner back until the pods it created or
	// deleted show up in the informer, so it never acts twice on stale data.
	expectations *controller.UIDTrackingControllerExpectations
	// consistency holds each owner back until the informers have seen this
	// controller's latest writes.
	consistency controller.ConsistencyStore

	podLister corelisters.PodLister
	// nsLister, when set, shows namespaces being deleted: no pods are
	// created there.
	nsLister     corelisters.NamespaceLister
	podIndexer   cache.Indexer
	podsSynced   cache.InformerSynced
	ownersSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
	clock clock.PassiveClock

	// lastStatusWrite is when each owner's (by key) status was last
	// written, for Options.StatusMinInterval; stepHeldSince is when a
	// rollout step's status was first held back (stepHold);
	// batchHeldSince is when an availability change a rollout steps on was
	// first held back (gainHold).
	statusMu        sync.Mutex
	lastStatusWrite map[string]time.Time
	stepHeldSince   map[string]time.Time
	batchHeldSince  map[string]time.Time

	// uncertainCreates: owners a pod create of which failed without the
	// API server's verdict, so the pod may exist anyway.
	uncertainCreates *controller.UncertainCreates

	// syncHandler is sync; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewBaseController wires the shared controller for the kind behind adapter.
func NewBaseController(ctx context.Context, adapter Adapter, podInformer coreinformers.PodInformer, kubeClient clientset.Interface, burstReplicas int, opts Options) *BaseController {
	logger := klog.FromContext(ctx)
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, opts.EventComponent)

	c := &BaseController{
		gvk:              opts.GVK,
		adapter:          adapter,
		opts:             opts,
		kubeClient:       kubeClient,
		eventBroadcaster: broadcaster,
		burstReplicas:    burstReplicas,
		expectations:     controller.NewUIDTrackingControllerExpectations(controller.NewControllerExpectations()),
		consistency:      controller.NewNoopConsistencyStore(),
		podLister:        podInformer.Lister(),
		podsSynced:       podInformer.Informer().HasSynced,
		ownersSynced:     adapter.Informer().HasSynced,
		queue:            controller.NewNamedQueue(opts.QueueName),
		clock:            clock.RealClock{},
		lastStatusWrite:  map[string]time.Time{},
		stepHeldSince:    map[string]time.Time{},
		batchHeldSince:   map[string]time.Time{},
		uncertainCreates: controller.NewUncertainCreates(),
	}
	podControl := controller.RealPodControl{KubeClient: kubeClient, Recorder: recorder}
	if opts.Resource != (schema.GroupResource{}) {
		c.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			podsResource:  podInformer.Informer().GetStore(),
			opts.Resource: adapter.Informer().GetStore(),
		})
		podControl.OnWrite = c.podWritten
	}
	c.podControl = podControl
	c.syncHandler = c.sync
	c.loop = controller.WorkLoop[string]{
		Name:  strings.ToLower(opts.GVK.Kind),
		Queue: c.queue,
		Sync:  func(ctx context.Context, key string) error { return c.syncHandler(ctx, key) },
	}

	_, _ = adapter.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addOwner(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateOwner(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deleteOwner(logger, obj) },
	})
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.addPod(logger, obj) },
		// Every pod change wakes its owner (status counts readiness); the
		// sync only reads caches, so this is cheap.
		UpdateFunc: func(old, cur interface{}) { c.updatePod(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deletePod(logger, obj) },
	})
	if err := controller.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		logger.Error(err, "Unable to add the pod controller index")
	}
	if err := controller.AddPodTemplateHashIndexer(podInformer.Informer()); err != nil {
		logger.Error(err, "Unable to add the pod template hash index")
	}
	c.podIndexer = podInformer.Informer().GetIndexer()
	return c
}

// WithNamespaceInformer lets the controller skip pod creations in
// namespaces being deleted (the API server refuses them). Call before the
// informers start.
func (c *BaseController) WithNamespaceInformer(nsInformer coreinformers.NamespaceInformer) {
	c.nsLister = nsInformer.Lister()
}

// Run starts sending events, waits for the caches and syncs with workers
// goroutines until ctx is cancelled.
func (c *BaseController) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(c.eventBroadcaster, c.kubeClient)
	defer stopEvents()
	c.loop.Run(ctx, workers, c.podsSynced, c.ownersSynced)
}

// podWritten records a pod write for the consistency check.
func (c *BaseController) podWritten(pod *v1.Pod, ref *metav1.OwnerReference) {
	if ref == nil {
		return
	}
	c.consistency.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podsResource, pod.ResourceVersion)
}

func (c *BaseController) enqueue(o *Owner) {
	key, err := controller.KeyFunc(o.Object)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *BaseController) enqueueAfter(o *Owner, d time.Duration) {
	key, err := controller.KeyFunc(o.Object)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.AddAfter(key, d)
}

// resolveControllerRef returns the owner a pod's controller reference points
// to, or nil if it is another kind, missing, or a different incarnation.
func (c *BaseController) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *Owner {
	if ref.Kind != c.gvk.Kind {
		return nil
	}
	o, err := c.adapter.Get(namespace, ref.Name)
	if err != nil || o.Object.GetUID() != ref.UID {
		return nil
	}
	return o
}

func (c *BaseController) addOwner(logger klog.Logger, obj interface{}) {
	o, ok := c.adapter.ToOwner(obj)
	if !ok {
		return
	}
	logger.V(4).Info("Adding", "kind", c.gvk.Kind, "object", klog.KObj(o.Object))
	c.enqueue(o)
}

// updateOwner enqueues on every update, resyncs included: that is how an
// owner whose pod creations failed gets retried.
func (c *BaseController) updateOwner(logger klog.Logger, old, cur interface{}) {
	oldO, ok1 := c.adapter.ToOwner(old)
	curO, ok2 := c.adapter.ToOwner(cur)
	if !ok1 || !ok2 {
		return
	}
	if oldO.Object.GetUID() != curO.Object.GetUID() {
		// Deleted and recreated under the same name between two events.
		key, err := controller.KeyFunc(oldO.Object)
		if err == nil {
			c.deleteOwner(logger, cache.DeletedFinalStateUnknown{Key: key, Obj: oldO.Object})
		}
	}
	if oldO.Replicas != curO.Replicas {
		logger.V(4).Info("Desired pod count changed", "kind", c.gvk.Kind, "object", klog.KObj(curO.Object), "oldReplicas", oldO.Replicas, "newReplicas", curO.Replicas)
	}
	c.enqueue(curO)
}

func (c *BaseController) deleteOwner(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	o, ok := c.adapter.ToOwner(obj)
	if !ok {
		utilruntime.HandleError(errUnexpected("owner", obj))
		return
	}
	key, err := controller.KeyFunc(o.Object)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	logger.V(4).Info("Deleting", "kind", c.gvk.Kind, "object", klog.KObj(o.Object))
	c.consistency.Clear(types.NamespacedName{Namespace: o.Object.GetNamespace(), Name: o.Object.GetName()}, o.Object.GetUID())
	// A new object with the same name must start without expectations.
	c.expectations.DeleteExpectations(logger, key)
	c.forgetStatusWrite(key)
	c.queue.Add(key)
}

// addPod observes a creation for the pod's owner, or offers an orphan to
// every owner whose selector matches it.
func (c *BaseController) addPod(logger klog.Logger, obj interface{}) {
	pod := obj.(*v1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (e.g. after a
		// restart): that is no creation to observe.
		c.deletePod(logger, pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		o := c.resolveControllerRef(pod.Namespace, ref)
		if o == nil {
			return
		}
		key, err := controller.KeyFunc(o.Object)
		if err != nil {
			return
		}
		logger.V(4).Info("Pod created", "pod", klog.KObj(pod))
		c.expectations.CreationObserved(logger, key)
		c.queue.Add(key)
		return
	}
	// Orphans never satisfy a creation expectation.
	for _, o := range c.adapter.OwnersOfPod(pod) {
		logger.V(4).Info("Orphan Pod created", "pod", klog.KObj(pod))
		c.enqueue(o)
	}
}

// updatePod wakes the owners concerned by a pod change: the old and new
// controller if the reference changed, or matching owners of an orphan
// whose labels changed.
func (c *BaseController) updatePod(logger klog.Logger, old, cur interface{}) {
	oldPod, curPod := old.(*v1.Pod), cur.(*v1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		// Periodic resync: nothing changed.
		return
	}
	labelsChanged := !reflect.DeepEqual(oldPod.Labels, curPod.Labels)
	if curPod.DeletionTimestamp != nil {
		// Graceful deletion started: count it as the deletion now so the
		// owner can replace the pod without waiting for it to go away.
		c.deletePod(logger, curPod)
		if labelsChanged {
			c.deletePod(logger, oldPod)
		}
		return
	}

	curRef := metav1.GetControllerOfNoCopy(curPod)
	oldRef := metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if o := c.resolveControllerRef(oldPod.Namespace, oldRef); o != nil {
			c.enqueue(o)
		}
	}
	if curRef != nil {
		o := c.resolveControllerRef(curPod.Namespace, curRef)
		if o == nil {
			return
		}
		c.enqueue(o)
		// A pod that just became ready becomes available minReadySeconds
		// later without another event; come back then.
		if o.MinReadySeconds > 0 && !controller.IsPodReady(oldPod) && controller.IsPodReady(curPod) {
			logger.V(2).Info("Pod will be enqueued after a while for availability check", "duration", o.MinReadySeconds, "kind", c.gvk.Kind, "pod", klog.KObj(curPod))
			c.enqueueAfter(o, time.Duration(o.MinReadySeconds)*time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, o := range c.adapter.OwnersOfPod(curPod) {
			c.enqueue(o)
		}
	}
}

// deletePod observes a deletion for the pod's owner.
func (c *BaseController) deletePod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		t, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			utilruntime.HandleError(errUnexpected("pod", obj))
			return
		}
		if pod, ok = t.Obj.(*v1.Pod); !ok {
			utilruntime.HandleError(errUnexpected("pod", t.Obj))
			return
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	o := c.resolveControllerRef(pod.Namespace, ref)
	if o == nil {
		return
	}
	key, err := controller.KeyFunc(o.Object)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "deletionTimestamp", pod.DeletionTimestamp)
	c.expectations.DeletionObserved(logger, key, controller.PodKey(pod))
	c.queue.Add(key)
}
