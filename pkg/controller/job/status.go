package job

import (
	"context"
	"fmt"
	"sort"
	"sync"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// trackJobStatusAndRemoveFinalizers counts finished pods exactly once:
//  1. finished pods' UIDs go to status.uncountedTerminatedPods (or, for
//     Indexed Jobs, their index to completedIndexes) and status is written;
//  2. their tracking finalizers are removed;
//  3. UIDs whose finalizer is gone move from the uncounted lists to the
//     succeeded/failed counters;
//  4. the Job is marked Complete/Failed once nothing is left uncounted.
//
// A crash between steps repeats a step, never a count. At most
// MaxUncountedPods pods are handled per sync.
func (jm *Controller) trackJobStatusAndRemoveFinalizers(ctx context.Context, jc *syncJobCtx, needsFlush bool) error {
	logger := klog.FromContext(ctx)
	job := jc.job
	indexed := isIndexedJob(job)
	if indexed {
		// Introduce completed indexes in order.
		sort.Sort(byIndex(jc.pods))
	}
	withFinalizer := make(sets.Set[types.UID], len(jc.pods))
	for _, p := range jc.pods {
		if hasTrackingFinalizer(p) && !jc.expectedRmFinalizers.Has(p.UID) {
			withFinalizer.Insert(p.UID)
		}
	}
	oldCounters := job.Status // shallow: only counters are compared
	if moveUncountedToCounters(&job.Status, withFinalizer) {
		needsFlush = true
	}
	uncounted := job.Status.UncountedTerminatedPods
	byPolicyAction := map[string]int{}
	var toRemove []*v1.Pod
	var newSucceededIndexes []int
	reachedMax := false
	for _, pod := range jc.pods {
		if !hasTrackingFinalizer(pod) || jc.expectedRmFinalizers.Has(pod.UID) {
			continue // handled by an earlier sync
		}
		failed := isPodFailed(pod, job)
		if !canRemoveFinalizer(logger, jc, pod, failed) {
			continue
		}
		toRemove = append(toRemove, pod)
		if pod.Status.Phase == v1.PodSucceeded && !jc.uncountedFailed.Has(pod.UID) {
			if indexed {
				// The index itself prevents double counting.
				if ix, ok := validIndex(job, pod); ok && !jc.prevSucceededIndexes.has(ix) {
					newSucceededIndexes = append(newSucceededIndexes, ix)
					needsFlush = true
				}
			} else if !jc.uncountedSucceeded.Has(pod.UID) {
				needsFlush = true
				uncounted.Succeeded = append(uncounted.Succeeded, pod.UID)
			}
		} else if failed || (jc.finishedCondition != nil && !isSuccessCriteriaMet(jc.finishedCondition)) {
			// A failing Job counts every unfinished pod as failed.
			_, validIx := validIndex(job, pod)
			if !jc.uncountedFailed.Has(pod.UID) && (!indexed || validIx) {
				counted := true
				if job.Spec.PodFailurePolicy != nil {
					var action *batch.PodFailurePolicyAction
					_, counted, action = matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
					if action != nil {
						byPolicyAction[string(*action)]++
					}
				}
				if counted {
					needsFlush = true
					uncounted.Failed = append(uncounted.Failed, pod.UID)
				}
			}
		}
		if len(newSucceededIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= MaxUncountedPods {
			// Keep status small and let other Jobs sync; status and pod
			// updates bring this Job back.
			reachedMax = true
			break
		}
	}
	if indexed {
		jc.succeededIndexes = jc.succeededIndexes.withIndexes(newSucceededIndexes)
		s := jc.succeededIndexes.String()
		if s != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(jc.succeededIndexes.total())
		job.Status.CompletedIndexes = s
		var failedStr *string
		if jc.failedIndexes != nil {
			failedStr = ptr.To(jc.failedIndexes.String())
		}
		if !ptr.Equal(job.Status.FailedIndexes, failedStr) {
			job.Status.FailedIndexes = failedStr
			needsFlush = true
		}
	}
	if jc.finishedCondition != nil && jc.finishedCondition.Type == batch.JobFailureTarget {
		// Persist the interim FailureTarget before finalizers go; Failed
		// follows once every pod is counted.
		job.Status.Conditions = append(job.Status.Conditions, *jc.finishedCondition)
		needsFlush = true
		jc.finishedCondition = failedFromFailureTarget(jc.finishedCondition, jm.clock.Now())
	}
	if isSuccessCriteriaMet(jc.finishedCondition) {
		if successCriteriaMetCondition(job) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *jc.finishedCondition)
			needsFlush = true
		}
		jc.finishedCondition = newCondition(batch.JobComplete, v1.ConditionTrue, jc.finishedCondition.Reason, jc.finishedCondition.Message, jm.clock.Now())
	}
	var err error
	if jc.job, needsFlush, err = jm.flushUncountedAndRemoveFinalizers(ctx, jc, toRemove, withFinalizer, &oldCounters, byPolicyAction, needsFlush); err != nil {
		return err
	}
	finished := !reachedMax && jm.enactJobFinished(logger, jc)
	if finished {
		needsFlush = true
	}
	if needsFlush {
		if _, err := jm.updateStatusHandler(ctx, jc.job); err != nil {
			return fmt.Errorf("removing uncounted pods from status: %w", err)
		}
		if finished {
			jm.recordJobFinished(jc.job, jc.finishedCondition)
			jm.finishedJobExpectations.Store(jc.job.UID, struct{}{})
		}
		recordPodsFinished(logger, jc.job, oldCounters)
	}
	return nil
}

