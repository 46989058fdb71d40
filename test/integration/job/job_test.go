// Package job tests the Job and TTL-after-finished controllers against a
// real apiserver.
package job

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttlafterfinished"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) {
	// Before any controller starts: no test races with this write.
	job.DefaultJobPodFailureBackOff = fastPodFailureBackoff
	framework.Main(m)
}

const timeout = 60 * time.Second

// runControllers runs the Job and TTL-after-finished controllers
// in-process until the test ends.
//
// With KCM_UPSTREAM_CONTROLLERS=1 it runs upstream's kube-controller-manager
// binary instead (see TestUpstreamDiff), to check that a test's
// expectations are upstream's behaviour; upstream's pod-failure backoff is
// then the default 10s.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	if os.Getenv("KCM_UPSTREAM_CONTROLLERS") != "" {
		t.Cleanup(startUpstream(t, framework.Shared(t)))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runControllersCtx(t, ctx, c)
}

func runControllersCtx(t *testing.T, ctx context.Context, c clientset.Interface) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(c, 0)
	jc, err := job.NewController(ctx, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), c,
		job.Features{StaleControllerConsistency: true, MutableSchedulingDirectivesForSuspendedJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	ttl := ttlafterfinished.NewController(ctx, factory.Batch().V1().Jobs(), c)
	factory.Start(ctx.Done())
	go jc.Run(ctx, 5)
	go ttl.Run(ctx, 5)
}

// kubectlJob is what `kubectl create job <name> --image=perl -- perl -e 1` sends.
func kubectlJob(name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			Template: v1.PodTemplateSpec{
				Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever,
					Containers:    []v1.Container{{Name: name, Image: "perl", Command: []string{"perl", "-e", "1"}}},
				},
			},
		},
	}
}

func podsOf(ctx context.Context, c clientset.Interface, j *batchv1.Job) ([]v1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(j.UID)})
	l, err := c.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func hasCondition(j *batchv1.Job, t batchv1.JobConditionType, reason string) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == v1.ConditionTrue && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}

// finishPods marks every active pod of j as its phase says, until the
// Job reports cond; it plays the kubelet for the whole run.
func finishPods(t *testing.T, c clientset.Interface, j *batchv1.Job, succeed bool, cond batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	k := framework.Kubelet{Client: c}
	var last *batchv1.Job
	framework.Eventually(t, timeout, fmt.Sprintf("job %s to be %s", j.Name, cond), func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, j)
		if err != nil {
			return false, err
		}
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
				continue
			}
			if succeed {
				_, err = k.MarkSucceeded(ctx, p)
			} else {
				_, err = k.MarkFailed(ctx, p, 1)
			}
			if err != nil {
				t.Logf("marking %s: %v", p.Name, err)
			}
		}
		last, err = c.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return hasCondition(last, cond, ""), nil
	})
	return last
}

func waitNoFinalizers(t *testing.T, c clientset.Interface, j *batchv1.Job) {
	t.Helper()
	framework.Eventually(t, timeout, "tracking finalizers removed", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, j)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestGoldenKubectlCreateJob(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-golden")
	runControllers(t, c)
	ctx := context.Background()

	j, err := c.BatchV1().Jobs(ns).Create(ctx, kubectlJob("pi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	framework.Eventually(t, timeout, "the pod", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, j)
		if err != nil || len(pods) == 0 {
			return false, err
		}
		pod = pods[0]
		return true, nil
	})
	if pod.GenerateName != "pi-" {
		t.Errorf("generateName = %q, want pi-", pod.GenerateName)
	}
	want := map[string]string{
		batchv1.ControllerUidLabel: string(j.UID),
		batchv1.JobNameLabel:       "pi",
		"controller-uid":           string(j.UID),
		"job-name":                 "pi",
	}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if !slices.Equal(pod.Finalizers, []string{batchv1.JobTrackingFinalizer}) {
		t.Errorf("finalizers = %v", pod.Finalizers)
	}
	ref := metav1.GetControllerOf(&pod)
	if ref == nil || ref.Kind != "Job" || ref.UID != j.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller ref = %+v", ref)
	}

	done := finishPods(t, c, j, true, batchv1.JobComplete)
	if done.Status.Succeeded != 1 || done.Status.CompletionTime == nil || done.Status.StartTime == nil {
		t.Errorf("status = %+v", done.Status)
	}
	waitNoFinalizers(t, c, j)
}

func TestJobCompletes(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-complete")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("work")
	spec.Spec.Completions = ptr.To[int32](3)
	spec.Spec.Parallelism = ptr.To[int32](2)
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Parallelism caps the first wave at two pods.
	framework.Eventually(t, timeout, "two active pods", func(ctx context.Context) (bool, error) {
		got, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		return err == nil && got.Status.Active == 2, err
	})
	if pods, _ := podsOf(ctx, c, j); len(pods) != 2 {
		t.Fatalf("pods = %d, want 2", len(pods))
	}

	done := finishPods(t, c, j, true, batchv1.JobComplete)
	s := done.Status
	if s.Succeeded != 3 || s.Failed != 0 || s.Active != 0 || ptr.Deref(s.Ready, -1) != 0 || ptr.Deref(s.Terminating, -1) != 0 {
		t.Errorf("status = %+v", s)
	}
	if !hasCondition(done, batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached) ||
		!hasCondition(done, batchv1.JobComplete, batchv1.JobReasonCompletionsReached) {
		t.Errorf("conditions = %+v", s.Conditions)
	}
	if s.UncountedTerminatedPods != nil && len(s.UncountedTerminatedPods.Succeeded)+len(s.UncountedTerminatedPods.Failed) != 0 {
		t.Errorf("uncounted = %+v", s.UncountedTerminatedPods)
	}
	if s.CompletionTime == nil {
		t.Error("no completionTime")
	}
	waitNoFinalizers(t, c, j)
	if pods, _ := podsOf(ctx, c, j); len(pods) != 3 {
		t.Errorf("pods = %d, want exactly 3", len(pods))
	}
}

