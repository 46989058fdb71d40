// Package disruption keeps the status of PodDisruptionBudgets current: how
// many of the selected pods are healthy, how many must stay healthy, and so
// how many voluntary disruptions the API server's eviction handler may still
// grant. It also resets DisruptionTarget conditions left on pods whose
// eviction or preemption never went through.
package disruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	scaleclient "k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// DeletionTimeout is how long an entry of status.disruptedPods (written
	// by the eviction handler) holds: if the pod has not started terminating
	// by then, the eviction is assumed lost and the pod counts again. The
	// controller and API server clocks are assumed to be roughly in sync.
	DeletionTimeout = 2 * time.Minute

	// stalePodDisruptionTimeout is how long a pod may carry a True
	// DisruptionTarget condition without being deleted before the
	// controller sets the condition back to False.
	stalePodDisruptionTimeout = 2 * time.Minute

	// Workqueue names, which are also the "name" label of workqueue_* metrics.
	queueName        = "disruption"
	recheckQueueName = "disruption_recheck"
	staleQueueName   = "stale_pod_disruption"

	// eventComponent is the event source upstream uses for this controller.
	eventComponent = "controllermanager"
)

// Controller computes PodDisruptionBudget status.
type Controller struct {
	kubeClient      clientset.Interface
	mapper          apimeta.RESTMapper
	scaleNamespacer scaleclient.ScalesGetter
	discoveryClient discovery.DiscoveryInterfaceWithContext

	pdbLister policylisters.PodDisruptionBudgetLister
	podLister corelisters.PodLister
	rcLister  corelisters.ReplicationControllerLister
	rsLister  appslisters.ReplicaSetLister
	dLister   appslisters.DeploymentLister
	ssLister  appslisters.StatefulSetLister
	synced    []cache.InformerSynced

	// queue holds PDB keys to sync.
	queue workqueue.TypedRateLimitingInterface[string]
	// recheckQueue holds PDB keys until their next disruptedPods entry
	// expires; they are then moved to queue.
	recheckQueue workqueue.TypedDelayingInterface[string]
	// stalePodDisruptionQueue holds pod keys whose DisruptionTarget
	// condition may have to be reset.
	stalePodDisruptionQueue   workqueue.TypedRateLimitingInterface[string]
	stalePodDisruptionTimeout time.Duration

	pdbLoop   controller.WorkLoop[string]
	staleLoop controller.WorkLoop[string]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	// writeStatus sends a PDB's status to the API server; tests replace it.
	writeStatus func(ctx context.Context, pdb *policy.PodDisruptionBudget) error

	clock clock.WithTicker
}

// NewController returns the PodDisruptionBudget controller; start
// it with Run. restMapper, scaleNamespacer and discoveryClient serve pods
// whose controller is not one of the built-in workloads but implements the
// scale subresource.
func NewController(
	ctx context.Context,
	podInformer coreinformers.PodInformer,
	pdbInformer policyinformers.PodDisruptionBudgetInformer,
	rcInformer coreinformers.ReplicationControllerInformer,
	rsInformer appsinformers.ReplicaSetInformer,
	dInformer appsinformers.DeploymentInformer,
	ssInformer appsinformers.StatefulSetInformer,
	kubeClient clientset.Interface,
	restMapper apimeta.RESTMapper,
	scaleNamespacer scaleclient.ScalesGetter,
	discoveryClient discovery.DiscoveryInterface,
) *Controller {
	return NewControllerInternal(ctx, podInformer, pdbInformer, rcInformer, rsInformer, dInformer, ssInformer,
		kubeClient, restMapper, scaleNamespacer, discoveryClient, clock.RealClock{}, stalePodDisruptionTimeout)
}