// canRemoveFinalizer: the Job is being deleted or finishing, the pod
// succeeded, or it failed and is not kept for backoffLimitPerIndex
// bookkeeping until its replacement exists.
func canRemoveFinalizer(logger klog.Logger, jc *syncJobCtx, pod *v1.Pod, failed bool) bool {
	if jc.job.DeletionTimestamp != nil || jc.finishedCondition != nil || pod.Status.Phase == v1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if hasBackoffLimitPerIndex(jc.job) {
		if ix := completionIndex(pod); ix != noIndex {
			if p, ok := jc.delayedDeletion[ix]; ok && p.UID == pod.UID {
				logger.V(3).Info("Delaying pod finalizer removal to await for pod recreation within the index", "pod", klog.KObj(pod))
				return false
			}
		}
	}
	return true
}

// flushUncountedAndRemoveFinalizers writes pending status (new uncounted
// UIDs, interim conditions), removes the finalizers, then folds the pods
// whose finalizer is gone into the counters. It returns the Job as last
// written and whether status still has unwritten changes.
func (jm *Controller) flushUncountedAndRemoveFinalizers(ctx context.Context, jc *syncJobCtx, toRemove []*v1.Pod, withFinalizer sets.Set[types.UID], oldCounters *batch.JobStatus, byPolicyAction map[string]int, needsFlush bool) (*batch.Job, bool, error) {
	logger := klog.FromContext(ctx)
	if needsFlush {
		updated, err := jm.updateStatusHandler(ctx, jc.job)
		if err != nil {
			return jc.job, needsFlush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		jc.job = updated
		// Only now are the new failures durable enough to back off on.
		jm.podBackoffStore.update(jc.newBackoffRecord)
		recordPodsFinished(logger, jc.job, *oldCounters)
		*oldCounters = jc.job.Status
		needsFlush = false
	}
	for action, n := range byPolicyAction {
		podFailuresHandledByFailurePolicy.WithLabelValues(action).Add(float64(n))
	}
	jobKey, err := controller.KeyFunc(jc.job)
	if err != nil {
		return jc.job, needsFlush, fmt.Errorf("getting job key: %w", err)
	}
	var rmErr error
	if len(toRemove) > 0 {
		var removed []bool
		removed, rmErr = jm.removeTrackingFinalizers(ctx, jobKey, toRemove)
		for i, p := range toRemove {
			if removed[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if moveUncountedToCounters(&jc.job.Status, withFinalizer) {
		needsFlush = true
	}
	// Some removals failed: save the progress that was made.
	if rmErr != nil && needsFlush {
		if job, err := jm.updateStatusHandler(ctx, jc.job); err != nil {
			return job, needsFlush, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return jc.job, needsFlush, rmErr
}

// moveUncountedToCounters drops from the uncounted lists the UIDs of pods
// that no longer hold the finalizer and adds them to the counters.
func moveUncountedToCounters(status *batch.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := status.UncountedTerminatedPods
	changed := false
	if keep := keepUIDs(u.Succeeded, withFinalizer); len(keep) != len(u.Succeeded) {
		status.Succeeded += int32(len(u.Succeeded) - len(keep))
		u.Succeeded = keep
		changed = true
	}
	if keep := keepUIDs(u.Failed, withFinalizer); len(keep) != len(u.Failed) {
		status.Failed += int32(len(u.Failed) - len(keep))
		u.Failed = keep
		changed = true
	}
	return changed
}

func keepUIDs(uids []types.UID, in sets.Set[types.UID]) []types.UID {
	var out []types.UID
	for _, u := range uids {
		if in.Has(u) {
			out = append(out, u)
		}
	}
	return out
}

// removeTrackingFinalizers patches the finalizer off each pod in
// parallel; removed[i] is true when pod i no longer has it (a pod already
// gone counts as removed).
func (jm *Controller) removeTrackingFinalizers(ctx context.Context, jobKey string, pods []*v1.Pod) ([]bool, error) {
	logger := klog.FromContext(ctx)
	removed := make([]bool, len(pods))
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	jm.finalizerExpectations.expectRemoved(logger, jobKey, uids)
	errCh := make(chan error, len(pods))
	var wg sync.WaitGroup
	for i, pod := range pods {
		wg.Go(func() {
			patch := removeTrackingFinalizerPatch(pod)
			if patch == nil {
				return
			}
			if err := jm.podControl.PatchPod(ctx, pod.Namespace, pod.Name, patch); err != nil {
				// No update will come for a failed patch.
				jm.finalizerExpectations.observed(logger, jobKey, pod.UID)
				if !apierrors.IsNotFound(err) {
					errCh <- err
					utilruntime.HandleError(fmt.Errorf("removing tracking finalizer: %w", err))
					return
				}
			}
			removed[i] = true
		})
	}
	wg.Wait()
	return removed, firstError(errCh)
}

// enactJobFinished sets the final condition (and completionTime) once no
// pod is left uncounted or terminating. Reports whether it did.
func (jm *Controller) enactJobFinished(logger klog.Logger, jc *syncJobCtx) bool {
	if jc.finishedCondition == nil {
		return false
	}
	job := jc.job
	if u := job.Status.UncountedTerminatedPods; u != nil {
		if n := len(u.Succeeded) + len(u.Failed); n > 0 {
			logger.V(4).Info("Delaying marking the Job as finished, because there are still uncounted pod(s)", "job", klog.KObj(job), "condition", jc.finishedCondition.Type, "count", n)
			return false
		}
	}
	if *jc.terminating > 0 {
		logger.V(4).Info("Delaying marking the Job as finished, because there are still terminating pod(s)", "job", klog.KObj(job), "condition", jc.finishedCondition.Type, "count", *jc.terminating)
		return false
	}
	c := jc.finishedCondition
	job.Status.Conditions, _ = ensureJobConditionStatus(job.Status.Conditions, c.Type, c.Status, c.Reason, c.Message, jm.clock.Now())
	if c.Type == batch.JobComplete {
		job.Status.CompletionTime = &c.LastTransitionTime
	}
	return true
}

// recordJobFinished emits the finish event and jobs_finished_total.
func (jm *Controller) recordJobFinished(job *batch.Job, c *batch.JobCondition) {
	mode := completionModeLabel(job)
	if c.Type == batch.JobComplete {
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			jm.recorder.Event(job, v1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		jm.recorder.Event(job, v1.EventTypeNormal, "Completed", "Job completed")
		jobFinishedNum.WithLabelValues(mode, resultSucceeded, c.Reason).Inc()
		return
	}
	jm.recorder.Event(job, v1.EventTypeWarning, c.Reason, c.Message)
	jobFinishedNum.WithLabelValues(mode, resultFailed, c.Reason).Inc()
}

// recordPodsFinished adds the counter increase since old to
// job_pods_finished_total (and job_finished_indexes_total).
func recordPodsFinished(logger klog.Logger, job *batch.Job, old batch.JobStatus) {
	mode := completionModeLabel(job)
	var diff int
	if isIndexedJob(job) {
		// Count by indexes: scaling completions down can drop old indexes.
		completions := int(*job.Spec.Completions)
		if job.Status.CompletedIndexes != old.CompletedIndexes {
			diff = countIndexes(logger, &job.Status.CompletedIndexes, completions) - countIndexes(logger, &old.CompletedIndexes, completions)
		}
		label := "global"
		if hasBackoffLimitPerIndex(job) {
			label = "perIndex"
		}
		jobFinishedIndexesTotal.WithLabelValues(resultSucceeded, label).Add(float64(diff))
		if hasBackoffLimitPerIndex(job) && !ptr.Equal(job.Status.FailedIndexes, old.FailedIndexes) {
			if d := countIndexes(logger, job.Status.FailedIndexes, completions) - countIndexes(logger, old.FailedIndexes, completions); d > 0 {
				jobFinishedIndexesTotal.WithLabelValues(resultFailed, label).Add(float64(d))
			}
		}
	} else {
		diff = int(job.Status.Succeeded) - int(old.Succeeded)
	}
	jobPodsFinished.WithLabelValues(mode, resultSucceeded).Add(float64(diff))
	jobPodsFinished.WithLabelValues(mode, resultFailed).Add(float64(job.Status.Failed - old.Failed))
}
