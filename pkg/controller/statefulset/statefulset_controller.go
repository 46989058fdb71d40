// Package statefulset runs StatefulSets: pods with stable names
// (<set>-<ordinal>), stable storage (one claim per volumeClaimTemplate and
// ordinal) and ordered or parallel creation, deletion and rolling update,
// with the template history kept as ControllerRevisions.
package statefulset

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/history"
)

// Features are the feature gates the StatefulSet controller consults.
type Features struct {
	// MaxUnavailableStatefulSet honours
	// updateStrategy.rollingUpdate.maxUnavailable.
	MaxUnavailableStatefulSet bool
	// StatefulSetRecreateStrategy enables the Recreate update strategy.
	StatefulSetRecreateStrategy bool
	// StatefulSetSemanticRevisionComparison treats a revision that differs
	// only in encoding as unchanged.
	StatefulSetSemanticRevisionComparison bool
	// StaleControllerConsistency (StaleControllerConsistencyStatefulSet)
	// skips syncs until the informers have caught up with the controller's
	// writes.
	StaleControllerConsistency bool
}

var (
	controllerKind = apps.SchemeGroupVersion.WithKind("StatefulSet")
	podKind        = v1.SchemeGroupVersion.WithKind("Pod")

	setsResource   = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	podsResource   = schema.GroupResource{Resource: "pods"}
	claimsResource = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// QueueName names the work queue (the "name" label of workqueue metrics).
const QueueName = "statefulset"

// Controller syncs StatefulSets with their pods, claims and
// revisions.
type Controller struct {
	kubeClient       clientset.Interface
	eventBroadcaster record.EventBroadcaster
	recorder         record.EventRecorder

	control *setControl
	// podControl patches pods on adoption and release.
	podControl  controller.PodControlInterface
	consistency controller.ConsistencyStore

	podIndexer cache.Indexer
	setLister  appslisters.StatefulSetLister

	podsSynced   cache.InformerSynced
	setsSynced   cache.InformerSynced
	claimsSynced cache.InformerSynced
	revsSynced   cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]
	clock clock.PassiveClock
}

// NewController wires the controller to its informers. Run
// starts it.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, setInformer appsinformers.StatefulSetInformer, pvcInformer coreinformers.PersistentVolumeClaimInformer, revInformer appsinformers.ControllerRevisionInformer, kubeClient clientset.Interface, features Features) *Controller {
	logger := klog.FromContext(ctx)
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "statefulset-controller")

	consistency := controller.NewNoopConsistencyStore()
	if features.StaleControllerConsistency {
		consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			podsResource:   podInformer.Informer().GetStore(),
			claimsResource: pvcInformer.Informer().GetStore(),
			setsResource:   setInformer.Informer().GetStore(),
		})
	}

	ssc := &Controller{
		kubeClient:       kubeClient,
		eventBroadcaster: broadcaster,
		recorder:         recorder,
		consistency:      consistency,
		setLister:        setInformer.Lister(),
		podsSynced:       podInformer.Informer().HasSynced,
		setsSynced:       setInformer.Informer().HasSynced,
		claimsSynced:     pvcInformer.Informer().HasSynced,
		revsSynced:       revInformer.Informer().HasSynced,
		queue:            controller.NewNamedQueue(QueueName),
		clock:            clock.RealClock{},
	}
	ssc.podControl = controller.RealPodControl{KubeClient: kubeClient, Recorder: recorder, OnWrite: ssc.podWritten}
	store := &apiStore{client: kubeClient, podLister: podInformer.Lister(), claimLister: pvcInformer.Lister(), consistency: consistency}
	ssc.control = newSetControl(
		&podControl{store: store, recorder: recorder},
		&apiStatusWriter{client: kubeClient, setLister: setInformer.Lister(), consistency: consistency},
		history.NewHistory(kubeClient, revInformer.Lister()),
		recorder,
		features,
	)
	ssc.loop = controller.WorkLoop[string]{Name: QueueName, Queue: ssc.queue, Sync: ssc.sync}

	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { ssc.addPod(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { ssc.updatePod(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { ssc.deletePod(logger, obj) },
	})
	if err := controller.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		logger.Error(err, "Unable to add the pod controller index")
	}
	ssc.podIndexer = podInformer.Informer().GetIndexer()

	_, _ = setInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: ssc.enqueue,
		// Resyncs included: that is how a set whose last sync failed
		// without an error to retry on gets another chance.
		UpdateFunc: func(old, cur interface{}) {
			oldSet, curSet := old.(*apps.StatefulSet), cur.(*apps.StatefulSet)
			if oldSet.Status.Replicas != curSet.Status.Replicas {
				logger.V(4).Info("Observed updated replica count for StatefulSet", "statefulSet", klog.KObj(curSet), "oldReplicas", oldSet.Status.Replicas, "newReplicas", curSet.Status.Replicas)
			}
			ssc.enqueue(cur)
		},
		DeleteFunc: ssc.enqueue,
	})
	return ssc
}

