// Package job runs the pods of batch/v1 Jobs to completion: it creates pods
// up to parallelism, counts finished pods exactly through the
// batch.kubernetes.io/job-tracking finalizer and
// status.uncountedTerminatedPods, applies the backoff, deadline, pod failure
// and success policies, and marks the Job Complete or Failed.
package job

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// Features are the feature gates the Job controller consults.
type Features struct {
	// StaleControllerConsistency (StaleControllerConsistencyJob) skips
	// syncs until the informers have seen the controller's own writes.
	StaleControllerConsistency bool
	// MutableSchedulingDirectivesForSuspendedJobs: suspending a Job clears
	// status.startTime.
	MutableSchedulingDirectivesForSuspendedJobs bool
}

var controllerKind = batch.SchemeGroupVersion.WithKind("Job")

// podJobUIDIndex indexes pods by the Job UID label a generated selector pins.
const podJobUIDIndex = "podJobUID"

var (
	jobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}
	podsResource = schema.GroupResource{Resource: "pods"}
)

// Tunables, variables (as upstream) so tests can shorten them.
var (
	// SyncJobBatchPeriod batches the syncs pod events trigger.
	SyncJobBatchPeriod = time.Second
	// DefaultJobAPIBackOff and MaxJobAPIBackOff bound the requeue backoff
	// after a failed sync.
	DefaultJobAPIBackOff = time.Second
	MaxJobAPIBackOff     = time.Minute
	// DefaultJobPodFailureBackOff doubles per failure since the last
	// success, up to MaxJobPodFailureBackOff, before pods are recreated.
	DefaultJobPodFailureBackOff = 10 * time.Second
	MaxJobPodFailureBackOff     = 10 * time.Minute
	// MaxUncountedPods caps status.uncountedTerminatedPods (about 20 KB).
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync caps pod writes per sync.
	MaxPodCreateDeletePerSync = 500
)

// Controller is the Job controller.
type Controller struct {
	kubeClient clientset.Interface
	podControl controller.PodControlInterface

	// updateStatusHandler writes a Job's status; tests replace it.
	updateStatusHandler func(ctx context.Context, job *batch.Job) (*batch.Job, error)

	podStoreSynced cache.InformerSynced
	jobStoreSynced cache.InformerSynced

	// expectations holds a Job back until the pods it created or deleted
	// show up in the informer.
	expectations controller.ControllerExpectationsInterface
	// finalizerExpectations holds back pods whose finalizer removal the
	// informer has not shown yet.
	finalizerExpectations *finalizerExpectations

	jobLister  batchlisters.JobLister
	podStore   corelisters.PodLister
	podIndexer cache.Indexer

	queue       workqueue.TypedRateLimitingInterface[string]
	orphanQueue workqueue.TypedRateLimitingInterface[orphanPodKey]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	clock clock.WithTicker

	podBackoffStore *backoffStore

	// finishedJobExpectations holds the UIDs of Jobs this controller marked
	// finished whose update the informer has not delivered yet, so a stale
	// cache does not make it finish them twice.
	finishedJobExpectations sync.Map

	consistency controller.ConsistencyStore
	// uncertainCreates: Jobs a pod create of which failed without the API
	// server's verdict, so the pod may exist anyway.
	uncertainCreates *controller.UncertainCreates
	// active counts each Job's running pods, to sync a Job at once when
	// its last one finishes.
	active   *activePods
	features Features
}

// orphanPodKey names either one pod or all pods of a namespace matching a
// selector whose tracking finalizer may need removing.
type orphanPodKey struct {
	bySelector bool
	namespace  string
	// value is a pod name or a selector string.
	value string
}

// NewController returns a Job controller; start it with Run.
func NewController(ctx context.Context, podInformer coreinformers.PodInformer, jobInformer batchinformers.JobInformer, kubeClient clientset.Interface, features Features) (*Controller, error) {
	return newControllerWithClock(ctx, podInformer, jobInformer, kubeClient, clock.RealClock{}, features)
}

