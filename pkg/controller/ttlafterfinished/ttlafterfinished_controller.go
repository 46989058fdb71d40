// Package ttlafterfinished deletes finished Jobs (Complete or Failed) once
// spec.ttlSecondsAfterFinished has passed since they finished.
package ttlafterfinished

import (
	"context"
	"fmt"
	"sync"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	clientset "k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

var (
	jobDeletionDurationSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      "ttl_after_finished_controller",
		Name:           "job_deletion_duration_seconds",
		Help:           "The time it took to delete the job since it became eligible for deletion",
		StabilityLevel: metrics.ALPHA,
		// 100ms to about 27 minutes.
		Buckets: metrics.ExponentialBuckets(0.1, 2, 14),
	})
	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(jobDeletionDurationSeconds) })
}

// Controller is the TTL-after-finished controller.
type Controller struct {
	client      clientset.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	jLister       batchlisters.JobLister
	jListerSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	clock clock.WithTicker
}

// NewController returns a controller; start it with Run.
func NewController(ctx context.Context, jobInformer batchinformers.JobInformer, client clientset.Interface) *Controller {
	return newWithClock(ctx, jobInformer, client, clock.RealClock{})
}

func newWithClock(ctx context.Context, jobInformer batchinformers.JobInformer, client clientset.Interface, clk clock.WithTicker) *Controller {
	registerMetrics()
	broadcaster, recorder := controller.NewEventRecorder(ctx, "ttl-after-finished-controller")
	tc := &Controller{
		client:      client,
		broadcaster: broadcaster,
		recorder:    recorder,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "ttl_jobs_to_delete", Clock: clk}),
		clock: clk,
	}
	logger := klog.FromContext(ctx)
	_, _ = jobInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { tc.onJob(logger, obj) },
		UpdateFunc: func(_, cur interface{}) { tc.onJob(logger, cur) },
	})
	tc.jLister = jobInformer.Lister()
	tc.jListerSynced = jobInformer.Informer().HasSynced
	return tc
}

// Run waits for the Job cache and processes Jobs with workers goroutines
// until ctx is cancelled.
func (tc *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	stop := controller.StartEventSink(tc.broadcaster, tc.client)
	defer stop()
	loop := controller.WorkLoop[string]{Name: "ttl_jobs_to_delete", Queue: tc.queue, Sync: tc.processJob}
	loop.Run(ctx, workers, tc.jListerSynced)
}

func (tc *Controller) onJob(logger klog.Logger, obj interface{}) {
	job, ok := obj.(*batch.Job)
	if !ok || job.DeletionTimestamp != nil || !needsCleanup(job) {
		return
	}
	logger.V(4).Info("Add job to cleanup", "job", klog.KObj(job))
	key, err := controller.KeyFunc(job)
	if err != nil {
		utilruntime.HandleErrorWithLogger(logger, err, "Failed to get key for job", "job", klog.KObj(job))
		return
	}
	tc.queue.Add(key)
}

// processJob deletes the Job if its TTL has expired, otherwise requeues it
// for when it will. The cached Job is deleted only at the resourceVersion
// checked; if the Job has changed since (the user changed its TTL, or
// recreated it), the delete is refused and the TTL is checked again on a
// live read. Upstream reads before every delete; this costs the read only
// when the cache is behind.
func (tc *Controller) processJob(ctx context.Context, key string) error {
	logger := klog.FromContext(ctx)
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	logger.V(4).Info("Checking if Job is ready for cleanup", "job", klog.KRef(ns, name))
	job, err := tc.jLister.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	expiredAt, err := tc.processTTL(logger, key, job)
	if err != nil || expiredAt == nil {
		return err
	}
	err = tc.deleteJob(ctx, job, job.ResourceVersion, expiredAt)
	if apierrors.IsNotFound(err) {
		return nil // already gone, as a live read would have said
	}
	if !apierrors.IsConflict(err) || job.ResourceVersion == "" {
		return err
	}
	logger.V(4).Info("Job changed since cached, checking it again", "job", klog.KObj(job))
	fresh, err := tc.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	expiredAt, err = tc.processTTL(logger, key, fresh)
	if err != nil || expiredAt == nil {
		return err
	}
	return tc.deleteJob(ctx, fresh, "", expiredAt)
}

// deleteJob deletes job in the foreground (it stays visible until its pods
// are gone), at resourceVersion when that is set.
func (tc *Controller) deleteJob(ctx context.Context, job *batch.Job, resourceVersion string, expiredAt *time.Time) error {
	policy := metav1.DeletePropagationForeground
	pre := &metav1.Preconditions{UID: &job.UID}
	if resourceVersion != "" {
		pre.ResourceVersion = &resourceVersion
	}
	klog.FromContext(ctx).V(4).Info("Cleaning up Job", "job", klog.KObj(job))
	if err := tc.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy,
		Preconditions:     pre,
	}); err != nil {
		return err
	}
	jobDeletionDurationSeconds.Observe(tc.clock.Since(*expiredAt).Seconds())
	return nil
}

// processTTL returns when the Job expired, or nil (after requeueing it
// for its expiry) if it has not yet or needs no cleanup.
func (tc *Controller) processTTL(logger klog.Logger, key string, job *batch.Job) (*time.Time, error) {
	if job.DeletionTimestamp != nil || !needsCleanup(job) {
		return nil, nil
	}
	now := tc.clock.Now()
	finishAt, err := finishTime(job)
	if err != nil {
		return nil, err
	}
	expireAt := finishAt.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second)
	if finishAt.After(now) {
		logger.Info("Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred.", "job", klog.KObj(job))
	}
	left := expireAt.Sub(now)
	logger.V(4).Info("Found Job finished", "job", klog.KObj(job), "finishTime", finishAt.UTC(), "remainingTTL", left, "startTime", now.UTC(), "deadlineTTL", expireAt.UTC())
	if left <= 0 {
		return &expireAt, nil
	}
	tc.queue.AddAfter(key, left)
	return nil, nil
}

func needsCleanup(j *batch.Job) bool {
	return j.Spec.TTLSecondsAfterFinished != nil && hasFinishedCondition(j)
}

func hasFinishedCondition(j *batch.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batch.JobComplete || c.Type == batch.JobFailed) && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// finishTime is the transition time of the True Complete/Failed condition.
func finishTime(j *batch.Job) (time.Time, error) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batch.JobComplete || c.Type == batch.JobFailed) && c.Status == v1.ConditionTrue {
			if c.LastTransitionTime.IsZero() {
				return time.Time{}, fmt.Errorf("unable to find the time when the Job %s/%s finished", j.Namespace, j.Name)
			}
			return c.LastTransitionTime.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("unable to find the status of the finished Job %s/%s", j.Namespace, j.Name)
}
