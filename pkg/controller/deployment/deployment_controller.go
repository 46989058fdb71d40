// Package deployment is the Deployment controller: it rolls a Deployment's
// pod template out through ReplicaSets (RollingUpdate or Recreate), scales
// them proportionally, keeps a bounded revision history and reports status
// and conditions, as upstream kube-controller-manager does.
package deployment

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

const (
	// maxRetries drops a key after this many failed syncs in a row
	// (5ms doubling: the last retry waits ~82s).
	maxRetries = 15

	queueName = "deployment"
	component = "deployment-controller"
)

var controllerKind = apps.SchemeGroupVersion.WithKind("Deployment")

// Controller keeps ReplicaSets and Deployment status in line with
// each Deployment's spec.
type Controller struct {
	client    clientset.Interface
	rsControl controller.RSControlInterface

	eventBroadcaster record.EventBroadcaster
	eventRecorder    record.EventRecorder

	dLister  appslisters.DeploymentLister
	rsLister appslisters.ReplicaSetLister
	// rsIndexer indexes ReplicaSets by rsClaimIndex, or is nil.
	rsIndexer  cache.Indexer
	podIndexer cache.Indexer

	dListerSynced   cache.InformerSynced
	rsListerSynced  cache.InformerSynced
	podListerSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	// clock stamps conditions and measures progress deadlines.
	clock clock.PassiveClock
	// terminatingReplicas says whether to report status.terminatingReplicas
	// (feature DeploymentReplicaSetTerminatingReplicas, on by default). It is
	// asked on every status computation, like upstream's gate lookup.
	terminatingReplicas func() bool

	// syncHandler is swapped by tests.
	syncHandler func(ctx context.Context, key string) error

	// nsLister, when set, shows namespaces being deleted, where nothing is
	// left to roll out.
	nsLister corelisters.NamespaceLister

	// statusMinInterval spaces out status writes of rollouts in progress
	// (see DefaultStatusMinInterval); 0 writes every change at once.
	statusMinInterval time.Duration

	// templates remembers template comparisons (see util.TemplateMatches).
	templates *util.TemplateMatches

	writesMu sync.Mutex
	// writes remembers, per key, our last status write: when, and the
	// resourceVersion it replaced, so a sync from a cache that has not yet
	// seen that write is skipped (it would only conflict).
	writes map[string]statusWrite
	// created remembers, per key, the ReplicaSet we created until the cache
	// shows it: a sync before that would create it again (a 409).
	created map[string]createdReplicaSet
}

// DefaultStatusMinInterval: a Deployment's intermediate replica counts are
// written at most this often, and the interval doubles with each such
// write of the same rollout, up to MaxStatusInterval; a new generation, a
// condition change, pending annotations and the completed rollout are
// written at once (and start the doubling over). Longer than the
// ReplicaSets' interval: no controller steps on a Deployment's counts (its
// rollout steps on its ReplicaSets'), so only people and tools reading the
// progress of a rollout see them.
const DefaultStatusMinInterval = 5 * time.Second

// MaxStatusInterval bounds the doubled interval (as does a tenth of the
// progress deadline, see holdInterval): a rollout's progress is never more
// than this much behind in its Deployment's status.
const MaxStatusInterval = time.Minute

// TerminatingStatusInterval is the least hold of an intermediate status
// whose only change is the terminating count: pods the rollout took out
// going away in waves, which nothing steps on and people rarely follow.
const TerminatingStatusInterval = 30 * time.Second

type statusWrite struct {
	at time.Time
	// uid and replacedRV identify the object version our write superseded.
	uid        types.UID
	replacedRV string
	// intermediates counts the intermediate writes since the last write
	// that could not wait.
	intermediates int
}

// Features are the feature gates the Deployment controller consults.
type Features struct {
	// TerminatingReplicas (DeploymentReplicaSetTerminatingReplicas) reports
	// status.terminatingReplicas.
	TerminatingReplicas bool
}