func newControllerWithClock(ctx context.Context, podInformer coreinformers.PodInformer, jobInformer batchinformers.JobInformer, kubeClient clientset.Interface, clk clock.WithTicker, features Features) (*Controller, error) {
	logger := klog.FromContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, "job-controller")
	jm := &Controller{
		kubeClient:            kubeClient,
		expectations:          controller.NewControllerExpectationsWithClock(clk),
		finalizerExpectations: newFinalizerExpectations(),
		uncertainCreates:      controller.NewUncertainCreates(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](DefaultJobAPIBackOff, MaxJobAPIBackOff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "job", Clock: clk}),
		orphanQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[orphanPodKey](DefaultJobAPIBackOff, MaxJobAPIBackOff),
			workqueue.TypedRateLimitingQueueConfig[orphanPodKey]{Name: "job_orphan_pod", Clock: clk}),
		broadcaster:     broadcaster,
		recorder:        recorder,
		clock:           clk,
		podBackoffStore: newBackoffStore(),
		consistency:     controller.NewNoopConsistencyStore(),
		active:          newActivePods(),
		features:        features,
	}
	podControl := controller.RealPodControl{KubeClient: kubeClient, Recorder: recorder}
	if features.StaleControllerConsistency {
		jm.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{
			podsResource: podInformer.Informer().GetStore(),
			jobsResource: jobInformer.Informer().GetStore(),
		})
		podControl.OnWrite = func(pod *v1.Pod, ref *metav1.OwnerReference) {
			if ref != nil {
				jm.consistency.WroteAt(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, ref.UID, podsResource, pod.ResourceVersion)
			}
		}
	}
	jm.podControl = podControl

	if _, err := jobInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { jm.addJob(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { jm.updateJob(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { jm.deleteJob(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding Job event handler: %w", err)
	}
	jm.jobLister = jobInformer.Lister()
	jm.jobStoreSynced = jobInformer.Informer().HasSynced

	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { jm.podAdded(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { jm.podUpdated(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { jm.podDeleted(logger, obj) },
	}); err != nil {
		return nil, fmt.Errorf("adding Pod event handler: %w", err)
	}
	jm.podStore = podInformer.Lister()
	jm.podStoreSynced = podInformer.Informer().HasSynced
	if err := controller.AddPodControllerIndexer(podInformer.Informer()); err != nil {
		return nil, fmt.Errorf("adding Pod controller UID indexer: %w", err)
	}
	if err := controller.AddPodLabelIndexer(podInformer.Informer(), podJobUIDIndex, batch.ControllerUidLabel); err != nil {
		return nil, fmt.Errorf("adding Pod Job UID label indexer: %w", err)
	}
	jm.podIndexer = podInformer.Informer().GetIndexer()

	jm.updateStatusHandler = jm.updateJobStatus
	registerMetrics()
	return jm, nil
}

// Run sends events, waits for the caches, then runs workers Job workers
// and as many orphan-pod workers until ctx is cancelled.
func (jm *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(jm.broadcaster, jm.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting job controller")
	defer logger.Info("Shutting down job controller")

	jobs := controller.WorkLoop[string]{Name: "job", Queue: jm.queue, Sync: jm.syncJob}
	orphans := controller.WorkLoop[orphanPodKey]{Name: "job_orphan_pod", Queue: jm.orphanQueue, Sync: jm.syncOrphanPod}
	if !controller.WaitForCacheSync(ctx, "job", jm.podStoreSynced, jm.jobStoreSynced) {
		jm.queue.ShutDown()
		jm.orphanQueue.ShutDown()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { orphans.RunWorkers(ctx, workers) })
	jobs.RunWorkers(ctx, workers)
	wg.Wait()
}

// resolveControllerRef returns the Job ref points to, if it still exists
// with that UID.
func (jm *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *batch.Job {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	job, err := jm.jobLister.Jobs(namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil
	}
	return job
}

// podJobs returns the Jobs whose selector matches an orphan pod.
func (jm *Controller) podJobs(pod *v1.Pod) []*batch.Job {
	jobs, err := jm.jobLister.GetPodJobs(pod)
	if err != nil {
		return nil
	}
	if len(jobs) > 1 {
		utilruntime.HandleError(fmt.Errorf("user error! more than one job is selecting pods with labels: %+v", pod.Labels))
	}
	out := make([]*batch.Job, 0, len(jobs))
	for i := range jobs {
		out = append(out, &jobs[i])
	}
	return out
}

// podAdded, podUpdated and podDeleted are the pod informer's handlers:
// they keep the active count, then react to the event.
func (jm *Controller) podAdded(logger klog.Logger, obj interface{}) {
	jm.active.observe(nil, podFromEvent(obj))
	jm.addPod(logger, obj)
}

func (jm *Controller) podUpdated(logger klog.Logger, old, cur interface{}) {
	oldPod, curPod := old.(*v1.Pod), cur.(*v1.Pod)
	left := jm.active.observe(oldPod, curPod)
	jm.updatePod(logger, oldPod, curPod, left)
}

func (jm *Controller) podDeleted(logger klog.Logger, obj interface{}) {
	jm.active.observe(podFromEvent(obj), nil)
	jm.deletePod(logger, obj, true)
}

func (jm *Controller) addPod(logger klog.Logger, obj interface{}) {
	pod := obj.(*v1.Pod)
	recordTrackingFinalizerChange(nil, pod)
	if pod.DeletionTimestamp != nil {
		// A pod already being deleted (seen after a restart) is no creation.
		jm.deletePod(logger, pod, false)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		job := jm.resolveControllerRef(pod.Namespace, ref)
		if job == nil {
			return
		}
		key, err := controller.KeyFunc(job)
		if err != nil {
			return
		}
		jm.expectations.CreationObserved(logger, key)
		jm.enqueueBatched(logger, job)
		return
	}
	if hasTrackingFinalizer(pod) {
		jm.enqueueOrphanPod(pod, false)
	}
	// An orphan: wake matching Jobs so one may adopt it.
	for _, job := range jm.podJobs(pod) {
		jm.enqueueBatched(logger, job)
	}
}

// updatePod reacts to a pod update; activeLeft is how many pods of curPod's
// Job are still active after it.
func (jm *Controller) updatePod(logger klog.Logger, oldPod, curPod *v1.Pod, activeLeft int) {
	recordTrackingFinalizerChange(oldPod, curPod)
	if curPod.ResourceVersion == oldPod.ResourceVersion {
		return // periodic resync
	}
	if curPod.DeletionTimestamp != nil {
		// Graceful deletion: act now rather than when the pod is gone.
		jm.deletePod(logger, curPod, false)
		return
	}
	// Only the current state matters: during an ownership change the
	// finalizer may be re-added and removed within one collapsed event.
	finalizerRemoved := !hasTrackingFinalizer(curPod)
	curRef, oldRef := metav1.GetControllerOf(curPod), metav1.GetControllerOf(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		if job := jm.resolveControllerRef(oldPod.Namespace, oldRef); job != nil {
			if finalizerRemoved {
				if key, err := controller.KeyFunc(job); err == nil {
					jm.finalizerExpectations.observed(logger, key, curPod.UID)
				}
			}
			jm.enqueueBatched(logger, job)
		}
	}
	if curRef != nil {
		job := jm.resolveControllerRef(curPod.Namespace, curRef)
		if job == nil {
			return
		}
		if finalizerRemoved {
			if key, err := controller.KeyFunc(job); err == nil {
				jm.finalizerExpectations.observed(logger, key, curPod.UID)
			}
		}
		if !refChanged && activeLeft == 0 && controller.IsPodTerminal(curPod) && !controller.IsPodTerminal(oldPod) && jm.creationsObserved(logger, job) {
			// The Job's last running pod finished: nothing else can join
			// the batch.
			jm.enqueueNow(logger, job)
			return
		}
		jm.enqueueBatched(logger, job)
		return
	}
	if hasTrackingFinalizer(curPod) {
		jm.enqueueOrphanPod(curPod, false)
	}
	if refChanged || !reflect.DeepEqual(curPod.Labels, oldPod.Labels) {
		for _, job := range jm.podJobs(curPod) {
			jm.enqueueBatched(logger, job)
		}
	}
}

// deletePod handles the final delete (final=true) and the update setting
// deletionTimestamp. obj may be a tombstone.
func (jm *Controller) deletePod(logger klog.Logger, obj interface{}, final bool) {
	pod, ok := obj.(*v1.Pod)
	if final {
		recordTrackingFinalizerChange(pod, nil)
	}
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %+v", obj))
			return
		}
		if pod, ok = tombstone.Obj.(*v1.Pod); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a pod %+v", obj))
			return
		}
	}
	ref := metav1.GetControllerOf(pod)
	hasFinalizer := hasTrackingFinalizer(pod)
	if ref == nil {
		// Possibly a Job's pod whose ownerRef the garbage collector removed.
		if hasFinalizer {
			jm.enqueueOrphanPod(pod, false)
		}
		return
	}
	job := jm.resolveControllerRef(pod.Namespace, ref)
	if job == nil || isJobFinished(job) {
		// syncJob will not remove this finalizer.
		if hasFinalizer {
			jm.enqueueOrphanPod(pod, false)
		}
		return
	}
	key, err := controller.KeyFunc(job)
	if err != nil {
		return
	}
	jm.expectations.DeletionObserved(logger, key)
	if final || !hasFinalizer {
		jm.finalizerExpectations.observed(logger, key, pod.UID)
	}
	jm.enqueueBatched(logger, job)
}

func (jm *Controller) addJob(logger klog.Logger, obj interface{}) {
	jm.enqueueNow(logger, obj)
	if job, ok := obj.(*batch.Job); ok {
		if name := managedByExternalController(job); name != nil {
			jobByExternalControllerTotal.WithLabelValues(*name).Inc()
		}
	}
}

func (jm *Controller) updateJob(logger klog.Logger, old, cur interface{}) {
	oldJob, curJob := old.(*batch.Job), cur.(*batch.Job)
	key, err := controller.KeyFunc(curJob)
	if err != nil {
		return
	}
	if isJobFinished(curJob) {
		// Backup: finalizers should be gone already; clean any left.
		jm.enqueueLabelSelector(curJob)
		return
	}
	if curJob.Generation == oldJob.Generation {
		// Status-only changes (mostly our own) are batched.
		jm.enqueueBatched(logger, curJob)
	} else {
		jm.enqueueNow(logger, curJob)
	}
	// A changed activeDeadlineSeconds needs its own wake-up.
	if curJob.Status.StartTime != nil && curJob.Spec.ActiveDeadlineSeconds != nil {
		oldADS := oldJob.Spec.ActiveDeadlineSeconds
		if oldADS == nil || *oldADS != *curJob.Spec.ActiveDeadlineSeconds {
			left := time.Duration(*curJob.Spec.ActiveDeadlineSeconds)*time.Second - jm.clock.Since(curJob.Status.StartTime.Time)
			jm.queue.AddAfter(key, left)
			logger.V(4).Info("job's ActiveDeadlineSeconds updated, will rsync", "key", key, "interval", left)
		}
	}
}

func (jm *Controller) deleteJob(logger klog.Logger, obj interface{}) {
	jm.enqueueNow(logger, obj)
	job, ok := obj.(*batch.Job)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %+v", obj))
			return
		}
		if job, ok = tombstone.Obj.(*batch.Job); !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a job %+v", obj))
			return
		}
	}
	jm.consistency.Clear(types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, job.UID)
	jm.finishedJobExpectations.Delete(job.UID)
	// Pods of a deleted Job lose their finalizer through the orphan queue.
	jm.enqueueLabelSelector(job)
	key := cache.MetaObjectToName(job).String()
	jm.expectations.DeleteExpectations(logger, key)
	jm.podBackoffStore.remove(key)
}

func (jm *Controller) enqueueLabelSelector(job *batch.Job) {
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("job %s/%s has invalid label selector: %w", job.Namespace, job.Name, err))
		return
	}
	jm.orphanQueue.Add(orphanPodKey{bySelector: true, namespace: job.Namespace, value: sel.String()})
}

