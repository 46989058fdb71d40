// Package nodelifecycle is the node-lifecycle-controller: it watches node
// heartbeats (status updates and kube-node-lease Leases), marks silent
// nodes Unknown, keeps condition taints (NoSchedule) in line with node
// conditions, adds the not-ready/unreachable NoExecute taints through
// per-zone rate limiters and marks pods on unhealthy nodes NotReady.
// Evicting pods because of NoExecute taints is the taint-eviction
// controller's job.
package nodelifecycle

import (
	"context"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// Queue names, the "name" label of workqueue_* metrics.
	nodeQueueName = "node_lifecycle_controller"
	podQueueName  = "node_lifecycle_controller_pods"

	// retrySleepTime spaces the retries of one node's health update.
	retrySleepTime = 20 * time.Millisecond
	// Most pods are handled by the monitor pass; the pod workers only catch
	// pods the cache had not seen yet.
	podUpdateWorkerSize = 4
	// nodeUpdateWorkerSize bounds both the NoSchedule tainting workers and
	// the concurrency of one monitor pass.
	nodeUpdateWorkerSize = 8

	// labelNodeDisruptionExclusion keeps a node out of zone health counts.
	labelNodeDisruptionExclusion = "node.kubernetes.io/exclude-disruption"
)

var (
	// UnreachableTaintTemplate is the NoExecute taint of a node whose Ready
	// condition is Unknown.
	UnreachableTaintTemplate = &v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}
	// NotReadyTaintTemplate is the NoExecute taint of a node whose Ready
	// condition is False.
	NotReadyTaintTemplate = &v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}

	// conditionTaints maps a condition type and status to the NoSchedule
	// taint key it implies.
	conditionTaints = map[v1.NodeConditionType]map[v1.ConditionStatus]string{
		v1.NodeReady: {
			v1.ConditionFalse:   v1.TaintNodeNotReady,
			v1.ConditionUnknown: v1.TaintNodeUnreachable,
		},
		v1.NodeMemoryPressure:     {v1.ConditionTrue: v1.TaintNodeMemoryPressure},
		v1.NodeDiskPressure:       {v1.ConditionTrue: v1.TaintNodeDiskPressure},
		v1.NodeNetworkUnavailable: {v1.ConditionTrue: v1.TaintNodeNetworkUnavailable},
		v1.NodePIDPressure:        {v1.ConditionTrue: v1.TaintNodePIDPressure},
	}

	// conditionTaintKeys are the NoSchedule taint keys this controller owns
	// (besides node.kubernetes.io/unschedulable).
	conditionTaintKeys = map[string]bool{
		v1.TaintNodeNotReady:           true,
		v1.TaintNodeUnreachable:        true,
		v1.TaintNodeNetworkUnavailable: true,
		v1.TaintNodeMemoryPressure:     true,
		v1.TaintNodeDiskPressure:       true,
		v1.TaintNodePIDPressure:        true,
	}

	leaseResource = coordv1.SchemeGroupVersion.WithResource("leases").GroupResource()
)

// ZoneState is the health state of one zone.
type ZoneState string

const (
	stateInitial           = ZoneState("Initial")
	stateNormal            = ZoneState("Normal")
	stateFullDisruption    = ZoneState("FullDisruption")
	statePartialDisruption = ZoneState("PartialDisruption")
)

// nodeHealthData is what the controller last saw of a node, with local
// timestamps (never the kubelet's, to be immune to clock skew).
type nodeHealthData struct {
	probeTimestamp           metav1.Time
	readyTransitionTimestamp metav1.Time
	status                   *v1.NodeStatus
	lease                    *coordv1.Lease
}

func (n *nodeHealthData) deepCopy() *nodeHealthData {
	if n == nil {
		return nil
	}
	return &nodeHealthData{
		probeTimestamp:           n.probeTimestamp,
		readyTransitionTimestamp: n.readyTransitionTimestamp,
		status:                   n.status.DeepCopy(),
		lease:                    n.lease.DeepCopy(),
	}
}

// nodeHealthMap is shared by the monitor pass and the pod workers.
type nodeHealthMap struct {
	mu sync.RWMutex
	m  map[string]*nodeHealthData
}

func (h *nodeHealthMap) get(name string) *nodeHealthData {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.m[name].deepCopy()
}

func (h *nodeHealthMap) set(name string, d *nodeHealthData) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.m[name] = d
}