// NewControllerInternal is NewController with the clock
// and the stale DisruptionTarget timeout chosen by the caller. Only tests
// should need it.
func NewControllerInternal(
	ctx context.Context,
	podInformer coreinformers.PodInformer,
	pdbInformer policyinformers.PodDisruptionBudgetInformer,
	rcInformer coreinformers.ReplicationControllerInformer,
	rsInformer appsinformers.ReplicaSetInformer,
	dInformer appsinformers.DeploymentInformer,
	ssInformer appsinformers.StatefulSetInformer,
	kubeClient clientset.Interface,
	restMapper apimeta.RESTMapper,
	scaleNamespacer scaleclient.ScalesGetter,
	discoveryClient discovery.DiscoveryInterface,
	clk clock.WithTicker,
	staleTimeout time.Duration,
) *Controller {
	logger := klog.FromContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, eventComponent)
	dc := &Controller{
		kubeClient:                kubeClient,
		mapper:                    restMapper,
		scaleNamespacer:           scaleNamespacer,
		discoveryClient:           discovery.ToDiscoveryInterfaceWithContext(discoveryClient),
		pdbLister:                 pdbInformer.Lister(),
		podLister:                 controller.LabelIndexedPodLister(podInformer.Informer()),
		rcLister:                  rcInformer.Lister(),
		rsLister:                  rsInformer.Lister(),
		dLister:                   dInformer.Lister(),
		ssLister:                  ssInformer.Lister(),
		queue:                     newRateLimitingQueue(logger, queueName, clk),
		recheckQueue:              newDelayingQueue(logger, recheckQueueName, clk),
		stalePodDisruptionQueue:   newRateLimitingQueue(logger, staleQueueName, clk),
		stalePodDisruptionTimeout: staleTimeout,
		broadcaster:               broadcaster,
		recorder:                  recorder,
		clock:                     clk,
	}
	dc.synced = []cache.InformerSynced{
		podInformer.Informer().HasSynced,
		pdbInformer.Informer().HasSynced,
		rcInformer.Informer().HasSynced,
		rsInformer.Informer().HasSynced,
		dInformer.Informer().HasSynced,
		ssInformer.Informer().HasSynced,
	}
	dc.writeStatus = dc.updateStatus
	dc.pdbLoop = controller.WorkLoop[string]{Name: queueName, Queue: dc.queue, Sync: dc.sync}
	dc.staleLoop = controller.WorkLoop[string]{Name: staleQueueName, Queue: dc.stalePodDisruptionQueue, Sync: dc.syncStalePodDisruption}

	_, _ = pdbInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dc.addPDB(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { dc.updatePDB(logger, cur) },
		DeleteFunc: func(obj interface{}) { dc.deletePDB(logger, obj) },
	})
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dc.addPod(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { dc.updatePod(logger, cur) },
		DeleteFunc: func(obj interface{}) { dc.deletePod(logger, obj) },
	})
	// Workload objects have no handlers: a change of scale is only seen at
	// the next sync of the budget, as upstream.
	return dc
}

// newRateLimitingQueue is controller.NewNamedQueue with an injectable clock.
func newRateLimitingQueue(logger klog.Logger, name string, clk clock.WithTicker) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{DelayingQueue: newDelayingQueue(logger, name, clk)},
	)
}

func newDelayingQueue(logger klog.Logger, name string, clk clock.WithTicker) workqueue.TypedDelayingInterface[string] {
	return workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Logger: &logger,
		Name:   name,
		Clock:  clk,
	})
}

// Run sends events, waits for the caches, then runs workers PDB syncers,
// the recheck mover and one stale-condition worker until ctx is cancelled.
func (dc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	stopEvents := controller.StartEventSink(dc.broadcaster, dc.kubeClient)
	defer stopEvents()

	logger.Info("Starting disruption controller")
	defer logger.Info("Shutting down disruption controller")

	if !controller.WaitForCacheSync(ctx, queueName, dc.synced...) {
		dc.queue.ShutDown()
		dc.recheckQueue.ShutDown()
		dc.stalePodDisruptionQueue.ShutDown()
		return
	}

	var wg sync.WaitGroup
	wg.Go(func() { dc.pdbLoop.RunWorkers(ctx, workers) })
	wg.Go(func() { dc.staleLoop.RunWorkers(ctx, 1) })
	wg.Go(func() {
		<-ctx.Done()
		dc.recheckQueue.ShutDown()
	})
	wg.Go(func() {
		for dc.processNextRecheckItem() {
		}
	})
	wg.Wait()
}

// processNextRecheckItem moves one due PDB key from the recheck queue to
// the sync queue. It returns false once the recheck queue is shut down.
func (dc *Controller) processNextRecheckItem() bool {
	key, quit := dc.recheckQueue.Get()
	if quit {
		return false
	}
	defer dc.recheckQueue.Done(key)
	dc.queue.AddRateLimited(key)
	return true
}

func (dc *Controller) enqueuePDB(logger klog.Logger, pdb *policy.PodDisruptionBudget) {
	key, err := controller.KeyFunc(pdb)
	if err != nil {
		logger.Error(err, "Couldn't get key for PodDisruptionBudget", "podDisruptionBudget", klog.KObj(pdb))
		return
	}
	dc.queue.Add(key)
}