// creationsObserved: the informer has shown every pod the Job's last sync
// created or deleted (an early sync would otherwise only write status).
func (jm *Controller) creationsObserved(logger klog.Logger, job *batch.Job) bool {
	key, err := controller.KeyFunc(job)
	return err == nil && jm.expectations.SatisfiedExpectations(logger, key)
}

// enqueueNow is for Job events (create, delete, spec change).
func (jm *Controller) enqueueNow(logger klog.Logger, obj interface{}) {
	jm.enqueueAfter(logger, obj, 0)
}

// enqueueBatched is for pod events and status updates, which come in bursts.
func (jm *Controller) enqueueBatched(logger klog.Logger, obj interface{}) {
	jm.enqueueAfter(logger, obj, SyncJobBatchPeriod)
}

// enqueueWithDelay is for delayed pod recreation; never below the batch period.
func (jm *Controller) enqueueWithDelay(logger klog.Logger, obj interface{}, delay time.Duration) {
	jm.enqueueAfter(logger, obj, max(delay, SyncJobBatchPeriod))
}

func (jm *Controller) enqueueAfter(logger klog.Logger, obj interface{}, delay time.Duration) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %v", obj, err))
		return
	}
	logger.V(2).Info("enqueueing job", "key", key, "delay", delay)
	jm.queue.AddAfter(key, delay)
}

