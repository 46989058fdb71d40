// Package cronjob tests the CronJob controller against a real apiserver.
// The controller runs on a clock a little ahead of the wall clock, so a
// "* * * * *" CronJob fires within seconds instead of up to a minute.
package cronjob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/cronjob"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) {
	// The apiserver (started by framework.Main, inheriting the environment)
	// knows one more time zone than this process will: see
	// TestInvalidScheduleAndUnknownTimeZone.
	// A fixed place, rewritten by every run: nothing accumulates.
	dir := filepath.Join(os.TempDir(), "kcm-integration-zoneinfo")
	if err := writeTestZone(dir); err != nil {
		fmt.Fprintln(os.Stderr, "test time zone:", err)
		os.Exit(1)
	}
	_ = os.Setenv("ZONEINFO", dir)
	framework.Main(m)
}

const timeout = 30 * time.Second

// skewedClock is the wall clock plus an adjustable offset.
type skewedClock struct{ offset atomic.Int64 }

func (c *skewedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *skewedClock) set(d time.Duration)             { c.offset.Store(int64(d)) }

// aheadToNextMinute sets the clock so that, a few seconds from now, it
// reaches the minute after the current wall-clock minute, and returns that
// minute: a CronJob created now with "* * * * *" is due then.
func aheadToNextMinute(t *testing.T, c *skewedClock) time.Time {
	t.Helper()
	now := time.Now()
	// Keep away from the minute's end so the CronJob's creation time
	// falls in the same minute.
	if now.Second() >= 50 {
		time.Sleep(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
		now = time.Now()
	}
	next := now.Truncate(time.Minute).Add(time.Minute)
	c.set(next.Sub(now) - 3*time.Second)
	return next
}

// runControllers runs the CronJob controller on clk and, with withJobs,
// the Job controller, until the test ends.
func runControllers(t *testing.T, c clientset.Interface, clk *skewedClock, withJobs bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	cjc, err := cronjob.NewControllerWithClock(ctx, factory.Batch().V1().Jobs(), factory.Batch().V1().CronJobs(), c, clk)
	if err != nil {
		t.Fatal(err)
	}
	var jc *job.Controller
	if withJobs {
		jc, err = job.NewController(ctx, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), c,
			job.Features{StaleControllerConsistency: true, MutableSchedulingDirectivesForSuspendedJobs: true})
		if err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	go cjc.Run(ctx, 5)
	if jc != nil {
		go jc.Run(ctx, 5)
	}
}

func newCronJob(name string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"tier": "batch"},
					Annotations: map[string]string{"owner": "team-a"},
				},
				Spec: batchv1.JobSpec{
					Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
						RestartPolicy:                 v1.RestartPolicyNever,
						TerminationGracePeriodSeconds: ptr.To[int64](0),
						Containers:                    []v1.Container{{Name: "c", Image: "busybox"}},
					}},
				},
			},
		},
	}
}

func jobsIn(ctx context.Context, c clientset.Interface, ns string) ([]batchv1.Job, error) {
	l, err := c.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func hasEvent(ctx context.Context, c clientset.Interface, ns, name, reason string) (bool, error) {
	l, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "CronJob" && e.InvolvedObject.Name == name && e.Reason == reason {
			if e.Source.Component != "cronjob-controller" {
				return false, nil
			}
			return true, nil
		}
	}
	return false, nil
}

