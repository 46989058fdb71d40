// Package daemon runs one pod of each DaemonSet on every node the
// DaemonSet's pod template may run on (node selector, required node
// affinity, taints), rolls pods to new templates as the update strategy
// allows, keeps the template history as ControllerRevisions and reports
// the DaemonSet's status.
//
// Pods are not bound by this controller: each is created with a required
// node affinity on its node's name and the scheduler binds it.
package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// BurstReplicas caps the pods created (and deleted) in one sync; the
	// rest wait until the watch has shown these. Higher values risk
	// overloading image registries when a DaemonSet lands on many nodes.
	BurstReplicas = 250

	// StatusUpdateRetries is how often a failed status write is retried
	// (after a fresh GET) before the DaemonSet is requeued.
	StatusUpdateRetries = 1

	// BackoffGCInterval is how often stale failed-pod backoff entries are
	// dropped.
	BackoffGCInterval = 1 * time.Minute
)

// Event reasons recorded on DaemonSets.
const (
	// SelectingAllReason: the DaemonSet's selector is empty.
	SelectingAllReason = "SelectingAll"
	// FailedPlacementReason: a pod could not be placed on a node. Kept for
	// parity with upstream, which declares it but no longer emits it.
	FailedPlacementReason = "FailedPlacement"
	// FailedDaemonPodReason: a daemon pod failed and is being deleted.
	FailedDaemonPodReason = "FailedDaemonPod"
	// SucceededDaemonPodReason: a daemon pod exited and is being deleted.
	SucceededDaemonPodReason = "SucceededDaemonPod"
)

// Features are the feature gates the DaemonSet controller consults.
type Features struct {
	// StaleControllerConsistency (StaleControllerConsistencyDaemonSet) skips
	// syncs until the informers have seen the controller's own pod and
	// status writes.
	StaleControllerConsistency bool
	// TaintTolerationComparisonOperators enables Lt/Gt tolerations.
	TaintTolerationComparisonOperators bool
}

// Queue names, which are also the "name" label of the workqueue metrics.
const (
	queueName           = "daemonset"
	nodeUpdateQueueName = "daemonset-node-updates"
)

var (
	controllerKind    = apps.SchemeGroupVersion.WithKind("DaemonSet")
	daemonSetResource = schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	podResource       = schema.GroupResource{Resource: "pods"}
)