type podKey struct {
	namespace string
	name      string
}

// Controller is the node lifecycle controller.
type Controller struct {
	kubeClient  clientset.Interface
	clock       clock.Clock
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	nodeLister         corelisters.NodeLister
	nodeInformerSynced cache.InformerSynced
	podLister          corelisters.PodLister
	podInformerSynced  cache.InformerSynced
	podIndexer         cache.Indexer
	leaseLister        coordlisters.LeaseLister
	leaseSynced        cache.InformerSynced
	daemonSetLister    appslisters.DaemonSetLister
	daemonSetSynced    cache.InformerSynced
	consistency        controller.ConsistencyStore
	circuitBreaker     bool

	nodeMonitorPeriod           time.Duration
	nodeStartupGracePeriod      time.Duration
	nodeMonitorGracePeriod      time.Duration
	evictionLimiterQPS          float32
	secondaryEvictionLimiterQPS float32
	largeClusterThreshold       int32
	unhealthyZoneThreshold      float32

	// Only the monitor pass touches knownNodeSet and zoneStates.
	knownNodeSet  map[string]*v1.Node
	zoneStates    map[string]ZoneState
	nodeHealthMap *nodeHealthMap
	nodesToRetry  sync.Map

	// evictorLock guards zoneNoExecuteTainter (read by the tainting pass).
	evictorLock          sync.Mutex
	zoneNoExecuteTainter map[string]*rateLimitedTimedQueue

	nodeUpdateQueue workqueue.TypedInterface[string]
	podUpdateQueue  workqueue.TypedRateLimitingInterface[podKey]
}

// Features are the feature gates the node lifecycle controller consults.
type Features struct {
	// LeaseCircuitBreaker (NodeControllerLeaseCircuitBreaker): before
	// marking a node Unknown, re-read its Lease live and hold off while the
	// lease cache is behind.
	LeaseCircuitBreaker bool
}

// NewController returns the controller; start it with Run.
// The DaemonSet informer is only waited for, as upstream, so the shared
// factory starts it.
func NewController(
	ctx context.Context,
	leaseInformer coordinformers.LeaseInformer,
	podInformer coreinformers.PodInformer,
	nodeInformer coreinformers.NodeInformer,
	daemonSetInformer appsinformers.DaemonSetInformer,
	kubeClient clientset.Interface,
	nodeMonitorPeriod time.Duration,
	nodeStartupGracePeriod time.Duration,
	nodeMonitorGracePeriod time.Duration,
	evictionLimiterQPS float32,
	secondaryEvictionLimiterQPS float32,
	largeClusterThreshold int32,
	unhealthyZoneThreshold float32,
	features Features,
) (*Controller, error) {
	Register()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "node-controller")
	nc := &Controller{
		kubeClient:                  kubeClient,
		clock:                       clock.RealClock{},
		broadcaster:                 broadcaster,
		recorder:                    recorder,
		nodeMonitorPeriod:           nodeMonitorPeriod,
		nodeStartupGracePeriod:      nodeStartupGracePeriod,
		nodeMonitorGracePeriod:      nodeMonitorGracePeriod,
		evictionLimiterQPS:          evictionLimiterQPS,
		secondaryEvictionLimiterQPS: secondaryEvictionLimiterQPS,
		largeClusterThreshold:       largeClusterThreshold,
		unhealthyZoneThreshold:      unhealthyZoneThreshold,
		knownNodeSet:                map[string]*v1.Node{},
		zoneStates:                  map[string]ZoneState{},
		nodeHealthMap:               &nodeHealthMap{m: map[string]*nodeHealthData{}},
		zoneNoExecuteTainter:        map[string]*rateLimitedTimedQueue{},
		nodeUpdateQueue:             workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: nodeQueueName}),
		podUpdateQueue:              controller.NewNamedTypedQueue[podKey](podQueueName),
	}

	podInf := podInformer.Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { nc.podUpdated(nil, obj.(*v1.Pod)) },
		UpdateFunc: func(old, cur interface{}) { nc.podUpdated(old.(*v1.Pod), cur.(*v1.Pod)) },
	}); err != nil {
		return nil, err
	}
	if err := addPodNodeNameIndexer(podInf); err != nil {
		return nil, err
	}
	nc.podIndexer = podInf.GetIndexer()
	nc.podLister = podInformer.Lister()
	nc.podInformerSynced = podInf.HasSynced

	if _, err := nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if n, ok := obj.(*v1.Node); ok {
				nc.nodeUpdateQueue.Add(n.Name)
			}
		},
		UpdateFunc: func(_, cur interface{}) {
			if n, ok := cur.(*v1.Node); ok {
				nc.nodeUpdateQueue.Add(n.Name)
			}
		},
		DeleteFunc: func(obj interface{}) {
			obj = controller.Untombstone(obj)
			if n, ok := obj.(*v1.Node); ok {
				nc.nodesToRetry.Delete(n.Name)
			}
		},
	}); err != nil {
		return nil, err
	}
	nc.nodeLister = nodeInformer.Lister()
	nc.nodeInformerSynced = nodeInformer.Informer().HasSynced

	nc.leaseLister = leaseInformer.Lister()
	nc.leaseSynced = leaseInformer.Informer().HasSynced
	nc.daemonSetLister = daemonSetInformer.Lister()
	nc.daemonSetSynced = daemonSetInformer.Informer().HasSynced

	nc.circuitBreaker = features.LeaseCircuitBreaker
	if nc.circuitBreaker {
		nc.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			leaseResource: leaseInformer.Informer().GetStore(),
		})
	} else {
		nc.consistency = controller.NewNoopConsistencyStore()
	}
	return nc, nil
}