func (jm *Controller) enqueueOrphanPod(pod *v1.Pod, backoff bool) {
	k := orphanPodKey{namespace: pod.Namespace, value: pod.Name}
	if backoff {
		jm.orphanQueue.AddRateLimited(k)
	} else {
		jm.orphanQueue.Add(k)
	}
}

// syncOrphanPod removes the tracking finalizer from pods no running Job
// will account for.
func (jm *Controller) syncOrphanPod(ctx context.Context, key orphanPodKey) error {
	logger := klog.FromContext(ctx)
	if !key.bySelector {
		pod, err := jm.podStore.Pods(key.namespace).Get(key.value)
		if apierrors.IsNotFound(err) {
			logger.V(4).Info("Orphan pod has been deleted", "pod", klog.KRef(key.namespace, key.value))
			return nil
		}
		if err != nil {
			return err
		}
		return jm.cleanOrphanPod(ctx, pod)
	}
	sel, err := labels.Parse(key.value)
	if err != nil {
		return fmt.Errorf("invalid label selector: %w", err)
	}
	// A generated Job selector pins the Job's UID label: look the pods up
	// by it instead of matching every pod of the namespace.
	pods, err := controller.ListPodsPinnedBy(jm.podIndexer, podJobUIDIndex, batch.ControllerUidLabel, key.namespace, sel)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if err := jm.cleanOrphanPod(ctx, pod); err != nil {
			logger.Error(err, "syncing orphan pod failed", "pod", klog.KObj(pod))
			jm.enqueueOrphanPod(pod, true)
		}
	}
	return nil
}