// NewController wires the controller to its informers; call Run to
// start it once the informers are started.
func NewController(ctx context.Context, dInformer appsinformers.DeploymentInformer, rsInformer appsinformers.ReplicaSetInformer, podInformer coreinformers.PodInformer, client clientset.Interface, features Features) (*Controller, error) {
	logger := klog.FromContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, component)
	dc := &Controller{
		client:              client,
		rsControl:           controller.RealRSControl{KubeClient: client},
		eventBroadcaster:    broadcaster,
		eventRecorder:       recorder,
		dLister:             dInformer.Lister(),
		rsLister:            rsInformer.Lister(),
		dListerSynced:       dInformer.Informer().HasSynced,
		rsListerSynced:      rsInformer.Informer().HasSynced,
		podListerSynced:     podInformer.Informer().HasSynced,
		queue:               controller.NewNamedQueue(queueName),
		clock:               clock.RealClock{},
		statusMinInterval:   DefaultStatusMinInterval,
		templates:           util.NewTemplateMatches(),
		writes:              map[string]statusWrite{},
		created:             map[string]createdReplicaSet{},
		terminatingReplicas: func() bool { return features.TerminatingReplicas },
	}
	dc.syncHandler = dc.syncDeployment
	dc.loop = controller.WorkLoop[string]{
		Name:       queueName,
		Queue:      dc.queue,
		Sync:       dc.sync,
		MaxRetries: maxRetries,
	}

	if _, err := dInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dc.addDeployment(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dc.updateDeployment(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { dc.deleteDeployment(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding Deployment event handler: %w", err)
	}
	if _, err := rsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { dc.addReplicaSet(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { dc.updateReplicaSet(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { dc.deleteReplicaSet(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding ReplicaSet event handler: %w", err)
	}
	// Only deletions matter: Recreate waits for old pods to be gone.
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) { dc.deletePod(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding Pod event handler: %w", err)
	}
	if err := controller.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("adding Pod controller UID indexer: %w", err)
	}
	rsInf := rsInformer.Informer()
	if _, ok := rsInf.GetIndexer().GetIndexers()[rsClaimIndex]; !ok {
		if err := rsInf.AddIndexers(cache.Indexers{rsClaimIndex: rsClaimIndexFunc}); err != nil {
			// Without it every sync lists the namespace's ReplicaSets.
			logger.Error(err, "Unable to add the ReplicaSet claim index")
		}
	}
	if _, ok := rsInf.GetIndexer().GetIndexers()[rsClaimIndex]; ok {
		dc.rsIndexer = rsInf.GetIndexer()
	}
	dc.podIndexer = podInformer.Informer().GetIndexer()
	return dc, nil
}

// WithNamespaceInformer lets the controller leave Deployments alone in
// namespaces being deleted, where the API server refuses to create their
// ReplicaSets and events. Call before the informers start.
func (dc *Controller) WithNamespaceInformer(nsInformer coreinformers.NamespaceInformer) {
	dc.nsLister = nsInformer.Lister()
}

// Run starts the event sink and workers and blocks until ctx is done.
func (dc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stop := controller.StartEventSink(dc.eventBroadcaster, dc.client)
	defer stop()
	dc.loop.Run(ctx, workers, dc.dListerSynced, dc.rsListerSynced, dc.podListerSynced)
}

// sync adapts syncHandler to the work loop: a namespace being torn down
// rejects every create, so retrying is pointless and the key is forgotten.
func (dc *Controller) sync(ctx context.Context, key string) error {
	err := dc.syncHandler(ctx, key)
	if err != nil && apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
		klog.FromContext(ctx).V(2).Info("Namespace is terminating, not retrying", "key", key, "err", err)
		return nil
	}
	return err
}

func (dc *Controller) addDeployment(logger klog.Logger, obj interface{}) {
	d := obj.(*apps.Deployment)
	logger.V(4).Info("Adding deployment", "deployment", klog.KObj(d))
	dc.enqueue(d)
}

func (dc *Controller) updateDeployment(logger klog.Logger, old, cur interface{}) {
	logger.V(4).Info("Updating deployment", "deployment", klog.KObj(old.(*apps.Deployment)))
	dc.enqueue(cur.(*apps.Deployment))
}

func (dc *Controller) deleteDeployment(logger klog.Logger, obj interface{}) {
	d, ok := obj.(*apps.Deployment)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		if d, ok = tombstone.Obj.(*apps.Deployment); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a Deployment %#v", obj))
			return
		}
	}
	logger.V(4).Info("Deleting deployment", "deployment", klog.KObj(d))
	if key, err := cache.MetaNamespaceKeyFunc(d); err == nil {
		dc.forgetWrite(key)
	}
	dc.enqueue(d)
}

// addReplicaSet wakes the owner of a new ReplicaSet, or every Deployment that
// could adopt it if it is an orphan.
func (dc *Controller) addReplicaSet(logger klog.Logger, obj interface{}) {
	rs := obj.(*apps.ReplicaSet)
	if rs.DeletionTimestamp != nil {
		// Seen for the first time already being deleted (e.g. after a restart).
		dc.deleteReplicaSet(logger, rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if d := dc.resolveControllerRef(rs.Namespace, ref); d != nil {
			logger.V(4).Info("ReplicaSet added", "replicaSet", klog.KObj(rs))
			dc.enqueue(d)
		}
		return
	}
	ds := dc.getDeploymentsForReplicaSet(logger, rs)
	if len(ds) == 0 {
		return
	}
	logger.V(4).Info("Orphan ReplicaSet added", "replicaSet", klog.KObj(rs))
	for _, d := range ds {
		dc.enqueue(d)
	}
}

func (dc *Controller) getDeploymentsForReplicaSet(logger klog.Logger, rs *apps.ReplicaSet) []*apps.Deployment {
	ds, err := util.GetDeploymentsForReplicaSet(dc.dLister, rs)
	if err != nil || len(ds) == 0 {
		return nil
	}
	if len(ds) > 1 {
		// The controllerRef keeps this safe, but overlapping selectors are a user error.
		logger.V(4).Info("user error! more than one deployment is selecting replica set", "replicaSet", klog.KObj(rs), "labels", rs.Labels, "deployment", klog.KObj(ds[0]))
	}
	return ds
}

// updateReplicaSet wakes the old and new owners when the controllerRef
// changes, the owner otherwise, and possible adopters of a changed orphan.
func (dc *Controller) updateReplicaSet(logger klog.Logger, old, cur interface{}) {
	curRS, oldRS := cur.(*apps.ReplicaSet), old.(*apps.ReplicaSet)
	if curRS.ResourceVersion == oldRS.ResourceVersion {
		// Periodic resync: nothing changed.
		return
	}
	curRef, oldRef := metav1.GetControllerOf(curRS), metav1.GetControllerOf(oldRS)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if d := dc.resolveControllerRef(oldRS.Namespace, oldRef); d != nil {
			dc.enqueue(d)
		}
	}
	if curRef != nil {
		if d := dc.resolveControllerRef(curRS.Namespace, curRef); d != nil {
			logger.V(4).Info("ReplicaSet updated", "replicaSet", klog.KObj(curRS))
			dc.enqueue(d)
		}
		return
	}
	if refChanged || !reflect.DeepEqual(curRS.Labels, oldRS.Labels) {
		ds := dc.getDeploymentsForReplicaSet(logger, curRS)
		if len(ds) == 0 {
			return
		}
		logger.V(4).Info("Orphan ReplicaSet updated", "replicaSet", klog.KObj(curRS))
		for _, d := range ds {
			dc.enqueue(d)
		}
	}
}

// deleteReplicaSet wakes the owner of a deleted ReplicaSet; orphans matter to no one.
func (dc *Controller) deleteReplicaSet(logger klog.Logger, obj interface{}) {
	rs, ok := obj.(*apps.ReplicaSet)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		if rs, ok = tombstone.Obj.(*apps.ReplicaSet); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a ReplicaSet %#v", obj))
			return
		}
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil {
		return
	}
	if d := dc.resolveControllerRef(rs.Namespace, ref); d != nil {
		logger.V(4).Info("ReplicaSet deleted", "replicaSet", klog.KObj(rs))
		dc.enqueue(d)
	}
}

// deletePod wakes a Recreate Deployment, which waits for its old pods to go.
func (dc *Controller) deletePod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		if pod, ok = tombstone.Obj.(*v1.Pod); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a pod %#v", obj))
			return
		}
	}
	d := dc.getDeploymentForPod(logger, pod)
	if d == nil {
		return
	}
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod))
	if d.Spec.Strategy.Type == apps.RecreateDeploymentStrategyType {
		dc.enqueue(d)
	}
}

