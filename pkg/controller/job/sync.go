package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// syncJobCtx is what one sync computes about a Job and passes around.
type syncJobCtx struct {
	job                  *batch.Job
	pods                 []*v1.Pod
	activePods           []*v1.Pod
	finishedCondition    *batch.JobCondition
	succeeded            int32
	failed               int32
	prevSucceededIndexes indexSet
	succeededIndexes     indexSet
	failedIndexes        *indexSet
	newBackoffRecord     backoffRecord
	expectedRmFinalizers sets.Set[types.UID]
	uncountedSucceeded   sets.Set[types.UID]
	uncountedFailed      sets.Set[types.UID]
	delayedDeletion      map[int]*v1.Pod
	terminating          *int32
	ready                int32
}

// getPodsForJob lists the Job's pods (and orphans it may adopt), adopting
// matching orphans with the tracking finalizer and releasing pods that no
// longer match. The pods are cache pointers: do not mutate them.
func (jm *Controller) getPodsForJob(ctx context.Context, j *batch.Job) ([]*v1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("couldn't convert Job selector: %v", err)
	}
	pods, err := controller.FilterPodsByOwner(jm.podIndexer, &j.ObjectMeta, controllerKind.Kind, true)
	if err != nil {
		return nil, err
	}
	// Re-check with a live read before adopting: the Job may be going away.
	canAdopt := controller.RecheckDeletionTimestamp(func(ctx context.Context) (metav1.Object, error) {
		fresh, err := jm.kubeClient.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if fresh.UID != j.UID {
			return nil, fmt.Errorf("original Job %v/%v is gone: got uid %v, wanted %v", j.Namespace, j.Name, fresh.UID, j.UID)
		}
		return fresh, nil
	})
	cm := controller.NewPodControllerRefManager(jm.podControl, j, sel, controllerKind, canAdopt, batch.JobTrackingFinalizer)
	pods, err = cm.ClaimPods(ctx, pods)
	if err != nil {
		return pods, err
	}
	// Adopted pods got the finalizer in the patch; reflect it locally.
	for i, p := range pods {
		owned := slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == j.UID })
		if !owned && !hasTrackingFinalizer(p) {
			pods[i] = p.DeepCopy()
			pods[i].Finalizers = append(pods[i].Finalizers, batch.JobTrackingFinalizer)
		}
	}
	return pods, nil
}

