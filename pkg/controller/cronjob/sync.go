package cronjob

import (
	"context"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// sync reconciles one CronJob. It returns when to look at it again (just
// after its next start time), or nil when only a change to the CronJob or
// its Jobs can make a difference (deleted, suspended, invalid schedule).
func (jm *Controller) sync(ctx context.Context, key string) (*time.Duration, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	cj, err := jm.cronJobLister.CronJobs(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		logger.V(4).Info("CronJob not found, may be it is deleted", "cronjob", klog.KRef(ns, name))
		return nil, nil
	case err != nil:
		return nil, err
	}

	jobs, err := jm.jobsOf(cj)
	if err != nil {
		return nil, err
	}

	// All changes go to one copy, written once at the end.
	cj = cj.DeepCopy()
	updatedByCleanup := jm.cleanupFinishedJobs(ctx, cj, jobs)
	requeueAfter, updatedBySync, syncErr := jm.syncCronJob(ctx, cj, jobs)
	if syncErr != nil {
		logger.V(2).Info("Error reconciling cronjob", "cronjob", klog.KObj(cj), "err", syncErr)
	}

	if updatedByCleanup || updatedBySync {
		if _, err := jm.kubeClient.BatchV1().CronJobs(cj.Namespace).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			logger.V(2).Info("Unable to update status for cronjob", "cronjob", klog.KObj(cj), "resourceVersion", cj.ResourceVersion, "err", err)
			return nil, err
		}
	}

	if requeueAfter != nil {
		logger.V(4).Info("Re-queuing cronjob", "cronjob", klog.KObj(cj), "requeueAfter", requeueAfter)
		return requeueAfter, nil
	}
	return nil, syncErr
}