// Run starts sending events, waits for the caches and syncs with workers
// goroutines (--concurrent-statefulset-syncs) until ctx is cancelled.
func (ssc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(ssc.eventBroadcaster, ssc.kubeClient)
	defer stopEvents()
	ssc.loop.Run(ctx, workers, ssc.podsSynced, ssc.setsSynced, ssc.claimsSynced, ssc.revsSynced)
}

// podWritten records an adoption or release patch for the consistency check.
func (ssc *Controller) podWritten(pod *v1.Pod, ref *metav1.OwnerReference) {
	if ref == nil {
		return
	}
	ssc.consistency.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podsResource, pod.ResourceVersion)
}

func (ssc *Controller) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %v", obj, err))
		return
	}
	ssc.queue.Add(key)
}

func (ssc *Controller) enqueueAfter(set *apps.StatefulSet, d time.Duration) {
	key, err := controller.KeyFunc(set)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for StatefulSet %s/%s: %v", set.Namespace, set.Name, err))
		return
	}
	ssc.queue.AddAfter(key, d)
}

// resolveControllerRef returns the set a controller reference points to,
// or nil for another kind, a missing set, or another incarnation.
func (ssc *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *apps.StatefulSet {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	set, err := ssc.setLister.StatefulSets(namespace).Get(ref.Name)
	if err != nil || set.UID != ref.UID {
		return nil
	}
	return set
}

// setsForPod returns the sets whose selector matches pod (orphan adoption
// candidates).
func (ssc *Controller) setsForPod(logger klog.Logger, pod *v1.Pod) []*apps.StatefulSet {
	sets, err := ssc.setLister.GetPodStatefulSets(pod)
	if err != nil {
		return nil
	}
	if len(sets) > 1 {
		// Controller references keep this safe, but it is a user error.
		var names []string
		for _, s := range sets {
			names = append(names, s.Name)
		}
		utilruntime.HandleErrorWithLogger(logger, nil, "More than one StatefulSet is selecting pods with same labels", "podLabels", pod.Labels, "sets", names)
	}
	return sets
}

func (ssc *Controller) addPod(logger klog.Logger, obj interface{}) {
	pod := obj.(*v1.Pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (e.g. after a
		// restart).
		ssc.deletePod(logger, pod)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		if set := ssc.resolveControllerRef(pod.Namespace, ref); set != nil {
			logger.V(4).Info("Pod created with labels", "pod", klog.KObj(pod), "labels", pod.Labels)
			ssc.enqueue(set)
		}
		return
	}
	sets := ssc.setsForPod(logger, pod)
	if len(sets) > 0 {
		logger.V(4).Info("Orphan Pod created with labels", "pod", klog.KObj(pod), "labels", pod.Labels)
	}
	for _, set := range sets {
		ssc.enqueue(set)
	}
}

func (ssc *Controller) updatePod(logger klog.Logger, old, cur interface{}) {
	oldPod, curPod := old.(*v1.Pod), cur.(*v1.Pod)
	if oldPod.ResourceVersion == curPod.ResourceVersion {
		// A resync: nothing changed.
		return
	}
	curRef := metav1.GetControllerOfNoCopy(curPod)
	oldRef := metav1.GetControllerOfNoCopy(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if set := ssc.resolveControllerRef(oldPod.Namespace, oldRef); set != nil {
			ssc.enqueue(set)
		}
	}
	if curRef != nil {
		set := ssc.resolveControllerRef(curPod.Namespace, curRef)
		if set == nil {
			return
		}
		if oldPod.Status.Phase != curPod.Status.Phase {
			logger.V(4).Info("StatefulSet Pod phase changed", "pod", klog.KObj(curPod), "statefulSet", klog.KObj(set), "podPhase", curPod.Status.Phase)
		}
		ssc.enqueue(set)
		// A pod that just became ready becomes available minReadySeconds
		// later without another event; come back then.
		if set.Spec.MinReadySeconds > 0 && !controller.IsPodReady(oldPod) && controller.IsPodReady(curPod) {
			logger.V(2).Info("StatefulSet will be enqueued after minReadySeconds for availability check", "statefulSet", klog.KObj(set), "minReadySeconds", set.Spec.MinReadySeconds)
			ssc.enqueueAfter(set, time.Duration(set.Spec.MinReadySeconds)*time.Second)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(curPod.Labels, oldPod.Labels) {
		for _, set := range ssc.setsForPod(logger, curPod) {
			ssc.enqueue(set)
		}
	}
}

func (ssc *Controller) deletePod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			utilruntime.HandleErrorWithLogger(logger, nil, "Couldn't get object from tombstone", "obj", obj)
			return
		}
		if pod, ok = tombstone.Obj.(*v1.Pod); !ok {
			utilruntime.HandleErrorWithLogger(logger, nil, "Tombstone contained object that is not a pod", "type", fmt.Sprintf("%T", tombstone.Obj))
			return
		}
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return
	}
	if set := ssc.resolveControllerRef(pod.Namespace, ref); set != nil {
		logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod))
		ssc.enqueue(set)
	}
}

