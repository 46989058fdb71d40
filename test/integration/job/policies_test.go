package job

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// TestBackoffLimitPerIndex: with backoffLimitPerIndex 1 an index is retried
// once (the replacement carries the failure count), FailIndex rules fail an
// index at once, status.failedIndexes keeps upstream's interval form
// ("0-2,4"), and once every index is finished with some failed the Job
// fails with FailureTarget then Failed, reason FailedIndexes.
func TestBackoffLimitPerIndex(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-perindex")
	runControllers(t, c)

	spec := indexedJob("per-index", 5)
	spec.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
	spec.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action:      batchv1.PodFailurePolicyActionFailIndex,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
		},
		{
			Action:          batchv1.PodFailurePolicyActionFailIndex,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}},
		},
	}}
	h := watchConditions(t, c, ns, spec.Name)
	j := createJob(t, c, ns, spec)
	waitCounts(t, c, j, counts{active: 5, terminating: ptr.To[int32](0), completedIndexes: ptr.To(""), failedIndexes: ptr.To("")})

	// Index 0 fails once: retried, the replacement inherits the count.
	first := activePodForIndex(t, c, j, 0)
	failPod(t, c, first, 1)
	waitCounts(t, c, j, counts{active: 5, failed: 1, failedIndexes: ptr.To("")})
	replacement := activePodForIndex(t, c, j, 0)
	if replacement.UID == first.UID {
		t.Fatalf("index 0 not replaced")
	}
	if got := replacement.Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "1" {
		t.Errorf("replacement %s annotation %s = %q, want 1", replacement.Name, batchv1.JobIndexFailureCountAnnotation, got)
	}
	// Index 0 fails again: past its limit, it is not retried.
	failPod(t, c, replacement, 1)
	waitCounts(t, c, j, counts{active: 4, failed: 2, failedIndexes: ptr.To("0")})

	// FailIndex on an exit code and on a pod condition.
	failPod(t, c, activePodForIndex(t, c, j, 1), 42)
	waitCounts(t, c, j, counts{active: 3, failed: 3, failedIndexes: ptr.To("0,1")})
	failPodWithCondition(t, c, activePodForIndex(t, c, j, 2), v1.DisruptionTarget)
	waitCounts(t, c, j, counts{active: 2, failed: 4, failedIndexes: ptr.To("0-2")})

	succeedPod(t, c, activePodForIndex(t, c, j, 3))
	waitCounts(t, c, j, counts{active: 1, succeeded: 1, failed: 4, completedIndexes: ptr.To("3"), failedIndexes: ptr.To("0-2")})
	if got := waitJob(t, c, j, "still running", func(*batchv1.Job) bool { return true }); isFinished(got) {
		t.Fatalf("job finished with index 4 still running: %s", statusString(got.Status))
	}

	failPod(t, c, activePodForIndex(t, c, j, 4), 42)
	done := waitJob(t, c, j, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	want := counts{succeeded: 1, failed: 5, terminating: ptr.To[int32](0), completedIndexes: ptr.To("3"), failedIndexes: ptr.To("0-2,4")}
	if !want.match(done.Status) {
		t.Errorf("final status %s, want %s", statusString(done.Status), want)
	}
	wantCondition(t, done, batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes")
	wantCondition(t, done, batchv1.JobFailed, batchv1.JobReasonFailedIndexes, "Job has failed indexes")
	if done.Status.CompletionTime != nil {
		t.Errorf("a failed Job has completionTime %v", done.Status.CompletionTime)
	}
	wantInterimConditionFirst(t, h, done, batchv1.JobFailureTarget, batchv1.JobFailed)
	waitEvent(t, c, j, v1.EventTypeWarning, batchv1.JobReasonFailedIndexes, "Job has failed indexes")
	noTrackingFinalizers(t, c, j)
}

func isFinished(j *batchv1.Job) bool {
	return hasCondition(j, batchv1.JobComplete, "") || hasCondition(j, batchv1.JobFailed, "")
}

// TestMaxFailedIndexes: one failed index more than maxFailedIndexes fails
// the Job at once with MaxFailedIndexesExceeded; the still running pods are
// deleted and counted as failed.
func TestMaxFailedIndexes(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-maxfailed")
	runControllers(t, c)

	spec := indexedJob("max-failed", 4)
	spec.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
	spec.Spec.MaxFailedIndexes = ptr.To[int32](1)
	h := watchConditions(t, c, ns, spec.Name)
	j := createJob(t, c, ns, spec)
	waitCounts(t, c, j, counts{active: 4, failedIndexes: ptr.To("")})

	failPod(t, c, activePodForIndex(t, c, j, 0), 1)
	waitCounts(t, c, j, counts{active: 3, failed: 1, failedIndexes: ptr.To("0")})
	failPod(t, c, activePodForIndex(t, c, j, 2), 1)

	done := waitJob(t, c, j, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	want := counts{failed: 4, terminating: ptr.To[int32](0), completedIndexes: ptr.To(""), failedIndexes: ptr.To("0,2")}
	if !want.match(done.Status) {
		t.Errorf("final status %s, want %s", statusString(done.Status), want)
	}
	const msg = "Job has exceeded the specified maximal number of failed indexes"
	wantCondition(t, done, batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, msg)
	wantCondition(t, done, batchv1.JobFailed, batchv1.JobReasonMaxFailedIndexesExceeded, msg)
	wantInterimConditionFirst(t, h, done, batchv1.JobFailureTarget, batchv1.JobFailed)
	waitEvent(t, c, j, v1.EventTypeWarning, batchv1.JobReasonMaxFailedIndexesExceeded, msg)
	noTrackingFinalizers(t, c, j)
	if pods, err := activePodsOf(context.Background(), c, j); err != nil || len(pods) != 0 {
		t.Errorf("active pods left: %d (%v)", len(pods), err)
	}
}

// failurePolicyJob has backoffLimit 0, so that any failure counted against
// it fails the Job, and one rule per action.
func failurePolicyJob(name string) *batchv1.Job {
	j := kubectlJob(name)
	j.Spec.BackoffLimit = ptr.To[int32](0)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue}},
		},
		{
			Action:      batchv1.PodFailurePolicyActionCount,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{10}},
		},
		{
			Action:      batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{5, 6, 7}},
		},
		{
			Action:          batchv1.PodFailurePolicyActionFailJob,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: "ConfigIssue", Status: v1.ConditionTrue}},
		},
	}}
	return j
}