// syncJob reconciles one Job. It must not run concurrently for one key
// (the work queue guarantees that).
func (jm *Controller) syncJob(ctx context.Context, key string) (rErr error) {
	start := jm.clock.Now()
	logger := klog.FromContext(ctx)
	defer func() {
		logger.V(4).Info("Finished syncing job", "key", key, "elapsed", jm.clock.Since(start))
	}()

	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	if ns == "" || name == "" {
		return fmt.Errorf("invalid job key %q: either namespace or name is missing", key)
	}
	nsName := types.NamespacedName{Namespace: ns, Name: name}
	if err := jm.consistency.EnsureReady(nsName); err != nil {
		var stale *controller.ConsistencyError
		if errors.As(err, &stale) {
			staleSyncSkips.WithLabelValues(stale.GroupResource.Group, stale.GroupResource.Resource).Inc()
		}
		return err
	}

	sharedJob, err := jm.jobLister.Jobs(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			logger.V(4).Info("Job has been deleted", "key", key)
			jm.expectations.DeleteExpectations(logger, key)
			jm.finalizerExpectations.forget(key)
			jm.consistency.Clear(nsName, "")
			jm.uncertainCreates.Forget(key)
			jm.podBackoffStore.remove(key)
			return nil
		}
		return err
	}
	// Checked here too, not only when queueing: a Job may be replaced by
	// one of the same name managed elsewhere while its key is queued.
	if name := managedByExternalController(sharedJob); name != nil {
		logger.V(2).Info("Skip syncing the job as it is managed by an external controller", "key", key, "uid", sharedJob.UID, "controllerName", name)
		return nil
	}
	job := sharedJob.DeepCopy()
	if isJobFinished(job) {
		jm.podBackoffStore.remove(key)
		jm.consistency.Clear(nsName, job.UID)
		jm.finishedJobExpectations.Delete(job.UID)
		return nil
	}
	if _, ok := jm.finishedJobExpectations.Load(job.UID); ok {
		logger.V(2).Info("Skip syncing the job as its marked finished but the corresponding update event is not yet received", "uid", job.UID, "key", key)
		return nil
	}
	if job.Spec.CompletionMode != nil && *job.Spec.CompletionMode != batch.NonIndexedCompletion && *job.Spec.CompletionMode != batch.IndexedCompletion {
		jm.recorder.Event(job, v1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	if jm.uncertainCreates.Take(key) {
		if err := jm.awaitUncertainPods(ctx, job, key, nsName); err != nil {
			return err
		}
	}

	mode := completionModeLabel(job)
	action := actionReconciling
	defer func() {
		result := "success"
		if rErr != nil {
			result = "error"
		}
		jobSyncDurationSeconds.WithLabelValues(mode, result, action).Observe(jm.clock.Since(start).Seconds())
		jobSyncNum.WithLabelValues(mode, result, action).Inc()
	}()

	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batch.UncountedTerminatedPods{}
	}
	// Read expectations before listing pods, so a pod that arrives in
	// between defers the sync instead of being missed.
	satisfied := jm.expectations.SatisfiedExpectations(logger, key)

	pods, err := jm.getPodsForJob(ctx, job)
	if err != nil {
		return err
	}
	active := controller.FilterActivePods(pods)
	jc := &syncJobCtx{
		job:                  job,
		pods:                 pods,
		activePods:           active,
		ready:                countReady(active),
		uncountedSucceeded:   sets.New(job.Status.UncountedTerminatedPods.Succeeded...),
		uncountedFailed:      sets.New(job.Status.UncountedTerminatedPods.Failed...),
		expectedRmFinalizers: jm.finalizerExpectations.expected(key),
		terminating:          ptr.To(controller.CountTerminatingPods(pods)),
	}
	activeCount := int32(len(active))
	newSucceeded, newFailed := newFinishedPods(jc)
	jc.succeeded = job.Status.Succeeded + int32(len(newSucceeded)) + int32(jc.uncountedSucceeded.Len())
	jc.failed = job.Status.Failed + int32(countedFailures(jc, newFailed)) + int32(jc.uncountedFailed.Len())

	if job.Status.StartTime == nil && !jobSuspended(job) {
		now := metav1.NewTime(jm.clock.Now())
		job.Status.StartTime = &now
	}
	jc.newBackoffRecord = jm.podBackoffStore.newRecord(key, newSucceeded, newFailed)

	// Order matters when several end states hold at once: an earlier
	// SuccessCriteriaMet or FailureTarget wins, then failure, then success.
	var manageErr error
	jc.finishedCondition = successCriteriaMetCondition(job)
	if jc.finishedCondition == nil {
		if ft := findCondition(job.Status.Conditions, batch.JobFailureTarget); ft != nil && ft.Status == v1.ConditionTrue {
			jc.finishedCondition = failedFromFailureTarget(ft, jm.clock.Now())
		} else if msg := failJobMessage(job, pods); msg != nil {
			// Recorded as FailureTarget before the pods' finalizers go.
			jc.finishedCondition = newCondition(batch.JobFailureTarget, v1.ConditionTrue, batch.JobReasonPodFailurePolicy, *msg, jm.clock.Now())
		}
	}
	if jc.finishedCondition == nil {
		switch {
		case jc.failed > *job.Spec.BackoffLimit || pastBackoffLimitOnFailure(job, pods):
			jc.finishedCondition = jm.failureTarget(batch.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		case jm.pastActiveDeadline(job):
			jc.finishedCondition = jm.failureTarget(batch.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")
		case job.Spec.ActiveDeadlineSeconds != nil && !jobSuspended(job):
			next := time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second - jm.clock.Since(job.Status.StartTime.Time)
			logger.V(2).Info("Job has activeDeadlineSeconds configuration. Will sync this job again", "key", key, "nextSyncIn", next)
			jm.queue.AddAfter(key, next)
		}
	}
	if isIndexedJob(job) {
		jc.prevSucceededIndexes, jc.succeededIndexes = succeededIndexes(logger, job, pods)
		jc.succeeded = int32(jc.succeededIndexes.total())
		if hasBackoffLimitPerIndex(job) {
			jc.failedIndexes = failedIndexesOf(logger, job, pods)
			if jc.finishedCondition == nil {
				failedN := jc.failedIndexes.total()
				if job.Spec.MaxFailedIndexes != nil && failedN > int(*job.Spec.MaxFailedIndexes) {
					jc.finishedCondition = jm.failureTarget(batch.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes")
				} else if failedN > 0 && failedN+jc.succeededIndexes.total() >= int(*job.Spec.Completions) {
					jc.finishedCondition = jm.failureTarget(batch.JobReasonFailedIndexes, "Job has failed indexes")
				}
			}
			jc.delayedDeletion = podsWithDelayedDeletionPerIndex(logger, jc)
		}
		if jc.finishedCondition == nil {
			if msg, met := matchSuccessPolicy(logger, job.Spec.SuccessPolicy, *job.Spec.Completions, jc.succeededIndexes); met {
				jc.finishedCondition = newCondition(batch.JobSuccessCriteriaMet, v1.ConditionTrue, batch.JobReasonSuccessPolicy, msg, jm.clock.Now())
			}
		}
	}

	suspendChanged := false
	if jc.finishedCondition != nil {
		// Finishing: delete what still runs; the finalizers go below.
		deletedReady, deleted, err := jm.deleteActivePods(ctx, job, jc.activePods)
		if deleted != activeCount || !satisfied {
			// Pods remain or may be unseen yet: not finished this time.
			jc.finishedCondition = nil
		}
		activeCount -= deleted
		*jc.terminating += deleted
		jc.ready -= deletedReady
		manageErr = err
	} else {
		managed := false
		if satisfied && job.DeletionTimestamp == nil {
			activeCount, action, manageErr = jm.manageJob(ctx, job, jc)
			managed = true
		}
		var complete bool
		if job.Spec.Completions == nil {
			// Work-queue Jobs are done once any pod succeeded and none runs.
			complete = jc.succeeded > 0 && activeCount == 0
		} else {
			complete = jc.succeeded >= *job.Spec.Completions && activeCount == 0
		}
		if complete {
			jc.finishedCondition = newCondition(batch.JobSuccessCriteriaMet, v1.ConditionTrue, batch.JobReasonCompletionsReached, "Reached expected number of succeeded pods", jm.clock.Now())
		} else if managed {
			// Only a sync that managed pods may flip the Suspended condition.
			var changed bool
			if jobSuspended(job) {
				job.Status.Conditions, changed = ensureJobConditionStatus(job.Status.Conditions, batch.JobSuspended, v1.ConditionTrue, "JobSuspended", "Job suspended", jm.clock.Now())
				if changed {
					jm.recorder.Event(job, v1.EventTypeNormal, "Suspended", "Job suspended")
					if jm.features.MutableSchedulingDirectivesForSuspendedJobs {
						job.Status.StartTime = nil
					}
				}
			} else {
				job.Status.Conditions, changed = ensureJobConditionStatus(job.Status.Conditions, batch.JobSuspended, v1.ConditionFalse, "JobResumed", "Job resumed", jm.clock.Now())
				if changed {
					jm.recorder.Event(job, v1.EventTypeNormal, "Resumed", "Job resumed")
					// activeDeadlineSeconds counts continuous activity.
					now := metav1.NewTime(jm.clock.Now())
					job.Status.StartTime = &now
				}
			}
			suspendChanged = changed
		}
	}

	needsUpdate := suspendChanged || activeCount != job.Status.Active || !ptr.Equal(&jc.ready, job.Status.Ready) ||
		!ptr.Equal(job.Status.Terminating, jc.terminating)
	job.Status.Active = activeCount
	job.Status.Ready = &jc.ready
	job.Status.Terminating = jc.terminating
	if err := jm.trackJobStatusAndRemoveFinalizers(ctx, jc, needsUpdate); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

func (jm *Controller) failureTarget(reason, message string) *batch.JobCondition {
	return newCondition(batch.JobFailureTarget, v1.ConditionTrue, reason, message, jm.clock.Now())
}

func failedFromFailureTarget(c *batch.JobCondition, now time.Time) *batch.JobCondition {
	return newCondition(batch.JobFailed, v1.ConditionTrue, c.Reason, c.Message, now)
}

func newCondition(t batch.JobConditionType, status v1.ConditionStatus, reason, message string, now time.Time) *batch.JobCondition {
	return &batch.JobCondition{
		Type:               t,
		Status:             status,
		LastProbeTime:      metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(now),
		Reason:             reason,
		Message:            message,
	}
}

func findCondition(list []batch.JobCondition, t batch.JobConditionType) *batch.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// ensureJobConditionStatus sets a condition, replacing one of the same
// type if status, reason or message differ. A False condition is never
// added where there was none. Reports whether the list changed.
func ensureJobConditionStatus(list []batch.JobCondition, t batch.JobConditionType, status v1.ConditionStatus, reason, message string, now time.Time) ([]batch.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status != status || c.Reason != reason || c.Message != message {
			*c = *newCondition(t, status, reason, message, now)
			return list, true
		}
		return list, false
	}
	if status == v1.ConditionFalse {
		return list, false
	}
	return append(list, *newCondition(t, status, reason, message, now)), true
}

func jobSuspended(job *batch.Job) bool {
	return job.Spec.Suspend != nil && *job.Spec.Suspend
}

// pastActiveDeadline: the Job has run (unsuspended) at least
// activeDeadlineSeconds since status.startTime.
func (jm *Controller) pastActiveDeadline(job *batch.Job) bool {
	if job.Spec.ActiveDeadlineSeconds == nil || job.Status.StartTime == nil || jobSuspended(job) {
		return false
	}
	return jm.clock.Since(job.Status.StartTime.Time) >= time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second
}

// pastBackoffLimitOnFailure counts container restarts of running and
// pending pods against the backoff limit (restartPolicy OnFailure only,
// where failures show as restarts rather than failed pods).
func pastBackoffLimitOnFailure(job *batch.Job, pods []*v1.Pod) bool {
	if job.Spec.Template.Spec.RestartPolicy != v1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != v1.PodRunning && p.Status.Phase != v1.PodPending {
			continue
		}
		for _, s := range p.Status.InitContainerStatuses {
			restarts += s.RestartCount
		}
		for _, s := range p.Status.ContainerStatuses {
			restarts += s.RestartCount
		}
	}
	if *job.Spec.BackoffLimit == 0 {
		return restarts > 0
	}
	return restarts >= *job.Spec.BackoffLimit
}

// onlyReplaceFailedPods: podReplacementPolicy Failed waits for terminating
// pods to fail before replacing them, and does not count them as failed.
func onlyReplaceFailedPods(job *batch.Job) bool {
	return job.Spec.PodReplacementPolicy != nil && *job.Spec.PodReplacementPolicy == batch.Failed
}

// isPodFailed: phase Failed, or (unless podReplacementPolicy is Failed)
// deleted before succeeding, which covers pods that never reach Failed.
func isPodFailed(p *v1.Pod, job *batch.Job) bool {
	if p.Status.Phase == v1.PodFailed {
		return true
	}
	if onlyReplaceFailedPods(job) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != v1.PodSucceeded
}

func countReady(pods []*v1.Pod) int32 {
	var n int32
	for _, p := range pods {
		if controller.IsPodReady(p) {
			n++
		}
	}
	return n
}

// validTrackedPods returns the pods not yet accounted for in status (they
// hold the finalizer, are not in exclude, and are not awaiting finalizer
// removal) with a valid index for Indexed Jobs, that pass keep.
func validTrackedPods(jc *syncJobCtx, exclude sets.Set[types.UID], keep func(*v1.Pod) bool) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range jc.pods {
		if !hasTrackingFinalizer(p) || exclude.Has(p.UID) || jc.expectedRmFinalizers.Has(p.UID) {
			continue
		}
		if isIndexedJob(jc.job) {
			if _, ok := validIndex(jc.job, p); !ok {
				continue
			}
		}
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func newFinishedPods(jc *syncJobCtx) (succeeded, failed []*v1.Pod) {
	succeeded = validTrackedPods(jc, jc.uncountedSucceeded, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	failed = validTrackedPods(jc, jc.uncountedFailed, func(p *v1.Pod) bool { return isPodFailed(p, jc.job) })
	return succeeded, failed
}

// countedFailures drops failures an Ignore rule of the pod failure policy matches.
func countedFailures(jc *syncJobCtx, failed []*v1.Pod) int {
	n := len(failed)
	if jc.job.Spec.PodFailurePolicy != nil {
		for _, p := range failed {
			if _, counted, _ := matchPodFailurePolicy(jc.job.Spec.PodFailurePolicy, p); !counted {
				n--
			}
		}
	}
	return n
}

// deleteActivePods deletes pods of a finishing Job, keeping their
// finalizers (removed once they are counted). Returns how many ready pods
// and how many pods were deleted.
func (jm *Controller) deleteActivePods(ctx context.Context, job *batch.Job, pods []*v1.Pod) (int32, int32, error) {
	errCh := make(chan error, len(pods))
	deleted := int32(len(pods))
	var deletedReady int32
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			if err := jm.podControl.DeletePod(ctx, job.Namespace, pod.Name, job); err != nil && !apierrors.IsNotFound(err) {
				atomic.AddInt32(&deleted, -1)
				errCh <- err
				utilruntime.HandleError(err)
			}
			if controller.IsPodReady(pod) {
				atomic.AddInt32(&deletedReady, 1)
			}
		})
	}
	wg.Wait()
	return deletedReady, deleted, firstError(errCh)
}

// deleteJobPods removes the finalizer of each pod and deletes it (excess
// or suspended pods are not counted as failures).
func (jm *Controller) deleteJobPods(ctx context.Context, job *batch.Job, jobKey string, pods []*v1.Pod) (int32, int32, error) {
	logger := klog.FromContext(ctx)
	errCh := make(chan error, len(pods))
	deleted := int32(len(pods))
	var deletedReady int32
	fail := func(pod *v1.Pod, err error) {
		// The informer will not show this deletion.
		jm.expectations.DeletionObserved(logger, jobKey)
		if !apierrors.IsNotFound(err) {
			logger.V(2).Info("Failed to delete Pod", "job", klog.KObj(job), "pod", klog.KObj(pod), "err", err)
			atomic.AddInt32(&deleted, -1)
			errCh <- err
			utilruntime.HandleError(err)
		}
	}
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			if patch := removeTrackingFinalizerPatch(pod); patch != nil {
				if err := jm.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch); err != nil {
					fail(pod, fmt.Errorf("removing completion finalizer: %w", err))
					return
				}
			}
			if err := jm.podControl.DeletePod(ctx, job.Namespace, pod.Name, job); err != nil {
				fail(pod, err)
			}
			if controller.IsPodReady(pod) {
				atomic.AddInt32(&deletedReady, 1)
			}
		})
	}
	wg.Wait()
	return deletedReady, deleted, firstError(errCh)
}