// canAdopt returns the check run before the first adoption of a sync: a
// live read confirming the set still exists, is the same incarnation and
// is not being deleted.
func (ssc *Controller) canAdopt(set *apps.StatefulSet) func(context.Context) error {
	return controller.RecheckDeletionTimestamp(func(ctx context.Context) (metav1.Object, error) {
		fresh, err := ssc.kubeClient.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != set.UID {
			return nil, fmt.Errorf("original StatefulSet %v/%v is gone: got uid %v, wanted %v", set.Namespace, set.Name, fresh.UID, set.UID)
		}
		return fresh, nil
	})
}

// claimPods returns the set's pods, adopting matching orphans named like
// its members and releasing owned pods that no longer match.
func (ssc *Controller) claimPods(ctx context.Context, set *apps.StatefulSet, selector labels.Selector, canAdopt func(context.Context) error) ([]*v1.Pod, error) {
	candidates, err := controller.FilterPodsByOwner(ssc.podIndexer, set, controllerKind.Kind, true)
	if err != nil {
		return nil, err
	}
	m := controller.NewPodControllerRefManager(ssc.podControl, set, selector, controllerKind, canAdopt)
	return m.ClaimPods(ctx, candidates, func(pod *v1.Pod) bool { return isMemberOf(set, pod) })
}

// sync reconciles the StatefulSet with key namespace/name.
func (ssc *Controller) sync(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	start := ssc.clock.Now()
	defer func() {
		logger.V(4).Info("Finished syncing statefulset", "key", key, "time", ssc.clock.Since(start))
	}()

	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	nsName := types.NamespacedName{Namespace: namespace, Name: name}
	if err := ssc.consistency.EnsureReady(nsName); err != nil {
		var stale *controller.ConsistencyError
		if errors.As(err, &stale) {
			staleSyncSkips.WithLabelValues(stale.GroupResource.Group, stale.GroupResource.Resource).Inc()
		}
		return err
	}

	set, err := ssc.setLister.StatefulSets(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		logger.Info("StatefulSet has been deleted", "key", key)
		ssc.consistency.Clear(nsName, "")
		forgetSetMetrics(namespace, name)
		return nil
	}
	if err != nil {
		return err
	}

	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		// Retrying can't fix a bad selector; the next update of the set will.
		utilruntime.HandleErrorWithContext(ctx, err, "Error converting StatefulSet selector", "key", key)
		return nil
	}
	if !selector.Matches(labels.Set(set.Spec.Template.Labels)) {
		// The API server refuses such a set; should one get through, its
		// pods would be released as soon as created, again and again.
		ssc.recorder.Eventf(set, v1.EventTypeWarning, "SelectorMismatch", "selector %s does not match the pod template labels %v", selector, set.Spec.Template.Labels)
		logger.Error(nil, "StatefulSet selector does not match its template labels; not syncing", "statefulSet", klog.KObj(set), "selector", selector.String())
		return nil
	}

	canAdopt := ssc.canAdopt(set)
	if err := ssc.control.adoptOrphanRevisions(ctx, set, canAdopt); err != nil {
		return err
	}
	pods, err := ssc.claimPods(ctx, set, selector, canAdopt)
	if err != nil {
		return err
	}
	return ssc.syncPods(ctx, set, pods)
}

// syncPods runs the reconcile and, while some ready pods are not yet
// available, schedules the sync that will count them.
func (ssc *Controller) syncPods(ctx context.Context, set *apps.StatefulSet, pods []*v1.Pod) error {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Syncing StatefulSet with pods", "statefulSet", klog.KObj(set), "pods", len(pods))
	// One instant for both the status and the next check, so no pod falls
	// between them.
	now := ssc.clock.Now()
	status, err := ssc.control.sync(ctx, set, pods, now)
	if err != nil {
		return err
	}
	logger.V(4).Info("Successfully synced StatefulSet", "statefulSet", klog.KObj(set))
	if minReady := set.Spec.MinReadySeconds; minReady > 0 && status != nil && status.ReadyReplicas != status.AvailableReplicas {
		next := time.Duration(minReady) * time.Second
		if d := controller.FindMinNextPodAvailabilityCheck(pods, minReady, now, ssc.clock); d != nil {
			next = *d
		}
		ssc.enqueueAfter(set, next)
	}
	return nil
}