// Controller keeps DaemonSets' pods on their nodes.
type Controller struct {
	kubeClient       clientset.Interface
	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder

	podControl controller.PodControlInterface
	crControl  controller.ControllerRevisionControlInterface

	// burstReplicas caps creations and deletions per sync.
	burstReplicas int
	// expectations holds a DaemonSet back until the pods it created or
	// deleted show up in the informer, so it never acts twice on stale data.
	expectations controller.ControllerExpectationsInterface
	// consistency holds a DaemonSet back until the informers have seen our
	// latest pod and status writes for it.
	consistency controller.ConsistencyStore
	// uncertainCreates: DaemonSets a pod create of which failed without the
	// API server's verdict, so the pod may exist anyway.
	uncertainCreates *controller.UncertainCreates
	// comparisonOperators enables Lt/Gt tolerations.
	comparisonOperators bool

	dsLister        appslisters.DaemonSetLister
	dsSynced        cache.InformerSynced
	historyLister   appslisters.ControllerRevisionLister
	historySynced   cache.InformerSynced
	podLister       corelisters.PodLister
	podIndexer      cache.Indexer
	podSynced       cache.InformerSynced
	nodeLister      corelisters.NodeLister
	nodeSynced      cache.InformerSynced
	queue           workqueue.TypedRateLimitingInterface[string]
	nodeUpdateQueue workqueue.TypedRateLimitingInterface[string]
	loop            controller.WorkLoop[string]
	nodeLoop        controller.WorkLoop[string]

	// failedPodsBackoff spaces out the deletion of failed pods per node (a
	// kubelet rejecting pods would otherwise make us hot-loop) and its
	// clock is the controller's notion of now.
	failedPodsBackoff *flowcontrol.Backoff

	// syncHandler is syncDaemonSet; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewController wires the controller to its informers; start it
// with Run. failedPodsBackoff is normally flowcontrol.NewBackOff(1s, 15m).
func NewController(
	ctx context.Context,
	daemonSetInformer appsinformers.DaemonSetInformer,
	historyInformer appsinformers.ControllerRevisionInformer,
	podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer,
	kubeClient clientset.Interface,
	failedPodsBackoff *flowcontrol.Backoff,
	features Features,
) (*Controller, error) {
	logger := klog.FromContext(ctx)
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "daemonset-controller")

	dsc := &Controller{
		kubeClient:          kubeClient,
		eventBroadcaster:    broadcaster,
		eventRecorder:       recorder,
		crControl:           controller.RealControllerRevisionControl{KubeClient: kubeClient},
		burstReplicas:       BurstReplicas,
		expectations:        controller.NewControllerExpectations(),
		consistency:         controller.NewNoopConsistencyStore(),
		uncertainCreates:    controller.NewUncertainCreates(),
		comparisonOperators: features.TaintTolerationComparisonOperators,
		dsLister:            daemonSetInformer.Lister(),
		dsSynced:            daemonSetInformer.Informer().HasSynced,
		historyLister:       historyInformer.Lister(),
		historySynced:       historyInformer.Informer().HasSynced,
		podLister:           podInformer.Lister(),
		podSynced:           podInformer.Informer().HasSynced,
		nodeLister:          nodeInformer.Lister(),
		nodeSynced:          nodeInformer.Informer().HasSynced,
		queue:               controller.NewNamedQueue(queueName),
		nodeUpdateQueue:     controller.NewNamedQueue(nodeUpdateQueueName),
		failedPodsBackoff:   failedPodsBackoff,
	}
	podControl := controller.RealPodControl{KubeClient: kubeClient, Recorder: recorder}
	if features.StaleControllerConsistency {
		dsc.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			podResource:       podInformer.Informer().GetStore(),
			daemonSetResource: daemonSetInformer.Informer().GetStore(),
		})
		podControl.OnWrite = dsc.podWritten
	}
	dsc.podControl = podControl
	dsc.syncHandler = dsc.syncDaemonSet
	dsc.loop = controller.WorkLoop[string]{
		Name:  queueName,
		Queue: dsc.queue,
		Sync:  func(ctx context.Context, key string) error { return dsc.syncHandler(ctx, key) },
	}
	dsc.nodeLoop = controller.WorkLoop[string]{Name: nodeUpdateQueueName, Queue: dsc.nodeUpdateQueue, Sync: dsc.syncNodeUpdate}

	if _, err := daemonSetInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dsc.addDaemonSet(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dsc.updateDaemonSet(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { dsc.deleteDaemonSet(logger, obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := historyInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dsc.addHistory(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dsc.updateHistory(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { dsc.deleteHistory(logger, obj) },
	}); err != nil {
		return nil, err
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dsc.addPod(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dsc.updatePod(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { dsc.deletePod(logger, obj) },
	}); err != nil {
		return nil, err
	}
	if err := addPodNodeNameIndexer(podInformer.Informer()); err != nil {
		return nil, err
	}
	if err := controller.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		return nil, err
	}
	dsc.podIndexer = podInformer.Informer().GetIndexer()
	// Node deletions need no handler: a pod bound to a vanished node is the
	// pod GC's, and an unbound one is dropped by the next sync of its set.
	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dsc.addNode(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dsc.updateNode(logger, old, cur) },
	}); err != nil {
		return nil, err
	}
	return dsc, nil
}

// Run sends events, waits for the caches, then syncs DaemonSets and node
// changes with workers goroutines each until ctx is cancelled.
func (dsc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(dsc.eventBroadcaster, dsc.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting daemon sets controller")
	defer logger.Info("Shutting down daemon sets controller")

	if !controller.WaitForCacheSync(ctx, "daemon sets", dsc.podSynced, dsc.nodeSynced, dsc.historySynced, dsc.dsSynced) {
		dsc.queue.ShutDown()
		dsc.nodeUpdateQueue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { dsc.loop.RunWorkers(ctx, workers) })
	wg.Go(func() { dsc.nodeLoop.RunWorkers(ctx, workers) })
	wg.Go(func() { wait.Until(dsc.failedPodsBackoff.GC, BackoffGCInterval, ctx.Done()) })
	wg.Wait()
}

// podWritten records a pod write for the consistency check.
func (dsc *Controller) podWritten(pod *v1.Pod, ref *metav1.OwnerReference) {
	if ref == nil {
		return
	}
	dsc.consistency.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podResource, pod.ResourceVersion)
}

func (dsc *Controller) now() time.Time {
	return dsc.failedPodsBackoff.Clock.Now()
}

func (dsc *Controller) enqueue(ds *apps.DaemonSet) {
	key, err := controller.KeyFunc(ds)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %w", ds, err))
		return
	}
	dsc.queue.Add(key)
}

func (dsc *Controller) enqueueAfter(ds *apps.DaemonSet, after time.Duration) {
	key, err := controller.KeyFunc(ds)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %w", ds, err))
		return
	}
	dsc.queue.AddAfter(key, after)
}

// podNodeNameIndex is upstream's index name, so controllers sharing the pod
// informer add it once.
const podNodeNameIndex = "spec.nodeName"

func addPodNodeNameIndexer(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[podNodeNameIndex]; ok {
		return nil
	}
	return inf.AddIndexers(cache.Indexers{podNodeNameIndex: func(obj interface{}) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}})
}