func (jm *Controller) cleanOrphanPod(ctx context.Context, pod *v1.Pod) error {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != controllerKind.Kind || ref.APIVersion != batch.SchemeGroupVersion.String() {
			return nil // someone else's pod
		}
		job := jm.resolveControllerRef(pod.Namespace, ref)
		if job != nil {
			if name := managedByExternalController(job); name != nil {
				klog.FromContext(ctx).V(2).Info("Skip cleanup of the job finalizer for a pod owned by a job that is managed by an external controller",
					"namespace", pod.Namespace, "name", pod.Name, "podUID", pod.UID, "jobUID", job.UID, "controllerName", name)
				return nil
			}
			if !isJobFinished(job) {
				return nil // adopted by a running Job
			}
		}
	}
	if patch := removeTrackingFinalizerPatch(pod); patch != nil {
		if err := jm.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// managedByExternalController returns spec.managedBy when another
// controller owns the Job (JobManagedBy is GA and locked on in v1.37).
func managedByExternalController(job *batch.Job) *string {
	if name := job.Spec.ManagedBy; name != nil && *name != batch.JobControllerName {
		return name
	}
	return nil
}

// isJobFinished: a Complete or Failed condition is True.
func isJobFinished(job *batch.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batch.JobComplete || c.Type == batch.JobFailed) && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}