// TestCronJobCreatesJob: a "* * * * *" CronJob gets a Job named
// <cronjob>-<scheduled minute>, owned by it and built from its template,
// and its status lists the Job; with Forbid, the next minute starts none
// while the Job runs.
func TestCronJobCreatesJob(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "cronjob-create")
	ctx := context.Background()
	clk := &skewedClock{}
	runControllers(t, c, clk, false)

	due := aheadToNextMinute(t, clk)
	spec := newCronJob("every-minute")
	spec.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	cj, err := c.BatchV1().CronJobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if next := cj.CreationTimestamp.Truncate(time.Minute).Add(time.Minute); !next.Equal(due) {
		t.Fatalf("created at %v, expected before %v", cj.CreationTimestamp, due)
	}

	wantName := "every-minute-" + strconv.FormatInt(due.Unix()/60, 10)
	var got *batchv1.Job
	framework.Eventually(t, timeout, "the scheduled Job", func(ctx context.Context) (bool, error) {
		jobs, err := jobsIn(ctx, c, ns)
		if err != nil || len(jobs) == 0 {
			return false, err
		}
		got = &jobs[0]
		return true, nil
	})
	if got.Name != wantName {
		t.Errorf("job name %q, want %q", got.Name, wantName)
	}
	if a := got.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; a != due.UTC().Format(time.RFC3339) {
		t.Errorf("%s = %q, want %q", batchv1.CronJobScheduledTimestampAnnotation, a, due.UTC().Format(time.RFC3339))
	}
	if got.Labels["tier"] != "batch" || got.Annotations["owner"] != "team-a" {
		t.Errorf("template metadata not copied: labels %v annotations %v", got.Labels, got.Annotations)
	}
	ref := metav1.GetControllerOf(got)
	if ref == nil || ref.Kind != "CronJob" || ref.APIVersion != "batch/v1" || ref.UID != cj.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v", ref)
	}

	framework.Eventually(t, timeout, "status.active and lastScheduleTime", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().CronJobs(ns).Get(ctx, cj.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(cur.Status.Active) == 1 && cur.Status.Active[0].Name == wantName &&
			cur.Status.LastScheduleTime != nil && cur.Status.LastScheduleTime.Time.Equal(due), nil
	})
	framework.Eventually(t, timeout, "a SuccessfulCreate event", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, c, ns, cj.Name, "SuccessfulCreate")
	})

	// One minute later by the controller's clock: Forbid holds the start
	// back while the first Job (no Job controller here) stays active.
	clk.set(time.Duration(clk.offset.Load()) + time.Minute)
	poke(t, c, ns, cj.Name)
	framework.Eventually(t, timeout, "a JobAlreadyActive event", func(ctx context.Context) (bool, error) {
		return hasEvent(ctx, c, ns, cj.Name, "JobAlreadyActive")
	})
	if jobs, err := jobsIn(ctx, c, ns); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs after a forbidden start: %d (%v)", len(jobs), err)
	}
}

// poke changes a CronJob's labels, which makes the controller sync it now.
func poke(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	framework.Eventually(t, timeout, "labelling the CronJob", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		cur.Labels["poked"] = strconv.FormatInt(time.Now().UnixNano(), 10)
		_, err = c.BatchV1().CronJobs(ns).Update(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// TestCronJobRecordsSuccessAndCleansUp runs the Job controller too: when
// the Job's pod succeeds the CronJob records lastSuccessfulTime, drops the
// Job from status.active and, with successfulJobsHistoryLimit 0, deletes it.
func TestCronJobRecordsSuccessAndCleansUp(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "cronjob-cleanup")
	ctx := context.Background()
	clk := &skewedClock{}
	runControllers(t, c, clk, true)

	aheadToNextMinute(t, clk)
	spec := newCronJob("cleaned")
	spec.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	cj, err := c.BatchV1().CronJobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var jobName string
	framework.Eventually(t, timeout, "the Job's pod", func(ctx context.Context) (bool, error) {
		jobs, err := jobsIn(ctx, c, ns)
		if err != nil || len(jobs) == 0 {
			return false, err
		}
		jobName = jobs[0].Name
		sel := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(jobs[0].UID)})
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		kubelet := framework.Kubelet{Client: c}
		if _, err := kubelet.MarkSucceeded(ctx, &pods.Items[0]); err != nil {
			return false, nil // retry on conflicts
		}
		return true, nil
	})

	framework.Eventually(t, timeout, "lastSuccessfulTime, no active Job, the Job deleted", func(ctx context.Context) (bool, error) {
		cur, err := c.BatchV1().CronJobs(ns).Get(ctx, cj.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.Status.LastSuccessfulTime == nil || len(cur.Status.Active) != 0 {
			return false, nil
		}
		_, err = c.BatchV1().Jobs(ns).Get(ctx, jobName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, reason := range []string{"SuccessfulCreate", "SuccessfulDelete"} {
		framework.Eventually(t, timeout, "a "+reason+" event", func(ctx context.Context) (bool, error) {
			return hasEvent(ctx, c, ns, cj.Name, reason)
		})
	}
}