func TestIndexedJob(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-indexed")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("idx")
	spec.Spec.Completions = ptr.To[int32](3)
	spec.Spec.Parallelism = ptr.To[int32](3)
	spec.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	spec.Spec.Template.Spec.Subdomain = "idx-svc"
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []v1.Pod
	framework.Eventually(t, timeout, "three pods", func(ctx context.Context) (bool, error) {
		pods, err = podsOf(ctx, c, j)
		return len(pods) == 3, err
	})
	seen := map[string]bool{}
	for _, p := range pods {
		ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		seen[ix] = true
		if p.Labels[batchv1.JobCompletionIndexAnnotation] != ix {
			t.Errorf("%s: index label %q, annotation %q", p.Name, p.Labels[batchv1.JobCompletionIndexAnnotation], ix)
		}
		if p.GenerateName != "idx-"+ix+"-" || p.Spec.Hostname != "idx-"+ix || p.Spec.Subdomain != "idx-svc" {
			t.Errorf("%s: generateName %q hostname %q subdomain %q", p.Name, p.GenerateName, p.Spec.Hostname, p.Spec.Subdomain)
		}
		env := p.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" {
			t.Errorf("%s: env %+v", p.Name, env)
		}
	}
	for i := 0; i < 3; i++ {
		if !seen[strconv.Itoa(i)] {
			t.Errorf("no pod for index %d", i)
		}
	}
	done := finishPods(t, c, j, true, batchv1.JobComplete)
	if done.Status.CompletedIndexes != "0-2" || done.Status.Succeeded != 3 {
		t.Errorf("completedIndexes=%q succeeded=%d", done.Status.CompletedIndexes, done.Status.Succeeded)
	}
	waitNoFinalizers(t, c, j)
}

func TestBackoffLimitZeroFails(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-fail")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("boom")
	spec.Spec.BackoffLimit = ptr.To[int32](0)
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := finishPods(t, c, j, false, batchv1.JobFailed)
	if !hasCondition(done, batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded) ||
		!hasCondition(done, batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded) {
		t.Errorf("conditions = %+v", done.Status.Conditions)
	}
	if done.Status.Failed != 1 || done.Status.CompletionTime != nil {
		t.Errorf("status = %+v", done.Status)
	}
	waitNoFinalizers(t, c, j)
	if pods, _ := podsOf(ctx, c, j); len(pods) != 1 {
		t.Errorf("pods = %d; backoffLimit 0 must not retry", len(pods))
	}
}

func TestSuspendedJobCreatesNoPods(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-suspend")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("later")
	spec.Spec.Suspend = ptr.To(true)
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "Suspended condition", func(ctx context.Context) (bool, error) {
		got, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		return err == nil && hasCondition(got, batchv1.JobSuspended, "JobSuspended"), err
	})
	if pods, _ := podsOf(ctx, c, j); len(pods) != 0 {
		t.Errorf("suspended job has %d pods", len(pods))
	}
	// Resume: a pod appears and the condition flips to False/JobResumed.
	patch := []byte(`{"spec":{"suspend":false}}`)
	if _, err := c.BatchV1().Jobs(ns).Patch(ctx, j.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "resumed", func(ctx context.Context) (bool, error) {
		got, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == batchv1.JobSuspended && cond.Status == v1.ConditionFalse && cond.Reason == "JobResumed" {
				return got.Status.Active == 1, nil
			}
		}
		return false, nil
	})
}

func TestManagedByOtherControllerIsIgnored(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-managedby")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("ext")
	spec.Spec.ManagedBy = ptr.To("example.com/custom")
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: a Job of ours created after it gets its pod, so the
	// controller has seen the external one's event by then.
	control, err := c.BatchV1().Jobs(ns).Create(ctx, kubectlJob("control"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "control job started with a pod", func(ctx context.Context) (bool, error) {
		got, err := c.BatchV1().Jobs(ns).Get(ctx, control.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, c, got)
		return got.Status.StartTime != nil && len(pods) > 0, err
	})
	got, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pods, _ := podsOf(ctx, c, j); len(pods) != 0 || got.Status.StartTime != nil {
		t.Errorf("external job touched: pods=%d status=%+v", len(pods), got.Status)
	}
}

func TestTTLAfterFinishedDeletesJob(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-ttl")
	runControllers(t, c)
	ctx := context.Background()

	spec := kubectlJob("short")
	spec.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	j, err := c.BatchV1().Jobs(ns).Create(ctx, spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := framework.Kubelet{Client: c}
	// Foreground deletion: without a garbage collector here, the Job stays
	// with a deletionTimestamp and the foregroundDeletion finalizer.
	framework.Eventually(t, timeout, "job deleted by TTL", func(ctx context.Context) (bool, error) {
		pods, err := podsOf(ctx, c, j)
		if err != nil {
			return false, err
		}
		for i := range pods {
			if pods[i].Status.Phase == v1.PodPending {
				_, _ = k.MarkSucceeded(ctx, &pods[i])
			}
		}
		got, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.DeletionTimestamp != nil && slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents), nil
	})
}
