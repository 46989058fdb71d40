package cronjob

import (
	"fmt"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// jobName is deterministic per scheduled time, so that a Job is never
// created twice for one start time: <cronjob>-<minutes since the epoch>.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFromTemplate builds the Job to create for a scheduled time: the
// template's labels, annotations and spec, the scheduled-timestamp
// annotation (RFC 3339 in the CronJob's time zone) and a controller
// reference to the CronJob.
func jobFromTemplate(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	loc, err := time.LoadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	maps.Copy(labels, cj.Spec.JobTemplate.Labels)
	annotations := make(map[string]string, len(cj.Spec.JobTemplate.Annotations)+1)
	maps.Copy(annotations, cj.Spec.JobTemplate.Annotations)
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:              jobName(cj, scheduled),
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: metav1.Time{Time: scheduled},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}

// finishedCondition returns Complete or Failed when the Job has that
// condition true, and "" otherwise.
func finishedCondition(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func isJobFinished(j *batchv1.Job) bool { return finishedCondition(j) != "" }

func isJobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func inActiveList(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func inActiveListByName(cj *batchv1.CronJob, namespace, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == namespace {
			return true
		}
	}
	return false
}

func deleteFromActiveList(cj *batchv1.CronJob, uid types.UID) {
	active := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			active = append(active, r)
		}
	}
	cj.Status.Active = active
}

// jobStartedBefore orders Jobs by status.startTime, unstarted last, ties
// by name.
func jobStartedBefore(a, b *batchv1.Job) int {
	as, bs := a.Status.StartTime, b.Status.StartTime
	switch {
	case as == nil && bs != nil:
		return 1
	case as != nil && bs == nil:
		return -1
	case as.Equal(bs):
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	case as.Before(bs):
		return -1
	}
	return 1
}
