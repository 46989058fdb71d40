// Package podautoscaler is the horizontal pod autoscaler: every sync period
// it reads the metrics each HorizontalPodAutoscaler names, computes how many
// replicas its scale target needs and writes that through the target's
// scale subresource.
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	autoscalinginformers "k8s.io/client-go/informers/autoscaling/v2"
	coreinformers "k8s.io/client-go/informers/core/v1"
	autoscalingclient "k8s.io/client-go/kubernetes/typed/autoscaling/v2"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	scaleclient "k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	metricsclient "github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler/metrics"
)

const (
	// queueName names the work queue in workqueue_* metrics.
	queueName = "horizontalpodautoscaler"
	// eventComponent is the source of the controller's events.
	eventComponent = "horizontal-pod-autoscaler"
)

var hpaResource = autoscalingv2.Resource("horizontalpodautoscalers")

// timestampedRecommendation is one past proposal, kept for stabilization.
type timestampedRecommendation struct {
	recommendation int32
	timestamp      time.Time
}

// timestampedScaleEvent is one past rescale, kept for the behavior rate
// limits. Outdated entries are reused rather than appended.
type timestampedScaleEvent struct {
	replicaChange int32 // absolute value
	timestamp     time.Time
	outdated      bool
}

// Controller reconciles HorizontalPodAutoscalers.
type Controller struct {
	scaleNamespacer scaleclient.ScalesGetter
	hpaNamespacer   autoscalingclient.HorizontalPodAutoscalersGetter
	evtNamespacer   v1core.EventsGetter
	mapper          apimeta.RESTMapper

	tolerance                    float64
	downscaleStabilisationWindow time.Duration
	replicaCalc                  *ReplicaCalculator

	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder
	monitor          monitor

	hpaLister       autoscalinglisters.HorizontalPodAutoscalerLister
	hpaListerSynced cache.InformerSynced
	podLister       corelisters.PodLister
	podListerSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
	clock clock.PassiveClock

	// mu guards the per-HPA history below (keyed by namespace/name), which
	// lives only in memory: a restarted controller starts afresh.
	mu sync.Mutex
	// recommendations are the recent unstabilized proposals.
	recommendations map[string][]timestampedRecommendation
	// scaleUpEvents and scaleDownEvents are the recent rescales (only
	// recorded for HPAs with a behavior).
	scaleUpEvents   map[string][]timestampedScaleEvent
	scaleDownEvents map[string][]timestampedScaleEvent

	// selectors holds every HPA's pod selector to detect overlaps.
	selectors *selectorStore
	// ambiguityLimit caps how many HPAs selecting the same pods are looked
	// for (0: all of them).
	ambiguityLimit int

	// consistency holds an HPA back until the informer has seen this
	// controller's last status write.
	consistency controller.ConsistencyStore

	features Features
}

// Features are the feature gates the HPA controller consults.
type Features struct {
	// HPAGeneration reports status.observedGeneration and reacts at once to
	// spec changes.
	HPAGeneration bool
	// HPAConfigurableTolerance honours the per-direction tolerance of
	// spec.behavior.
	HPAConfigurableTolerance bool
	// HPAScaleToZero allows minReplicas 0 with object or external metrics.
	HPAScaleToZero bool
	// PodLevelResources measures utilization against pod-level requests.
	PodLevelResources bool
	// HPAOptimizedSelectorStore stops at the second HPA selecting a pod.
	HPAOptimizedSelectorStore bool
	// StaleControllerConsistency (StaleControllerConsistencyHPA) holds an
	// HPA back until the informer has seen the controller's status write.
	StaleControllerConsistency bool
}

