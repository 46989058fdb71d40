package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// fastPodFailureBackoff replaces the Job controller's 10s pod-failure
// backoff for this package (set in TestMain), as upstream's integration
// tests do, so that retries take milliseconds.
const fastPodFailureBackoff = 100 * time.Millisecond

// blockDeletionFinalizer keeps a deleted pod around, terminating, the way a
// kubelet still running its containers would.
const blockDeletionFinalizer = "kcm.test/block-deletion"

// poll waits until cond holds; on timeout it fails the test with the last
// detail cond reported, which says what was seen instead.
func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var last, lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, detail, err := cond(ctx)
		if err != nil {
			lastErr = err.Error()
			return false, nil
		}
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; last seen: %s (last error: %s)", timeout, what, last, lastErr)
	}
}

// consistently fails the test if cond stops holding within d.
func consistently(t *testing.T, d time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ok, detail, err := cond(context.Background())
		if err != nil {
			t.Fatalf("checking that %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected that %s; saw: %s", what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createJob(t *testing.T, c clientset.Interface, ns string, spec *batchv1.Job) *batchv1.Job {
	t.Helper()
	j, err := c.BatchV1().Jobs(ns).Create(context.Background(), spec, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating job %s: %v", spec.Name, err)
	}
	return j
}

// indexedJob is an Indexed Job whose completions and parallelism are n.
func indexedJob(name string, n int32) *batchv1.Job {
	j := kubectlJob(name)
	j.Spec.Completions = ptr.To(n)
	j.Spec.Parallelism = ptr.To(n)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	return j
}

// counts is the part of a Job's status the tests compare; nil pointers and
// negative numbers are not compared.
type counts struct {
	active, succeeded, failed int32
	terminating               *int32
	completedIndexes          *string
	failedIndexes             *string
}

func statusString(s batchv1.JobStatus) string {
	var conds []string
	for _, c := range s.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	u := s.UncountedTerminatedPods
	if u == nil {
		u = &batchv1.UncountedTerminatedPods{}
	}
	return fmt.Sprintf("active=%d succeeded=%d failed=%d terminating=%v ready=%v completedIndexes=%q failedIndexes=%v uncounted(s=%d,f=%d) conditions=%v",
		s.Active, s.Succeeded, s.Failed, ptrStr(s.Terminating), ptrStr(s.Ready), s.CompletedIndexes, ptrStr(s.FailedIndexes),
		len(u.Succeeded), len(u.Failed), conds)
}

func ptrStr[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprint(*p)
}

func (w counts) String() string {
	return fmt.Sprintf("active=%d succeeded=%d failed=%d terminating=%s completedIndexes=%s failedIndexes=%s",
		w.active, w.succeeded, w.failed, ptrStr(w.terminating), ptrStr(w.completedIndexes), ptrStr(w.failedIndexes))
}

func (w counts) match(s batchv1.JobStatus) bool {
	return s.Active == w.active && s.Succeeded == w.succeeded && s.Failed == w.failed &&
		(w.terminating == nil || ptr.Deref(s.Terminating, -1) == *w.terminating) &&
		(w.completedIndexes == nil || s.CompletedIndexes == *w.completedIndexes) &&
		(w.failedIndexes == nil || (s.FailedIndexes != nil && *s.FailedIndexes == *w.failedIndexes))
}

// waitCounts waits until the Job's status shows want and returns the Job.
func waitCounts(t *testing.T, c clientset.Interface, j *batchv1.Job, want counts) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	poll(t, fmt.Sprintf("job %s status %s", j.Name, want), func(ctx context.Context) (bool, string, error) {
		var err error
		got, err = c.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return want.match(got.Status), statusString(got.Status), nil
	})
	return got
}

// waitJob waits until cond holds for the Job and returns it.
func waitJob(t *testing.T, c clientset.Interface, j *batchv1.Job, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	t.Helper()
	var got *batchv1.Job
	poll(t, fmt.Sprintf("job %s: %s", j.Name, what), func(ctx context.Context) (bool, string, error) {
		var err error
		got, err = c.BatchV1().Jobs(j.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return cond(got), statusString(got.Status), nil
	})
	return got
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// wantCondition checks that the Job has condition t True with reason and
// (when not empty) message.
func wantCondition(t *testing.T, j *batchv1.Job, typ batchv1.JobConditionType, reason, message string) {
	t.Helper()
	c := jobCondition(j, typ)
	switch {
	case c == nil:
		t.Errorf("job %s has no %s condition: %s", j.Name, typ, statusString(j.Status))
	case c.Status != v1.ConditionTrue || c.Reason != reason || (message != "" && c.Message != message):
		t.Errorf("job %s condition %s = %s reason %q message %q; want True, %q, %q", j.Name, typ, c.Status, c.Reason, c.Message, reason, message)
	}
}

func isActive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

func activePodsOf(ctx context.Context, c clientset.Interface, j *batchv1.Job) ([]v1.Pod, error) {
	pods, err := podsOf(ctx, c, j)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pods, func(p v1.Pod) bool { return !isActive(&p) }), nil
}

// activePodForIndex waits for the single active pod of index ix.
func activePodForIndex(t *testing.T, c clientset.Interface, j *batchv1.Job, ix int) *v1.Pod {
	t.Helper()
	var pod *v1.Pod
	poll(t, fmt.Sprintf("one active pod of %s for index %d", j.Name, ix), func(ctx context.Context) (bool, string, error) {
		pods, err := activePodsOf(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		var found []string
		pod = nil
		for i := range pods {
			if pods[i].Annotations[batchv1.JobCompletionIndexAnnotation] == strconv.Itoa(ix) {
				pod = &pods[i]
				found = append(found, pods[i].Name)
			}
		}
		return len(found) == 1, fmt.Sprintf("active pods for the index: %v", found), nil
	})
	return pod
}

// updatePod re-reads the pod and writes mutate's result to its status,
// retrying on conflicts (the controller patches pods concurrently).
func updatePodStatus(t *testing.T, c clientset.Interface, pod *v1.Pod, mutate func(*v1.Pod) (*v1.Pod, error)) {
	t.Helper()
	poll(t, "updating pod "+pod.Name, func(ctx context.Context) (bool, string, error) {
		cur, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, err = mutate(cur)
		if apierrors.IsConflict(err) {
			return false, "conflict", nil
		}
		return err == nil, "", err
	})
}

func failPod(t *testing.T, c clientset.Interface, pod *v1.Pod, exitCode int32) {
	t.Helper()
	k := framework.Kubelet{Client: c}
	updatePodStatus(t, c, pod, func(p *v1.Pod) (*v1.Pod, error) { return k.MarkFailed(context.Background(), p, exitCode) })
}

func succeedPod(t *testing.T, c clientset.Interface, pod *v1.Pod) {
	t.Helper()
	k := framework.Kubelet{Client: c}
	updatePodStatus(t, c, pod, func(p *v1.Pod) (*v1.Pod, error) { return k.MarkSucceeded(context.Background(), p) })
}

// failPodWithCondition fails the pod in one status write, with every
// container exiting 137 (killed) and a True condition of type cond, as the
// eviction or disruption machinery would leave it.
func failPodWithCondition(t *testing.T, c clientset.Interface, pod *v1.Pod, cond v1.PodConditionType) {
	t.Helper()
	updatePodStatus(t, c, pod, func(p *v1.Pod) (*v1.Pod, error) {
		now := metav1.Now()
		p = p.DeepCopy()
		p.Status.Phase = v1.PodFailed
		p.Status.Conditions = []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: now},
			{Type: cond, Status: v1.ConditionTrue, Reason: "TerminationByKcmTest", LastTransitionTime: now},
		}
		p.Status.ContainerStatuses = nil
		for _, ctr := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{
				Name: ctr.Name, Image: ctr.Image,
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", FinishedAt: now}},
			})
		}
		return c.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	})
}