// TestPodFailurePolicyActions fails the single pod of a Job with
// backoffLimit 0 in ways matching each rule: FailJob (exit code, pod
// condition) fails the Job with reason PodFailurePolicy and upstream's
// message, FailureTarget first; Ignore does not count the failure, so the
// pod is replaced and the Job can still complete; Count counts it, so the
// backoff limit is exceeded.
func TestPodFailurePolicyActions(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-pfp")
	runControllers(t, c)

	failJobCases := []struct {
		name string
		fail func(t *testing.T, pod *v1.Pod)
		msg  func(pod *v1.Pod) string
	}{
		{
			name: "failjob-exit-code",
			fail: func(t *testing.T, pod *v1.Pod) { failPod(t, c, pod, 6) },
			msg: func(pod *v1.Pod) string {
				return fmt.Sprintf("Container failjob-exit-code for pod %s/%s failed with exit code 6 matching FailJob rule at index 2", ns, pod.Name)
			},
		},
		{
			name: "failjob-condition",
			fail: func(t *testing.T, pod *v1.Pod) { failPodWithCondition(t, c, pod, "ConfigIssue") },
			msg: func(pod *v1.Pod) string {
				return fmt.Sprintf("Pod %s/%s has condition ConfigIssue matching FailJob rule at index 3", ns, pod.Name)
			},
		},
	}
	for _, tc := range failJobCases {
		t.Run(tc.name, func(t *testing.T) {
			h := watchConditions(t, c, ns, tc.name)
			j := createJob(t, c, ns, failurePolicyJob(tc.name))
			waitCounts(t, c, j, counts{active: 1})
			pods, err := activePodsOf(context.Background(), c, j)
			if err != nil || len(pods) != 1 {
				t.Fatalf("pods: %d, %v", len(pods), err)
			}
			tc.fail(t, &pods[0])
			done := waitJob(t, c, j, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
			msg := tc.msg(&pods[0])
			if !(counts{failed: 1, terminating: ptr.To[int32](0)}).match(done.Status) {
				t.Errorf("final status %s, want failed=1", statusString(done.Status))
			}
			wantCondition(t, done, batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, msg)
			wantCondition(t, done, batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, msg)
			wantInterimConditionFirst(t, h, done, batchv1.JobFailureTarget, batchv1.JobFailed)
			waitEvent(t, c, j, v1.EventTypeWarning, batchv1.JobReasonPodFailurePolicy, msg)
			noTrackingFinalizers(t, c, j)
			if all, _ := podsOf(context.Background(), c, j); len(all) != 1 {
				t.Errorf("pods = %d; a FailJob failure must not be retried", len(all))
			}
		})
	}

	t.Run("ignore", func(t *testing.T) {
		j := createJob(t, c, ns, failurePolicyJob("ignore"))
		waitCounts(t, c, j, counts{active: 1})
		failPodWithCondition(t, c, onlyActivePod(t, c, j), v1.DisruptionTarget)
		// Not counted: failed stays 0 and, despite backoffLimit 0, a
		// replacement runs.
		poll(t, "a replacement pod", func(ctx context.Context) (bool, string, error) {
			all, err := podsOf(ctx, c, j)
			if err != nil {
				return false, "", err
			}
			act, _ := activePodsOf(ctx, c, j)
			return len(all) == 2 && len(act) == 1, fmt.Sprintf("%d pods, %d active", len(all), len(act)), nil
		})
		waitCounts(t, c, j, counts{active: 1, failed: 0})
		succeedPod(t, c, onlyActivePod(t, c, j))
		done := waitJob(t, c, j, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
		if !(counts{succeeded: 1, failed: 0}).match(done.Status) {
			t.Errorf("final status %s, want succeeded=1 failed=0", statusString(done.Status))
		}
		if jobCondition(done, batchv1.JobFailureTarget) != nil {
			t.Errorf("an ignored failure set FailureTarget: %s", statusString(done.Status))
		}
		noTrackingFinalizers(t, c, j)
	})

	t.Run("count", func(t *testing.T) {
		j := createJob(t, c, ns, failurePolicyJob("count"))
		waitCounts(t, c, j, counts{active: 1})
		failPod(t, c, onlyActivePod(t, c, j), 10)
		done := waitJob(t, c, j, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
		if !(counts{failed: 1}).match(done.Status) {
			t.Errorf("final status %s, want failed=1", statusString(done.Status))
		}
		wantCondition(t, done, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		noTrackingFinalizers(t, c, j)
	})
}

// onlyActivePod waits for the Job to have exactly one active pod.
func onlyActivePod(t *testing.T, c clientset.Interface, j *batchv1.Job) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	poll(t, "the active pod of "+j.Name, func(ctx context.Context) (bool, string, error) {
		pods, err := activePodsOf(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d active pods", len(pods)), nil
		}
		pod = &pods[0]
		return true, "", nil
	})
	return pod
}

// TestSuccessPolicy: once a rule holds (succeededIndexes, succeededCount,
// or both), the Job gets SuccessCriteriaMet and then Complete with reason
// SuccessPolicy and message "Matched rules at index N"; the pods of the
// other indexes are terminated and not counted as failed.
func TestSuccessPolicy(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-success")
	runControllers(t, c)

	for _, tc := range []struct {
		name      string
		rules     []batchv1.SuccessPolicyRule
		succeed   []int
		completed string
		msg       string
	}{
		{
			name:      "indexes",
			rules:     []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("1,3")}},
			succeed:   []int{3, 1},
			completed: "1,3",
			msg:       "Matched rules at index 0",
		},
		{
			name:      "count",
			rules:     []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-1")}, {SucceededCount: ptr.To[int32](2)}},
			succeed:   []int{4, 2},
			completed: "2,4",
			msg:       "Matched rules at index 1",
		},
		{
			name:      "indexes-and-count",
			rules:     []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("2-4"), SucceededCount: ptr.To[int32](2)}},
			succeed:   []int{0, 2, 3},
			completed: "0,2,3",
			msg:       "Matched rules at index 0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := watchConditions(t, c, ns, "sp-"+tc.name)
			j := createJob(t, c, ns, func() *batchv1.Job {
				j := indexedJob("sp-"+tc.name, 5)
				j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: tc.rules}
				return j
			}())
			waitCounts(t, c, j, counts{active: 5})
			for i, ix := range tc.succeed {
				succeedPod(t, c, activePodForIndex(t, c, j, ix))
				if i < len(tc.succeed)-1 {
					waitCounts(t, c, j, counts{active: 5 - int32(i) - 1, succeeded: int32(i) + 1})
					if got := waitJob(t, c, j, "running", func(*batchv1.Job) bool { return true }); jobCondition(got, batchv1.JobSuccessCriteriaMet) != nil {
						t.Fatalf("success criteria met too early: %s", statusString(got.Status))
					}
				}
			}
			done := waitJob(t, c, j, "Complete", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobComplete, "") })
			want := counts{succeeded: int32(len(tc.succeed)), terminating: ptr.To[int32](0), completedIndexes: ptr.To(tc.completed)}
			if !want.match(done.Status) {
				t.Errorf("final status %s, want %s", statusString(done.Status), want)
			}
			wantCondition(t, done, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, tc.msg)
			wantCondition(t, done, batchv1.JobComplete, batchv1.JobReasonSuccessPolicy, tc.msg)
			if done.Status.CompletionTime == nil {
				t.Error("no completionTime")
			}
			wantInterimConditionFirst(t, h, done, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)
			waitEvent(t, c, j, v1.EventTypeNormal, "Completed", "Job completed")
			noTrackingFinalizers(t, c, j)
			// The pods of the other indexes were deleted.
			poll(t, "only the succeeded pods left", func(ctx context.Context) (bool, string, error) {
				pods, err := podsOf(ctx, c, j)
				if err != nil {
					return false, "", err
				}
				var left []string
				for _, p := range pods {
					if p.Status.Phase != v1.PodSucceeded && p.DeletionTimestamp == nil {
						left = append(left, p.Name)
					}
				}
				return len(left) == 0, fmt.Sprint(left), nil
			})
		})
	}
}