// podNodeNameIndex is upstream's index name, so sharing the pod informer
// with the taint-eviction controller adds it once.
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

func (nc *Controller) podsOnNode(nodeName string) ([]*v1.Pod, error) {
	objs, err := nc.podIndexer.ByIndex(podNodeNameIndex, nodeName)
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

func (nc *Controller) now() metav1.Time { return metav1.NewTime(nc.clock.Now()) }

// Run starts the workers and the periodic passes and blocks until ctx is
// cancelled.
func (nc *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	stopEvents := controller.StartEventSink(nc.broadcaster, nc.kubeClient)
	defer stopEvents()

	logger.Info("Starting node controller")
	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down node controller")
		nc.nodeUpdateQueue.ShutDown()
		nc.podUpdateQueue.ShutDown()
		wg.Wait()
	}()

	controller.ReportQueue(ctx, nodeQueueName, nc.nodeUpdateQueue.Len)
	controller.ReportQueue(ctx, podQueueName, nc.podUpdateQueue.Len)
	if !controller.WaitForCacheSync(ctx, "node", nc.leaseSynced, nc.nodeInformerSynced, nc.podInformerSynced, nc.daemonSetSynced) {
		return
	}

	for i := 0; i < nodeUpdateWorkerSize; i++ {
		wg.Go(func() { wait.UntilWithContext(ctx, nc.nodeWorker, time.Second) })
	}
	for i := 0; i < podUpdateWorkerSize; i++ {
		wg.Go(func() { wait.UntilWithContext(ctx, nc.podWorker, time.Second) })
	}
	// Taint-based eviction does not rate limit deletions, so the NoExecute
	// taints themselves are what is rate limited, per zone.
	wg.Go(func() { wait.UntilWithContext(ctx, nc.doNoExecuteTaintingPass, nodeEvictionPeriod) })
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(ctx context.Context) {
			if err := nc.monitorNodeHealth(ctx); err != nil {
				logger.Error(err, "Error monitoring node health")
			}
		}, nc.nodeMonitorPeriod)
	})
	<-ctx.Done()
}

// nodeWorker keeps NoSchedule condition taints and the beta OS/arch labels
// of each updated node in line. Failures are not requeued, as upstream:
// the next node update retries.
func (nc *Controller) nodeWorker(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		name, quit := nc.nodeUpdateQueue.Get()
		if quit {
			return
		}
		if err := nc.doNoScheduleTaintingPass(ctx, name); err != nil {
			logger.Error(err, "Failed to taint NoSchedule on node, requeue it", "node", klog.KRef("", name))
		}
		if err := nc.reconcileNodeLabels(ctx, name); err != nil {
			logger.Error(err, "Failed to reconcile labels for node, requeue it", "node", klog.KRef("", name))
		}
		nc.nodeUpdateQueue.Done(name)
	}
}

func (nc *Controller) podWorker(ctx context.Context) {
	for {
		key, quit := nc.podUpdateQueue.Get()
		if quit {
			return
		}
		nc.processPod(ctx, key)
	}
}
