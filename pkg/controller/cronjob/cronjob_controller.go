// Package cronjob runs batch/v1 CronJobs: at every time a CronJob's
// schedule names it creates a Job from spec.jobTemplate, honouring
// concurrencyPolicy, startingDeadlineSeconds, suspend and timeZone, keeps
// status.active, lastScheduleTime and lastSuccessfulTime, and prunes
// finished Jobs beyond the history limits.
//
// The controller does not poll: after each sync a CronJob's key is put back
// in the queue to be handled just after its next scheduled time.
package cronjob

import (
	"context"
	"fmt"
	"reflect"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	clientset "k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// queueName names the work queue, and so the workqueue_* metrics.
const queueName = "cronjob"

// jobOwnerUIDIndex indexes Jobs by the UID of their controller.
const jobOwnerUIDIndex = "jobControllerUID"

var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// nextScheduleDelta is added to every requeue so that the sync runs just
// after, never just before, the scheduled time.
var nextScheduleDelta = 100 * time.Millisecond

// Controller is the CronJob controller.
type Controller struct {
	queue workqueue.TypedRateLimitingInterface[string]

	kubeClient  clientset.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	cronJobLister batchlisters.CronJobLister
	jobIndexer    cache.Indexer

	jobListerSynced     cache.InformerSynced
	cronJobListerSynced cache.InformerSynced

	// clock gives the current time; tests replace it.
	clock clock.PassiveClock
}

// NewController returns a CronJob controller; start it with Run.
func NewController(ctx context.Context, jobInformer batchinformers.JobInformer, cronJobsInformer batchinformers.CronJobInformer, kubeClient clientset.Interface) (*Controller, error) {
	return NewControllerWithClock(ctx, jobInformer, cronJobsInformer, kubeClient, clock.RealClock{})
}

// NewControllerWithClock is NewController with the source of the
// current time injected. It exists for tests; schedules are evaluated
// against clk while requeue delays elapse in real time.
func NewControllerWithClock(ctx context.Context, jobInformer batchinformers.JobInformer, cronJobsInformer batchinformers.CronJobInformer, kubeClient clientset.Interface, clk clock.PassiveClock) (*Controller, error) {
	logger := klog.FromContext(ctx)
	broadcaster, recorder := controller.NewEventRecorder(ctx, "cronjob-controller")
	jm := &Controller{
		queue:               controller.NewNamedQueue(queueName),
		kubeClient:          kubeClient,
		broadcaster:         broadcaster,
		recorder:            recorder,
		cronJobLister:       cronJobsInformer.Lister(),
		jobIndexer:          jobInformer.Informer().GetIndexer(),
		jobListerSynced:     jobInformer.Informer().HasSynced,
		cronJobListerSynced: cronJobsInformer.Informer().HasSynced,
		clock:               clk,
	}

	if _, err := jobInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    jm.addJob,
		UpdateFunc: jm.updateJob,
		DeleteFunc: jm.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("adding Job event handler: %w", err)
	}
	if _, err := cronJobsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    jm.enqueue,
		UpdateFunc: func(old, cur interface{}) { jm.updateCronJob(logger, old, cur) },
		DeleteFunc: jm.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("adding CronJob event handler: %w", err)
	}
	if err := jobInformer.Informer().AddIndexers(cache.Indexers{jobOwnerUIDIndex: jobOwnerUID}); err != nil {
		return nil, fmt.Errorf("adding job controller UID indexer: %w", err)
	}

	registerMetrics()
	return jm, nil
}

// jobOwnerUID is the index function of jobOwnerUIDIndex.
func jobOwnerUID(obj interface{}) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(job); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// Run sends events, waits for the caches, then runs workers until ctx is
// cancelled.
func (jm *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stopEvents := controller.StartEventSink(jm.broadcaster, jm.kubeClient)
	defer stopEvents()

	logger := klog.FromContext(ctx)
	logger.Info("Starting cronjob controller v2")
	defer logger.Info("Shutting down cronjob controller v2")

	loop := controller.WorkLoop[string]{Name: queueName, Queue: jm.queue, Sync: jm.syncKey}
	if !controller.WaitForCacheSync(ctx, queueName, jm.jobListerSynced, jm.cronJobListerSynced) {
		jm.queue.ShutDown()
		return
	}
	loop.RunWorkers(ctx, workers)
}

