package job

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// metricsSubsystem prefixes every metric: job_controller_*.
const metricsSubsystem = "job_controller"

// Values of the "action" label of the sync metrics.
const (
	actionReconciling = "reconciling"
	actionTracking    = "tracking"
	actionPodsCreated = "pods_created"
	actionPodsDeleted = "pods_deleted"
)

// Values of the "result"/"status" and "event" labels.
const (
	resultSucceeded = "succeeded"
	resultFailed    = "failed"
	eventAdd        = "add"
	eventDelete     = "delete"
)

// Values of the "reason" label of job_pods_creation_total.
const (
	podCreateNew                   = "new"
	podRecreateTerminatingOrFailed = "recreate_terminating_or_failed"
	podRecreateFailed              = "recreate_failed"
)

var (
	jobSyncDurationSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "job_sync_duration_seconds",
		Help:           "The time it took to sync a job",
		StabilityLevel: metrics.STABLE,
		Buckets:        metrics.ExponentialBuckets(0.004, 2, 15),
	}, []string{"completion_mode", "result", "action"})

	jobSyncNum = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "job_syncs_total",
		Help:           "The number of job syncs",
		StabilityLevel: metrics.STABLE,
	}, []string{"completion_mode", "result", "action"})

	jobFinishedNum = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "jobs_finished_total",
		Help:           "The number of finished jobs",
		StabilityLevel: metrics.STABLE,
	}, []string{"completion_mode", "result", "reason"})

	jobByExternalControllerTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "jobs_by_external_controller_total",
		Help:           "The number of Jobs managed by an external controller",
		StabilityLevel: metrics.ALPHA,
	}, []string{"controller_name"})

	jobPodsFinished = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "job_pods_finished_total",
		Help:           "The number of finished Pods that are fully tracked",
		StabilityLevel: metrics.STABLE,
	}, []string{"completion_mode", "result"})

	podFailuresHandledByFailurePolicy = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "pod_failures_handled_by_failure_policy_total",
		Help: `The number of failed Pods handled by failure policy with
			respect to the failure policy action applied based on the matched
			rule. Possible values of the action label correspond to the
			possible values for the failure policy rule action, which are:
			"FailJob", "Ignore" and "Count".`,
		StabilityLevel: metrics.BETA,
	}, []string{"action"})

	terminatedPodsTrackingFinalizerTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "terminated_pods_tracking_finalizer_total",
		Help: `The number of terminated pods (phase=Failed|Succeeded)
that have the finalizer batch.kubernetes.io/job-tracking
The event label can be "add" or "delete".`,
		StabilityLevel: metrics.BETA,
	}, []string{"event"})

	jobFinishedIndexesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "job_finished_indexes_total",
		Help: `The number of finished indexes. Possible values for the
			status label are: "succeeded", "failed". Possible values for the
			backoffLimit label are: "perIndex" and "global"`,
	}, []string{"status", "backoffLimit"})

	jobPodsCreationTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "job_pods_creation_total",
		Help: `The number of Pods created by the Job controller labelled with a reason for the Pod creation.
This metric also distinguishes between Pods created using different PodReplacementPolicy settings.
Possible values of the "reason" label are:
"new", "recreate_terminating_or_failed", "recreate_failed".
Possible values of the "status" label are:
"succeeded", "failed".`,
	}, []string{"reason", "status"})

	staleSyncSkips = controller.NewStaleSyncSkipsMetric(metricsSubsystem, "Job")

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(jobSyncDurationSeconds, jobSyncNum, jobFinishedNum, jobPodsFinished,
			podFailuresHandledByFailurePolicy, terminatedPodsTrackingFinalizerTotal, jobFinishedIndexesTotal,
			jobPodsCreationTotal, jobByExternalControllerTotal, staleSyncSkips)
	})
}