func firstError(ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	default:
		return nil
	}
}

// activePodsForRemoval picks at least rmAtLeast active pods to delete,
// starting (for Indexed Jobs) with duplicate and out-of-range indexes, then
// in ActivePods order (not ready, unscheduled and pending first).
func activePodsForRemoval(job *batch.Job, pods []*v1.Pod, rmAtLeast int) []*v1.Pod {
	var rm, left []*v1.Pod
	if isIndexedJob(job) {
		rm, left = duplicateIndexPodsForRemoval(slices.Clone(pods), int(*job.Spec.Completions))
	} else {
		left = slices.Clone(pods)
	}
	if len(rm) < rmAtLeast {
		sort.Sort(controller.ActivePods(left))
		rm = append(rm, left[:rmAtLeast-len(rm)]...)
	}
	return rm
}

// manageJob creates or deletes pods so the number running matches what
// the Job wants, respecting the pod-failure backoff. It returns the new
// active count and the sync action for metrics.
func (jm *Controller) manageJob(ctx context.Context, job *batch.Job, jc *syncJobCtx) (int32, string, error) {
	logger := klog.FromContext(ctx)
	active := int32(len(jc.activePods))
	parallelism := *job.Spec.Parallelism
	jobKey, err := controller.KeyFunc(job)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("couldn't get key for job %#v: %v", job, err))
		return 0, actionTracking, nil
	}

	if jobSuspended(job) {
		logger.V(4).Info("Deleting all active pods in suspended job", "job", klog.KObj(job), "active", active)
		rm := activePodsForRemoval(job, jc.activePods, int(active))
		_ = jm.expectations.ExpectDeletions(logger, jobKey, len(rm))
		removedReady, removed, err := jm.deleteJobPods(ctx, job, jobKey, rm)
		active -= removed
		*jc.terminating += removed
		jc.ready -= removedReady
		return active, actionPodsDeleted, err
	}

	var wantActive int32
	if job.Spec.Completions == nil {
		// Work queue: after one success, leave running pods be.
		if jc.succeeded > 0 {
			wantActive = active
		} else {
			wantActive = parallelism
		}
	} else {
		wantActive = max(0, min(*job.Spec.Completions-jc.succeeded, parallelism))
	}

	rm := activePodsForRemoval(job, jc.activePods, int(max(0, active-wantActive)))
	if len(rm) > MaxPodCreateDeletePerSync {
		rm = rm[:MaxPodCreateDeletePerSync]
	}
	if len(rm) > 0 {
		_ = jm.expectations.ExpectDeletions(logger, jobKey, len(rm))
		logger.V(4).Info("Too many pods running for job", "job", klog.KObj(job), "deleted", len(rm), "target", wantActive)
		removedReady, removed, err := jm.deleteJobPods(ctx, job, jobKey, rm)
		active -= removed
		*jc.terminating += removed
		jc.ready -= removedReady
		// Deletions take precedence; creations wait for the next sync.
		return active, actionPodsDeleted, err
	}

	var terminating int32
	if onlyReplaceFailedPods(job) {
		terminating = *jc.terminating
	}
	diff := wantActive - terminating - active
	if diff <= 0 {
		return active, actionTracking, nil
	}
	if !hasBackoffLimitPerIndex(job) {
		if wait := jc.newBackoffRecord.remaining(jm.clock, DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff); wait > 0 {
			jm.enqueueWithDelay(logger, job, wait)
			return active, actionPodsCreated, nil
		}
	}
	diff = min(diff, int32(MaxPodCreateDeletePerSync))

	var indexes []int
	if isIndexedJob(job) {
		indexes = firstPendingIndexes(jc, int(diff), int(*job.Spec.Completions))
		if hasBackoffLimitPerIndex(job) {
			var wait time.Duration
			indexes, wait = jm.indexesReadyForCreation(logger, indexes, jc.delayedDeletion)
			if wait > 0 {
				jm.enqueueWithDelay(logger, job, wait)
				return active, actionPodsCreated, nil
			}
		}
		diff = int32(len(indexes))
	}

	_ = jm.expectations.ExpectCreations(logger, jobKey, int(diff))
	logger.V(4).Info("Too few pods running", "key", jobKey, "need", wantActive, "creating", diff)
	active += diff

	template := job.Spec.Template.DeepCopy()
	if isIndexedJob(job) {
		addCompletionIndexEnv(template)
	}
	if !slices.Contains(template.Finalizers, batch.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batch.JobTrackingFinalizer)
	}

	errCh := make(chan error, diff)
	var created, failed int32
	// Slow start: batches of 1, 2, 4, ... stop after a failing batch, so a
	// Job over quota makes one doomed request (and event) per sync.
	for batchSize := min(diff, int32(controller.SlowStartInitialBatchSize)); diff > 0; batchSize = min(2*batchSize, diff) {
		errsBefore := len(errCh)
		var wg sync.WaitGroup
		for range batchSize {
			ix := noIndex
			if len(indexes) > 0 {
				ix, indexes = indexes[0], indexes[1:]
			}
			wg.Go(func() {
				t, generateName := template, ""
				if ix != noIndex {
					t = indexedPodTemplate(logger, template, job, ix, jc.delayedDeletion[ix])
					generateName = indexedGenerateName(job.Name, ix)
				}
				err := jm.podControl.CreatePodsWithGenerateName(ctx, job.Namespace, t, job, metav1.NewControllerRef(job, controllerKind), generateName)
				jm.uncertainCreates.Record(jobKey, err)
				if err != nil && apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					// Every create fails while the namespace goes away.
					return
				}
				if err != nil {
					defer utilruntime.HandleError(err)
					logger.V(2).Info("Failed creation, decrementing expectations", "job", klog.KObj(job))
					jm.expectations.CreationObserved(logger, jobKey)
					atomic.AddInt32(&active, -1)
					errCh <- err
					atomic.AddInt32(&failed, 1)
				}
				// Upstream counts every attempt here, failed ones included.
				atomic.AddInt32(&created, 1)
			})
		}
		wg.Wait()
		skipped := diff - batchSize
		if len(errCh) > errsBefore && skipped > 0 {
			logger.V(2).Info("Slow-start failure. Skipping creating pods, decrementing expectations", "skippedCount", skipped, "job", klog.KObj(job))
			active -= skipped
			for range skipped {
				jm.expectations.CreationObserved(logger, jobKey)
			}
			break
		}
		diff -= batchSize
	}
	recordPodsCreation(job, jc, created, failed)
	return active, actionPodsCreated, firstError(errCh)
}