// getDeploymentForPod follows pod -> ReplicaSet -> Deployment controllerRefs.
func (dc *Controller) getDeploymentForPod(logger klog.Logger, pod *v1.Pod) *apps.Deployment {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return nil
	}
	rs, err := dc.rsLister.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		logger.V(4).Info("Cannot get replicaset for pod", "ownerReference", ref.Name, "pod", klog.KObj(pod), "err", err)
		return nil
	}
	if ref = metav1.GetControllerOf(rs); ref == nil {
		return nil
	}
	return dc.resolveControllerRef(rs.Namespace, ref)
}

// resolveControllerRef returns the Deployment ref points to, checking the UID
// so a recreated namesake is not mistaken for the owner.
func (dc *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *apps.Deployment {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	d, err := dc.dLister.Deployments(namespace).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return nil
	}
	return d
}

func (dc *Controller) enqueue(d *apps.Deployment) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %v", d, err))
		return
	}
	dc.queue.Add(key)
}

func (dc *Controller) enqueueRateLimited(d *apps.Deployment) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %v", d, err))
		return
	}
	dc.queue.AddRateLimited(key)
}

func (dc *Controller) enqueueAfter(d *apps.Deployment, after time.Duration) {
	key, err := cache.MetaNamespaceKeyFunc(d)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %#v: %v", d, err))
		return
	}
	dc.queue.AddAfter(key, after)
}