// jobEvents lists the events about the Job from the job controller.
func jobEvents(ctx context.Context, c clientset.Interface, j *batchv1.Job) ([]v1.Event, error) {
	l, err := c.CoreV1().Events(j.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v1.Event
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name == j.Name && e.Source.Component == "job-controller" {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitEvent waits for an event of type and reason about the Job, with
// message when not empty.
func waitEvent(t *testing.T, c clientset.Interface, j *batchv1.Job, typ, reason, message string) {
	t.Helper()
	poll(t, fmt.Sprintf("a %s %s event for %s", typ, reason, j.Name), func(ctx context.Context) (bool, string, error) {
		evs, err := jobEvents(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range evs {
			if e.Type == typ && e.Reason == reason && (message == "" || e.Message == message) {
				return true, "", nil
			}
			seen = append(seen, fmt.Sprintf("%s/%s: %s", e.Type, e.Reason, e.Message))
		}
		return false, fmt.Sprint(seen), nil
	})
}

// conditionHistory records, from a watch, the True condition types of
// every version of one Job.
type conditionHistory struct {
	mu       sync.Mutex
	versions [][]batchv1.JobConditionType
}

// watchConditions starts recording the Job named name in ns; call it
// before creating the Job.
func watchConditions(t *testing.T, c clientset.Interface, ns, name string) *conditionHistory {
	t.Helper()
	w, err := c.BatchV1().Jobs(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	h := &conditionHistory{}
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			var types []batchv1.JobConditionType
			for _, c := range j.Status.Conditions {
				if c.Status == v1.ConditionTrue {
					types = append(types, c.Type)
				}
			}
			h.mu.Lock()
			h.versions = append(h.versions, types)
			h.mu.Unlock()
		}
	}()
	return h
}

// sawBefore reports whether some version had interim True without final,
// and no version had final before interim.
func (h *conditionHistory) sawBefore(interim, final batchv1.JobConditionType) (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sawInterimAlone := false
	for _, v := range h.versions {
		hasInterim, hasFinal := slices.Contains(v, interim), slices.Contains(v, final)
		if hasFinal && !hasInterim {
			return false, fmt.Sprintf("%s without %s: %v", final, interim, h.versions)
		}
		if hasInterim && !hasFinal {
			sawInterimAlone = true
		}
	}
	return sawInterimAlone, fmt.Sprint(h.versions)
}

// wantInterimConditionFirst checks the order in which the controller set an
// interim condition (FailureTarget, SuccessCriteriaMet) and the final one.
func wantInterimConditionFirst(t *testing.T, h *conditionHistory, j *batchv1.Job, interim, final batchv1.JobConditionType) {
	t.Helper()
	// The watch may lag the GET that saw the Job finished.
	var detail string
	poll(t, fmt.Sprintf("watch to show %s before %s", interim, final), func(context.Context) (bool, string, error) {
		h.mu.Lock()
		n := len(h.versions)
		done := n > 0 && slices.Contains(h.versions[n-1], final)
		h.mu.Unlock()
		return done, "", nil
	})
	ok, detail := h.sawBefore(interim, final)
	if !ok {
		t.Errorf("job %s: want a version with %s and not yet %s; versions: %s", j.Name, interim, final, detail)
	}
	i, f := slices.IndexFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == interim }),
		slices.IndexFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == final })
	if i < 0 || f < 0 || i > f {
		t.Errorf("job %s: conditions %s then %s expected in order: %s", j.Name, interim, final, statusString(j.Status))
	}
}

// waitNoTrackedPods waits until no pod of the Job holds the tracking
// finalizer (pods may be gone).
func noTrackingFinalizers(t *testing.T, c clientset.Interface, j *batchv1.Job) {
	t.Helper()
	poll(t, "no pod of "+j.Name+" with the tracking finalizer", func(ctx context.Context) (bool, string, error) {
		pods, err := podsOf(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		var held []string
		for _, p := range pods {
			if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				held = append(held, p.Name)
			}
		}
		return len(held) == 0, fmt.Sprint(held), nil
	})
}

// releaseBlockedPods removes blockDeletionFinalizer from every pod of ns
// when the test ends, so that the namespace can go.
func releaseBlockedPods(t *testing.T, c clientset.Interface, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, blockDeletionFinalizer) {
				patch := []byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["` + blockDeletionFinalizer + `"]}}`)
				_, _ = c.CoreV1().Pods(ns).Patch(ctx, p.Name, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{})
			}
		}
	})
}