// NewController wires the controller. resyncPeriod is how often
// each HPA is reconciled; downscaleStabilisationWindow, tolerance,
// cpuInitializationPeriod and delayOfInitialReadinessStatus are the
// --horizontal-pod-autoscaler-* settings of the same names.
func NewController(
	ctx context.Context,
	evtNamespacer v1core.EventsGetter,
	scaleNamespacer scaleclient.ScalesGetter,
	hpaNamespacer autoscalingclient.HorizontalPodAutoscalersGetter,
	mapper apimeta.RESTMapper,
	metricsClient metricsclient.MetricsClient,
	hpaInformer autoscalinginformers.HorizontalPodAutoscalerInformer,
	podInformer coreinformers.PodInformer,
	resyncPeriod time.Duration,
	downscaleStabilisationWindow time.Duration,
	tolerance float64,
	cpuInitializationPeriod,
	delayOfInitialReadinessStatus time.Duration,
	features Features,
) *Controller {
	logger := klog.FromContext(ctx)
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, eventComponent)

	a := &Controller{
		scaleNamespacer:              scaleNamespacer,
		hpaNamespacer:                hpaNamespacer,
		evtNamespacer:                evtNamespacer,
		mapper:                       mapper,
		tolerance:                    tolerance,
		downscaleStabilisationWindow: downscaleStabilisationWindow,
		eventBroadcaster:             broadcaster,
		eventRecorder:                recorder,
		monitor:                      promMonitor{},
		hpaLister:                    hpaInformer.Lister(),
		hpaListerSynced:              hpaInformer.Informer().HasSynced,
		podLister:                    controller.LabelIndexedPodLister(podInformer.Informer()),
		podListerSynced:              podInformer.Informer().HasSynced,
		// Every requeue waits one sync period: that is the resync loop.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			NewDefaultHPARateLimiter(resyncPeriod),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: queueName},
		),
		clock:           clock.RealClock{},
		recommendations: map[string][]timestampedRecommendation{},
		scaleUpEvents:   map[string][]timestampedScaleEvent{},
		scaleDownEvents: map[string][]timestampedScaleEvent{},
		selectors:       newSelectorStore(),
		consistency:     controller.NewNoopConsistencyStore(),
		features:        features,
	}
	// The optimized store stops at the second match; the legacy one
	// reported every HPA selecting the pods.
	if features.HPAOptimizedSelectorStore {
		a.ambiguityLimit = 2
	}
	if features.StaleControllerConsistency {
		a.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			hpaResource: hpaInformer.Informer().GetStore(),
		})
	}
	a.replicaCalc = NewReplicaCalculator(metricsClient, a.podLister, cpuInitializationPeriod, delayOfInitialReadinessStatus, features.PodLevelResources)
	a.loop = controller.WorkLoop[string]{Name: queueName, Queue: a.queue, Sync: a.sync}

	_, err := hpaInformer.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    a.enqueueHPA,
		UpdateFunc: a.updateHPA,
		DeleteFunc: a.deleteHPA,
	}, resyncPeriod)
	if err != nil {
		logger.Error(err, "Unable to watch HorizontalPodAutoscalers")
	}
	return a
}

// Run sends events, waits for the caches and reconciles with workers
// goroutines until ctx is cancelled.
func (a *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	a.eventBroadcaster.StartStructuredLogging(3)
	a.eventBroadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: a.evtNamespacer.Events("")})
	defer a.eventBroadcaster.Shutdown()
	a.loop.Run(ctx, workers, a.hpaListerSynced, a.podListerSynced)
}

// updateHPA reacts at once to a spec change (a new generation) but leaves
// other updates, such as our own status writes, to the periodic resync so
// they cannot cause a hot loop.
func (a *Controller) updateHPA(old, cur interface{}) {
	oldHPA, ok1 := old.(*autoscalingv2.HorizontalPodAutoscaler)
	curHPA, ok2 := cur.(*autoscalingv2.HorizontalPodAutoscaler)
	if ok1 && ok2 && oldHPA.Generation != curHPA.Generation &&
		a.features.HPAGeneration {
		a.enqueueHPA(curHPA)
		return
	}
	a.enqueueRateLimited(cur)
}

func (a *Controller) enqueueRateLimited(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	a.queue.AddRateLimited(key)
}

// enqueueHPA queues an HPA for immediate reconciliation. A new HPA is
// registered with a selector matching nothing until its first
// reconciliation knows the real one, so that reconciliation can update it.
func (a *Controller) enqueueHPA(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	if a.selectors.putIfAbsent(parseHPAKey(key), labels.Nothing()) {
		a.monitor.hpaAdded()
	}
	a.queue.Add(key)
}

func (a *Controller) deleteHPA(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	obj = controller.Untombstone(obj)
	if hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
		a.consistency.Clear(types.NamespacedName{Namespace: hpa.Namespace, Name: hpa.Name}, hpa.UID)
	}
	a.queue.Forget(key)
	a.selectors.delete(parseHPAKey(key))
	a.monitor.hpaDeleted()
}

// sync reconciles one HPA and, unless it is gone, schedules the next
// reconciliation one sync period later. Errors are only logged: the next
// period is the retry.
func (a *Controller) sync(ctx context.Context, key string) error {
	deleted, err := a.reconcileKey(ctx, key)
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Failed to reconcile HorizontalPodAutoscaler", "key", key)
	}
	// Requeue even if a resync already did: the resync may have raced
	// with this very sync and been absorbed by it.
	if !deleted {
		a.queue.AddRateLimited(key)
	}
	return nil
}

// reconcileKey reconciles the HPA behind key and reports whether it no
// longer exists.
func (a *Controller) reconcileKey(ctx context.Context, key string) (deleted bool, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return true, err
	}
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	if err := a.consistency.EnsureReady(nn); err != nil {
		var stale *controller.ConsistencyError
		if errors.As(err, &stale) {
			a.monitor.syncSkipped(stale.GroupResource)
		}
		return false, err
	}

	hpa, err := a.hpaLister.HorizontalPodAutoscalers(namespace).Get(name)
	if k8serrors.IsNotFound(err) {
		a.consistency.Clear(nn, "")
		klog.FromContext(ctx).Info("Horizontal Pod Autoscaler has been deleted", "HPA", klog.KRef(namespace, name))
		a.forget(key)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, a.reconcileAutoscaler(ctx, hpa, key)
}

// forget drops the history of a deleted HPA.
func (a *Controller) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.recommendations, key)
	delete(a.scaleUpEvents, key)
	delete(a.scaleDownEvents, key)
}