// getReplicaSetsForDeployment returns the ReplicaSets d owns after adopting
// matching orphans and releasing owned ones that no longer match.
func (dc *Controller) getReplicaSetsForDeployment(ctx context.Context, d *apps.Deployment) ([]*apps.ReplicaSet, error) {
	all, err := dc.claimCandidates(d)
	if err != nil {
		return nil, err
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %v", d.Namespace, d.Name, err)
	}
	// The cache may not show a deletion yet; adopting for a Deployment on its
	// way out would orphan what the garbage collector is about to reap.
	canAdopt := controller.RecheckDeletionTimestamp(func(ctx context.Context) (metav1.Object, error) {
		fresh, err := dc.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != d.UID {
			return nil, fmt.Errorf("original Deployment %v/%v is gone: got uid %v, wanted %v", d.Namespace, d.Name, fresh.UID, d.UID)
		}
		return fresh, nil
	})
	cm := controller.NewReplicaSetControllerRefManager(dc.rsControl, d, selector, controllerKind, canAdopt)
	return cm.ClaimReplicaSets(ctx, all)
}

// getPodMapForDeployment groups the pods of rsList by ReplicaSet UID. The
// pods are cache objects: read only.
func (dc *Controller) getPodMapForDeployment(rsList []*apps.ReplicaSet) (map[types.UID][]*v1.Pod, error) {
	podMap := make(map[types.UID][]*v1.Pod, len(rsList))
	for _, rs := range rsList {
		pods, err := controller.FilterPodsByOwner(dc.podIndexer, rs, "ReplicaSet", false)
		if err != nil {
			return nil, err
		}
		podMap[rs.UID] = pods
	}
	return podMap, nil
}

// rsClaimIndex indexes ReplicaSets by controller UID, orphans by namespace:
// a Deployment can only claim its own ReplicaSets and orphans, so a sync
// need not list (and match) every ReplicaSet of a namespace, which made
// each sync cost grow with the namespace.
const rsClaimIndex = "deploymentClaim"

func rsClaimIndexFunc(obj interface{}) ([]string, error) {
	rs, ok := obj.(*apps.ReplicaSet)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref != nil {
		return []string{"uid/" + string(ref.UID)}, nil
	}
	return []string{"orphan/" + rs.Namespace}, nil
}

// claimCandidates returns the ReplicaSets ClaimReplicaSets may act on for d:
// those it controls (kept or released) and the namespace's orphans (maybe
// adopted). Others' ReplicaSets are skipped by the claim anyway.
func (dc *Controller) claimCandidates(d *apps.Deployment) ([]*apps.ReplicaSet, error) {
	if dc.rsIndexer == nil {
		return dc.rsLister.ReplicaSets(d.Namespace).List(labels.Everything())
	}
	var out []*apps.ReplicaSet
	for _, key := range []string{"uid/" + string(d.UID), "orphan/" + d.Namespace} {
		objs, err := dc.rsIndexer.ByIndex(rsClaimIndex, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			// The UID is cluster-wide unique, but stay in d's namespace.
			if rs, ok := o.(*apps.ReplicaSet); ok && rs.Namespace == d.Namespace {
				out = append(out, rs)
			}
		}
	}
	return out, nil
}