// jobsOf returns the Jobs the CronJob controls, from the cache.
func (jm *Controller) jobsOf(cj *batchv1.CronJob) ([]*batchv1.Job, error) {
	objs, err := jm.jobIndexer.ByIndex(jobOwnerUIDIndex, string(cj.UID))
	if err != nil {
		return nil, err
	}
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		j, ok := o.(*batchv1.Job)
		if !ok {
			utilruntime.HandleError(fmt.Errorf("unexpected object type in job indexer: %v", o))
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// syncCronJob brings cj's status up to date with its Jobs and starts the
// Job due now, if any. It reports whether the status changed.
func (jm *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, bool, error) {
	logger := klog.FromContext(ctx)
	now := jm.clock.Now()
	updated := false

	children := make(map[types.UID]bool, len(jobs))
	refreshed := false
	for i := 0; i < len(jobs); i++ {
		j := jobs[i]
		children[j.UID] = true
		active := inActiveList(cj, j.UID)
		finished := isJobFinished(j)
		switch {
		case !active && !finished:
			// Our cache of the CronJob may predate the status update that
			// added this Job; ask the apiserver before complaining.
			if !refreshed {
				fresh, err := jm.kubeClient.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
				if err != nil {
					return nil, updated, err
				}
				if inActiveList(fresh, j.UID) {
					// Go on with the fresh copy, as upstream does, so the
					// rest of the sync (missing Jobs, the schedule) and the
					// status write see the current status; the Jobs seen
					// so far are looked at again against it.
					*cj = *fresh
					refreshed, updated, i = true, false, -1
					continue
				}
			}
			jm.recorder.Eventf(cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
		case finished:
			if active {
				deleteFromActiveList(cj, j.UID)
				jm.recorder.Eventf(cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, finishedCondition(j))
				updated = true
			}
			// A succeeded Job counts whether or not it was active.
			if isJobSucceeded(j) && j.Status.CompletionTime != nil {
				if cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time) {
					cj.Status.LastSuccessfulTime = j.Status.CompletionTime
					updated = true
				}
			}
		}
	}

	// Drop active references to Jobs that are gone, checking with the
	// apiserver in case the cache is behind.
	for _, r := range cj.Status.Active {
		if children[r.UID] {
			continue
		}
		_, err := jm.kubeClient.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			jm.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", r.Name)
			deleteFromActiveList(cj, r.UID)
			updated = true
		case err != nil:
			return nil, updated, err
		}
	}

	if cj.DeletionTimestamp != nil {
		return nil, updated, nil
	}

	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			logger.V(4).Info("Not starting job because timeZone is invalid", "cronjob", klog.KObj(cj), "timeZone", *tz, "err", err)
			jm.recorder.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, updated, nil
		}
	}

	if ptr.Deref(cj.Spec.Suspend, false) {
		logger.V(4).Info("Not starting job because the cron is suspended", "cronjob", klog.KObj(cj))
		return nil, updated, nil
	}

	sched, err := parseSchedule(formatSchedule(cj, jm.recorder))
	if err != nil {
		logger.V(2).Info("Unparseable schedule", "cronjob", klog.KObj(cj), "schedule", cj.Spec.Schedule, "err", err)
		jm.recorder.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, updated, nil
	}

	scheduled, err := nextScheduleTime(logger, cj, now, sched, jm.recorder)
	if err != nil {
		logger.V(2).Info("Invalid schedule", "cronjob", klog.KObj(cj), "schedule", cj.Spec.Schedule, "err", err)
		jm.recorder.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, updated, nil
	}
	if scheduled == nil {
		logger.V(4).Info("No unmet start times", "cronjob", klog.KObj(cj))
		return nextScheduleTimeDuration(cj, now, sched), updated, nil
	}

	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		logger.V(4).Info("Missed starting window", "cronjob", klog.KObj(cj))
		jm.recorder.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return nextScheduleTimeDuration(cj, now, sched), updated, nil
	}

	if inActiveListByName(cj, cj.Namespace, jobName(cj, *scheduled)) ||
		cj.Status.LastScheduleTime.Equal(&metav1.Time{Time: *scheduled}) {
		logger.V(4).Info("Not starting job because the scheduled time is already processed", "cronjob", klog.KObj(cj), "schedule", scheduled)
		return nextScheduleTimeDuration(cj, now, sched), updated, nil
	}

	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		logger.V(4).Info("Not starting job because prior execution is still running and concurrency policy is Forbid", "cronjob", klog.KObj(cj))
		jm.recorder.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return nextScheduleTimeDuration(cj, now, sched), updated, nil
	}

	if cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent {
		for _, r := range cj.Status.Active {
			logger.V(4).Info("Deleting job that was still running at next scheduled start time", "job", klog.KRef(r.Namespace, r.Name))
			job, err := jm.kubeClient.BatchV1().Jobs(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
			if err != nil {
				jm.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, updated, err
			}
			if !jm.reapJob(ctx, cj, job) {
				return nil, updated, fmt.Errorf("could not replace job %s/%s", job.Namespace, job.Name)
			}
			updated = true
		}
	}

	want, err := jobFromTemplate(cj, *scheduled)
	if err != nil {
		logger.Error(err, "Unable to make Job from template", "cronjob", klog.KObj(cj))
		return nil, updated, err
	}
	created, err := jm.kubeClient.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	alreadyExisted := false
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, updated, err
	case apierrors.IsAlreadyExists(err):
		// Either we created it and failed to record it in the status, or
		// someone else did and is responsible for it.
		alreadyExisted = true
		existing, err := jm.kubeClient.BatchV1().Jobs(cj.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return nil, updated, err
		}
		if !metav1.IsControlledBy(existing, cj) || inActiveList(cj, existing.UID) {
			return nil, updated, nil
		}
		created = existing
	case err != nil:
		jm.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, updated, err
	}

	if alreadyExisted {
		logger.Info("Job already exists", "cronjob", klog.KObj(cj), "job", klog.KObj(want))
	} else {
		jobCreationSkew.Observe(created.CreationTimestamp.Sub(*scheduled).Seconds())
		logger.V(4).Info("Created Job", "job", klog.KObj(created), "cronjob", klog.KObj(cj))
		jm.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", created.Name)
	}

	// Should we crash here, the deterministic Job name keeps the next sync
	// from creating the Job twice.
	ref, err := reference.GetReference(scheme.Scheme, created)
	if err != nil {
		logger.V(2).Info("Unable to make object reference", "cronjob", klog.KObj(cj), "err", err)
		return nil, updated, fmt.Errorf("unable to make object reference for job for %s", klog.KObj(cj))
	}
	cj.Status.Active = append(cj.Status.Active, *ref)
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return nextScheduleTimeDuration(cj, now, sched), true, nil
}

// cleanupFinishedJobs deletes the oldest finished Jobs beyond
// successfulJobsHistoryLimit and failedJobsHistoryLimit. It reports
// whether the status changed.
func (jm *Controller) cleanupFinishedJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch finishedCondition(j) {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	updated := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && jm.removeOldestJobs(ctx, cj, succeeded, *l) {
		updated = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && jm.removeOldestJobs(ctx, cj, failed, *l) {
		updated = true
	}
	return updated
}

func (jm *Controller) removeOldestJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, keep int32) bool {
	n := len(jobs) - int(keep)
	if n <= 0 {
		return false
	}
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Cleaning up jobs from CronJob list", "deletejobnum", n, "jobnum", len(jobs), "cronjob", klog.KObj(cj))
	jobs = slices.Clone(jobs)
	slices.SortFunc(jobs, jobStartedBefore)
	updated := false
	for _, j := range jobs[:n] {
		logger.V(4).Info("Removing job from CronJob list", "job", j.Name, "cronjob", klog.KObj(cj))
		if jm.reapJob(ctx, cj, j) {
			updated = true
		}
	}
	return updated
}

// reapJob deletes a Job (its pods in the background) and drops it from
// the active list, with an event either way.
func (jm *Controller) reapJob(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) bool {
	err := jm.kubeClient.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name,
		metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil {
		jm.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		klog.FromContext(ctx).Error(err, "Error deleting job from cronjob", "job", klog.KObj(job), "cronjob", klog.KObj(cj))
		return false
	}
	deleteFromActiveList(cj, job.UID)
	jm.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return true
}