// TestActiveDeadlineSeconds: a Job running longer than
// activeDeadlineSeconds fails with DeadlineExceeded; its running pods are
// deleted and counted as failed.
func TestActiveDeadlineSeconds(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-deadline")
	runControllers(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	framework.Kubelet{Client: c}.Run(ctx, ns)

	spec := kubectlJob("late")
	spec.Spec.Parallelism = ptr.To[int32](2)
	spec.Spec.Completions = ptr.To[int32](4)
	spec.Spec.ActiveDeadlineSeconds = ptr.To[int64](2)
	h := watchConditions(t, c, ns, spec.Name)
	j := createJob(t, c, ns, spec)
	// Both pods start at the first sync, long before the deadline; they
	// are still running (or pending) when it passes.
	done := waitJob(t, c, j, "Failed", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobFailed, "") })
	const msg = "Job was active longer than specified deadline"
	wantCondition(t, done, batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, msg)
	wantCondition(t, done, batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, msg)
	wantInterimConditionFirst(t, h, done, batchv1.JobFailureTarget, batchv1.JobFailed)
	if !(counts{failed: 2, terminating: ptr.To[int32](0)}).match(done.Status) || ptr.Deref(done.Status.Ready, -1) != 0 {
		t.Errorf("final status %s, want the two running pods failed", statusString(done.Status))
	}
	if done.Status.StartTime == nil {
		t.Fatal("no startTime")
	}
	if failedAt := jobCondition(done, batchv1.JobFailed).LastTransitionTime; failedAt.Sub(done.Status.StartTime.Time) < 2*time.Second {
		t.Errorf("failed at %v, less than 2s after startTime %v", failedAt, done.Status.StartTime)
	}
	waitEvent(t, c, j, v1.EventTypeWarning, batchv1.JobReasonDeadlineExceeded, msg)
	noTrackingFinalizers(t, c, j)
	poll(t, "the running pods deleted", func(ctx context.Context) (bool, string, error) {
		pods, err := activePodsOf(ctx, c, j)
		return err == nil && len(pods) == 0, fmt.Sprintf("%d active", len(pods)), err
	})
}