// syncKey adapts sync to the shared work loop: a requested requeue is
// scheduled here, and the loop then forgets the key's failures.
func (jm *Controller) syncKey(ctx context.Context, key string) error {
	requeueAfter, err := jm.sync(ctx, key)
	if err != nil {
		return err
	}
	if requeueAfter != nil {
		jm.queue.AddAfter(key, *requeueAfter)
	}
	return nil
}

// resolveControllerRef returns the CronJob ref points to, if it still
// exists with that UID.
func (jm *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *batchv1.CronJob {
	if ref.Kind != controllerKind.Kind {
		return nil
	}
	cj, err := jm.cronJobLister.CronJobs(namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

func (jm *Controller) addJob(obj interface{}) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if job.DeletionTimestamp != nil {
		jm.deleteJob(job)
		return
	}
	if ref := metav1.GetControllerOf(job); ref != nil {
		if cj := jm.resolveControllerRef(job.Namespace, ref); cj != nil {
			jm.enqueue(cj)
		}
	}
}

func (jm *Controller) updateJob(old, cur interface{}) {
	oldJob, ok1 := old.(*batchv1.Job)
	curJob, ok2 := cur.(*batchv1.Job)
	if !ok1 || !ok2 || curJob.ResourceVersion == oldJob.ResourceVersion {
		return // periodic resync
	}
	curRef, oldRef := metav1.GetControllerOf(curJob), metav1.GetControllerOf(oldJob)
	if oldRef != nil && !reflect.DeepEqual(curRef, oldRef) {
		if cj := jm.resolveControllerRef(oldJob.Namespace, oldRef); cj != nil {
			jm.enqueue(cj)
		}
	}
	if curRef != nil {
		if cj := jm.resolveControllerRef(curJob.Namespace, curRef); cj != nil {
			jm.enqueue(cj)
		}
	}
}

func (jm *Controller) deleteJob(obj interface{}) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
			return
		}
		job, ok = tombstone.Obj.(*batchv1.Job)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("tombstone contained object that is not a Job %#v", obj))
			return
		}
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil {
		return
	}
	if cj := jm.resolveControllerRef(job.Namespace, ref); cj != nil {
		jm.enqueue(cj)
	}
}

func (jm *Controller) enqueue(obj interface{}) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	jm.queue.Add(key)
}

func (jm *Controller) enqueueAfter(obj interface{}, d time.Duration) {
	key, err := controller.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for object %+v: %w", obj, err))
		return
	}
	jm.queue.AddAfter(key, d)
}

// updateCronJob requeues a CronJob for its next scheduled time when its
// schedule or time zone changed, and at once otherwise.
func (jm *Controller) updateCronJob(logger klog.Logger, old, cur interface{}) {
	oldCJ, ok1 := old.(*batchv1.CronJob)
	newCJ, ok2 := cur.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if oldCJ.Spec.Schedule == newCJ.Spec.Schedule && ptr.Equal(oldCJ.Spec.TimeZone, newCJ.Spec.TimeZone) {
		jm.enqueue(cur)
		return
	}
	// A nil recorder: the sync reports a CRON_TZ/TZ schedule, not this handler.
	sched, err := parseSchedule(formatSchedule(newCJ, nil))
	if err != nil {
		logger.V(2).Info("Unparseable schedule for cronjob", "cronjob", klog.KObj(newCJ), "schedule", newCJ.Spec.Schedule, "err", err)
		jm.recorder.Eventf(newCJ, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", newCJ.Spec.Schedule)
		return
	}
	jm.enqueueAfter(cur, *nextScheduleTimeDuration(newCJ, jm.clock.Now(), sched))
}