// awaitUncertainPods: a pod create of job had no answer, so its pod may
// exist unseen by the cache; wait until the cache has caught up rather
// than create it (or its index) twice.
func (jm *Controller) awaitUncertainPods(ctx context.Context, job *batch.Job, key string, nsName types.NamespacedName) error {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return err
	}
	return jm.uncertainCreates.AwaitUncertainPods(ctx, jm.kubeClient, jm.consistency, key, nsName, job.UID, selector)
}

// indexesReadyForCreation keeps the indexes whose per-index backoff has
// passed; if none has, it returns the shortest remaining wait.
func (jm *Controller) indexesReadyForCreation(logger klog.Logger, indexes []int, delayed map[int]*v1.Pod) ([]int, time.Duration) {
	var ready []int
	var minWait *time.Duration
	for _, ix := range indexes {
		w := remainingBackoffPerIndex(logger, jm.clock, DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff, delayed[ix])
		if w == 0 {
			ready = append(ready, ix)
		} else if minWait == nil || w < *minWait {
			minWait = &w
		}
	}
	if len(ready) > 0 {
		return ready, 0
	}
	return nil, ptr.Deref(minWait, 0)
}

func recordPodsCreation(job *batch.Job, jc *syncJobCtx, succeeded, failed int32) {
	reason := podCreateNew
	if ptr.Deref(job.Spec.PodReplacementPolicy, batch.TerminatingOrFailed) == batch.Failed && jc.failed > 0 {
		reason = podRecreateFailed
	} else if jc.failed > 0 || ptr.Deref(jc.terminating, 0) > 0 {
		reason = podRecreateTerminatingOrFailed
	}
	if succeeded > 0 {
		jobPodsCreationTotal.WithLabelValues(reason, resultSucceeded).Add(float64(succeeded))
	}
	if failed > 0 {
		jobPodsCreationTotal.WithLabelValues(reason, resultFailed).Add(float64(failed))
	}
}

// updateJobStatus writes status and remembers the version for the
// consistency check.
func (jm *Controller) updateJobStatus(ctx context.Context, job *batch.Job) (*batch.Job, error) {
	updated, err := jm.kubeClient.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	jm.consistency.WroteAt(types.NamespacedName{Namespace: updated.Namespace, Name: updated.Name}, updated.UID, jobsResource, updated.ResourceVersion)
	return updated, nil
}