// TestSuspendResumeMidRun suspends a running Job: its pods are deleted (not
// counted as failed), Suspended=True (JobSuspended) and startTime cleared;
// resuming sets Suspended=False (JobResumed), a new startTime and new pods,
// and the Job completes with exact counts.
func TestSuspendResumeMidRun(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-suspend-mid")
	runControllers(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	framework.Kubelet{Client: c}.Run(ctx, ns)

	spec := kubectlJob("pausable")
	spec.Spec.Parallelism = ptr.To[int32](2)
	spec.Spec.Completions = ptr.To[int32](4)
	j := createJob(t, c, ns, spec)
	running := waitJob(t, c, j, "two ready pods", func(j *batchv1.Job) bool { return j.Status.Active == 2 && ptr.Deref(j.Status.Ready, 0) == 2 })
	firstStart := running.Status.StartTime
	if firstStart == nil {
		t.Fatal("no startTime")
	}
	pods, err := activePodsOf(ctx, c, j)
	if err != nil || len(pods) != 2 {
		t.Fatalf("pods %d, %v", len(pods), err)
	}
	succeedPod(t, c, &pods[0])
	waitCounts(t, c, j, counts{active: 2, succeeded: 1})
	old, _ := activePodsOf(ctx, c, j)

	// The start time has a one-second resolution: make the resumed one later.
	time.Sleep(time.Second)
	patchSuspend(t, c, j, true)
	suspended := waitJob(t, c, j, "Suspended", func(j *batchv1.Job) bool {
		return hasCondition(j, batchv1.JobSuspended, "JobSuspended") && j.Status.Active == 0
	})
	wantCondition(t, suspended, batchv1.JobSuspended, "JobSuspended", "Job suspended")
	if !(counts{succeeded: 1, failed: 0}).match(suspended.Status) || ptr.Deref(suspended.Status.Ready, -1) != 0 {
		t.Errorf("suspended status %s, want succeeded=1, nothing failed or ready", statusString(suspended.Status))
	}
	if suspended.Status.StartTime != nil {
		t.Errorf("suspended Job keeps startTime %v", suspended.Status.StartTime)
	}
	waitEvent(t, c, j, v1.EventTypeNormal, "Suspended", "Job suspended")
	poll(t, "the running pods deleted", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, p := range old {
			cur, err := c.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && cur.DeletionTimestamp == nil {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprint(left), nil
	})
	consistently(t, 2*time.Second, "no pods start while suspended", func(ctx context.Context) (bool, string, error) {
		act, err := activePodsOf(ctx, c, j)
		return len(act) == 0, fmt.Sprintf("%d active", len(act)), err
	})

	patchSuspend(t, c, j, false)
	resumed := waitJob(t, c, j, "resumed with two pods", func(j *batchv1.Job) bool {
		cond := jobCondition(j, batchv1.JobSuspended)
		return cond != nil && cond.Status == v1.ConditionFalse && j.Status.Active == 2
	})
	if cond := jobCondition(resumed, batchv1.JobSuspended); cond.Reason != "JobResumed" || cond.Message != "Job resumed" {
		t.Errorf("Suspended condition after resume: %+v", cond)
	}
	if resumed.Status.StartTime == nil || !resumed.Status.StartTime.After(firstStart.Time) {
		t.Errorf("startTime after resume %v, want later than %v", resumed.Status.StartTime, firstStart)
	}
	waitEvent(t, c, j, v1.EventTypeNormal, "Resumed", "Job resumed")

	done := finishPods(t, c, j, true, batchv1.JobComplete)
	if !(counts{succeeded: 4, failed: 0}).match(done.Status) {
		t.Errorf("final status %s, want succeeded=4 failed=0", statusString(done.Status))
	}
	noTrackingFinalizers(t, c, j)
}

func patchSuspend(t *testing.T, c clientset.Interface, j *batchv1.Job, suspend bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	if _, err := c.BatchV1().Jobs(j.Namespace).Patch(context.Background(), j.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPodReplacementPolicy deletes a running pod that then stays
// terminating: with TerminatingOrFailed it is counted as failed and
// replaced at once; with Failed it is neither counted nor replaced until
// it reaches phase Failed. status.terminating counts it meanwhile.
func TestPodReplacementPolicy(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-replacement")
	releaseBlockedPods(t, c, ns)
	runControllers(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	framework.Kubelet{Client: c}.Run(ctx, ns)

	for _, policy := range []batchv1.PodReplacementPolicy{batchv1.TerminatingOrFailed, batchv1.Failed} {
		t.Run(string(policy), func(t *testing.T) {
			spec := kubectlJob("repl-" + map[batchv1.PodReplacementPolicy]string{batchv1.Failed: "failed", batchv1.TerminatingOrFailed: "terminating"}[policy])
			spec.Spec.Parallelism = ptr.To[int32](2)
			spec.Spec.Completions = ptr.To[int32](2)
			spec.Spec.PodReplacementPolicy = ptr.To(policy)
			spec.Spec.Template.Finalizers = []string{blockDeletionFinalizer}
			j := createJob(t, c, ns, spec)
			waitJob(t, c, j, "two ready pods", func(j *batchv1.Job) bool { return j.Status.Active == 2 && ptr.Deref(j.Status.Ready, 0) == 2 })
			pods, err := activePodsOf(ctx, c, j)
			if err != nil || len(pods) != 2 {
				t.Fatalf("pods %d, %v", len(pods), err)
			}
			victim := pods[0]
			if err := c.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}

			if policy == batchv1.TerminatingOrFailed {
				waitCounts(t, c, j, counts{active: 2, failed: 1, terminating: ptr.To[int32](1)})
			} else {
				waitCounts(t, c, j, counts{active: 1, failed: 0, terminating: ptr.To[int32](1)})
				consistently(t, 3*time.Second, "no replacement while the pod terminates", func(ctx context.Context) (bool, string, error) {
					all, err := podsOf(ctx, c, j)
					if err != nil {
						return false, "", err
					}
					cur, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
					if err != nil {
						return false, "", err
					}
					return len(all) == 2 && cur.Status.Failed == 0, fmt.Sprintf("%d pods, %s", len(all), statusString(cur.Status)), nil
				})
				// The kubelet reports the terminating pod Failed: now it
				// counts and is replaced.
				failPod(t, c, &victim, 137)
				waitCounts(t, c, j, counts{active: 2, failed: 1, terminating: ptr.To[int32](0)})
			}
			all, err := podsOf(ctx, c, j)
			if err != nil || len(all) != 3 {
				t.Errorf("pods %d, want 3 (two running, one replaced): %v", len(all), err)
			}

			// Let the old pod go, finish the Job.
			patch := []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + blockDeletionFinalizer + `"]}}`)
			if _, err := c.CoreV1().Pods(ns).Patch(ctx, victim.Name, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			done := finishPods(t, c, j, true, batchv1.JobComplete)
			if !(counts{succeeded: 2, failed: 1, terminating: ptr.To[int32](0)}).match(done.Status) {
				t.Errorf("final status %s, want succeeded=2 failed=1", statusString(done.Status))
			}
			noTrackingFinalizers(t, c, j)
			if slices.ContainsFunc(done.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == batchv1.JobFailureTarget }) {
				t.Errorf("conditions %s", statusString(done.Status))
			}
		})
	}
}