func (dc *Controller) enqueuePDBForRecheck(logger klog.Logger, pdb *policy.PodDisruptionBudget, after time.Duration) {
	key, err := controller.KeyFunc(pdb)
	if err != nil {
		logger.Error(err, "Couldn't get key for PodDisruptionBudget", "podDisruptionBudget", klog.KObj(pdb))
		return
	}
	// A delaying queue keeps one entry per key, due at the earliest time
	// asked for, so repeated syncs do not pile up rechecks.
	dc.recheckQueue.AddAfter(key, after)
}

func (dc *Controller) enqueueStalePodDisruptionCleanup(logger klog.Logger, pod *v1.Pod, after time.Duration) {
	key, err := controller.KeyFunc(pod)
	if err != nil {
		logger.Error(err, "Couldn't get key for Pod", "pod", klog.KObj(pod))
		return
	}
	dc.stalePodDisruptionQueue.AddAfter(key, after)
	logger.V(4).Info("Enqueued pod to clean up stale DisruptionTarget condition", "pod", klog.KObj(pod), "after", after)
}

func (dc *Controller) addPDB(logger klog.Logger, obj interface{}) {
	pdb, ok := obj.(*policy.PodDisruptionBudget)
	if !ok {
		return
	}
	logger.V(4).Info("PodDisruptionBudget added", "podDisruptionBudget", klog.KObj(pdb))
	dc.enqueuePDB(logger, pdb)
}

// updatePDB enqueues on every update, resyncs included.
func (dc *Controller) updatePDB(logger klog.Logger, cur interface{}) {
	pdb, ok := cur.(*policy.PodDisruptionBudget)
	if !ok {
		return
	}
	logger.V(4).Info("PodDisruptionBudget updated", "podDisruptionBudget", klog.KObj(pdb))
	dc.enqueuePDB(logger, pdb)
}

func (dc *Controller) deletePDB(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pdb, ok := obj.(*policy.PodDisruptionBudget)
	if !ok {
		logger.Error(nil, "Deleted object is not a PodDisruptionBudget", "obj", obj)
		return
	}
	logger.V(4).Info("PodDisruptionBudget deleted", "podDisruptionBudget", klog.KObj(pdb))
	dc.enqueuePDB(logger, pdb)
}

func (dc *Controller) addPod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	dc.podChanged(logger, pod)
}

func (dc *Controller) updatePod(logger klog.Logger, cur interface{}) {
	pod, ok := cur.(*v1.Pod)
	if !ok {
		return
	}
	dc.podChanged(logger, pod)
}

// podChanged wakes the pod's budget and schedules the stale-condition
// check when the pod carries a DisruptionTarget condition that may expire.
func (dc *Controller) podChanged(logger klog.Logger, pod *v1.Pod) {
	if pdb := dc.getPDBForPod(logger, pod); pdb != nil {
		logger.V(4).Info("Pod changed, syncing its PodDisruptionBudget", "pod", klog.KObj(pod), "podDisruptionBudget", klog.KObj(pdb))
		dc.enqueuePDB(logger, pdb)
	}
	if stale, after := dc.stalePodDisruptionCondition(pod); stale {
		dc.enqueueStalePodDisruptionCleanup(logger, pod, after)
	}
}

func (dc *Controller) deletePod(logger klog.Logger, obj interface{}) {
	obj = controller.Untombstone(obj)
	pod, ok := obj.(*v1.Pod)
	if !ok {
		logger.Error(nil, "Deleted object is not a Pod", "obj", obj)
		return
	}
	if pdb := dc.getPDBForPod(logger, pod); pdb != nil {
		logger.V(4).Info("Pod deleted, syncing its PodDisruptionBudget", "pod", klog.KObj(pod), "podDisruptionBudget", klog.KObj(pdb))
		dc.enqueuePDB(logger, pdb)
	}
}

// getPDBForPod returns one budget selecting pod, or nil. Like upstream,
// when several budgets select the pod only the first one the lister returns
// is woken, and the pod gets a warning event.
func (dc *Controller) getPDBForPod(logger klog.Logger, pod *v1.Pod) *policy.PodDisruptionBudget {
	// The lister's only error is "nothing matches".
	pdbs, err := dc.pdbLister.GetPodPodDisruptionBudgets(pod)
	if err != nil || len(pdbs) == 0 {
		logger.V(4).Info("No PodDisruptionBudget selects pod", "pod", klog.KObj(pod))
		return nil
	}
	if len(pdbs) > 1 {
		msg := fmt.Sprintf("Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, pdbs[0].Name)
		logger.Info(msg)
		dc.recorder.Event(pod, v1.EventTypeWarning, "MultiplePodDisruptionBudgets", msg)
	}
	return pdbs[0]
}
