package job

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

type fixture struct {
	t        *testing.T
	jm       *Controller
	factory  informers.SharedInformerFactory
	pc       *testutil.FakePodControl
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder

	mu      sync.Mutex
	updates []*batch.Job
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	jm, err := newControllerWithClock(ctx, factory.Core().V1().Pods(), factory.Batch().V1().Jobs(), client, clk, v137Features)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, jm: jm, factory: factory, pc: &testutil.FakePodControl{}, clock: clk, recorder: record.NewFakeRecorder(100)}
	jm.podControl = f.pc
	jm.recorder = f.recorder
	jm.podStoreSynced = func() bool { return true }
	jm.jobStoreSynced = func() bool { return true }
	jm.consistency = controller.NewNoopConsistencyStore()
	jm.updateStatusHandler = func(_ context.Context, job *batch.Job) (*batch.Job, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.updates = append(f.updates, job.DeepCopy())
		return job, nil
	}
	t.Cleanup(jm.queue.ShutDown)
	t.Cleanup(jm.orphanQueue.ShutDown)
	return f
}

func (f *fixture) addJob(j *batch.Job) {
	if err := f.factory.Batch().V1().Jobs().Informer().GetIndexer().Add(j); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) addPods(pods ...*v1.Pod) {
	for _, p := range pods {
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync(j *batch.Job) {
	f.t.Helper()
	_, ctx := ktesting.NewTestContext(f.t)
	if err := f.jm.syncJob(ctx, j.Namespace+"/"+j.Name); err != nil {
		f.t.Fatalf("syncJob: %v", err)
	}
}

func (f *fixture) lastStatus() *batch.JobStatus {
	f.t.Helper()
	if len(f.updates) == 0 {
		f.t.Fatal("no status update")
	}
	return &f.updates[len(f.updates)-1].Status
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// newJob is a Job as the apiserver stores it: generated selector and the
// four labels on the template.
func newJob(name string, completions, parallelism *int32, backoffLimit int32) *batch.Job {
	uid := types.UID("uid-" + name)
	lbl := map[string]string{
		batch.ControllerUidLabel: string(uid),
		batch.JobNameLabel:       name,
		"controller-uid":         string(uid),
		"job-name":               name,
	}
	return &batch.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid, Generation: 1},
		Spec: batch.JobSpec{
			Completions:    completions,
			Parallelism:    parallelism,
			BackoffLimit:   ptr.To(backoffLimit),
			CompletionMode: ptr.To(batch.NonIndexedCompletion),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batch.ControllerUidLabel: string(uid)}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{
					RestartPolicy: v1.RestartPolicyNever,
					Containers:    []v1.Container{{Name: "pi", Image: "perl", Command: []string{"perl", "-e", "1"}}},
				},
			},
		},
	}
}

func indexed(j *batch.Job) *batch.Job {
	j.Spec.CompletionMode = ptr.To(batch.IndexedCompletion)
	return j
}

var podSeq int

// newPod is a pod of job in phase, holding the tracking finalizer; index
// >= 0 adds the completion index.
func newPod(j *batch.Job, phase v1.PodPhase, index int, now time.Time) *v1.Pod {
	podSeq++
	name := fmt.Sprintf("%s-%d", j.Name, podSeq)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: j.Namespace, UID: types.UID(name),
			Labels:            j.Spec.Template.Labels,
			Annotations:       map[string]string{},
			Finalizers:        []string{batch.JobTrackingFinalizer},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(j, controllerKind)},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			ResourceVersion:   "1",
		},
		Status: v1.PodStatus{Phase: phase},
	}
	if index >= 0 {
		p.Annotations[batch.JobCompletionIndexAnnotation] = strconv.Itoa(index)
	}
	if phase == v1.PodSucceeded || phase == v1.PodFailed {
		code := int32(0)
		if phase == v1.PodFailed {
			code = 1
		}
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "pi", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(now)}}}}
	}
	if phase == v1.PodRunning {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	}
	return p
}

func condition(s *batch.JobStatus, t batch.JobConditionType) *batch.JobCondition {
	return findCondition(s.Conditions, t)
}

func TestCreatesPodsWithLabelsAndFinalizer(t *testing.T) {
	f := newFixture(t)
	j := newJob("pi", ptr.To[int32](3), ptr.To[int32](2), 6)
	f.addJob(j)
	f.sync(j)

	if len(f.pc.Templates) != 2 {
		t.Fatalf("created %d pods, want 2", len(f.pc.Templates))
	}
	for i, tmpl := range f.pc.Templates {
		for _, k := range []string{batch.ControllerUidLabel, batch.JobNameLabel, "controller-uid", "job-name"} {
			if _, ok := tmpl.Labels[k]; !ok {
				t.Errorf("pod %d: missing label %s", i, k)
			}
		}
		if len(tmpl.Finalizers) != 1 || tmpl.Finalizers[0] != batch.JobTrackingFinalizer {
			t.Errorf("pod %d: finalizers %v", i, tmpl.Finalizers)
		}
		if tmpl.GenerateName != "" {
			t.Errorf("pod %d: generateName %q, want default (<job>-)", i, tmpl.GenerateName)
		}
		ref := f.pc.ControllerRefs[i]
		if ref.Kind != "Job" || ref.UID != j.UID || !*ref.Controller || !*ref.BlockOwnerDeletion {
			t.Errorf("pod %d: bad controllerRef %+v", i, ref)
		}
		if len(tmpl.Spec.Containers[0].Env) != 0 {
			t.Errorf("NonIndexed pod got env %v", tmpl.Spec.Containers[0].Env)
		}
	}
	s := f.lastStatus()
	if s.Active != 2 || s.StartTime == nil || !s.StartTime.Time.Equal(f.clock.Now()) || ptr.Deref(s.Ready, -1) != 0 || ptr.Deref(s.Terminating, -1) != 0 {
		t.Errorf("status = %+v", s)
	}
	// The template itself must stay untouched.
	if len(j.Spec.Template.Finalizers) != 0 {
		t.Error("job template mutated")
	}
}

func TestIndexedCreatesPods(t *testing.T) {
	f := newFixture(t)
	j := indexed(newJob("idx", ptr.To[int32](3), ptr.To[int32](3), 6))
	j.Spec.Template.Spec.Subdomain = "svc"
	f.addJob(j)
	// Index 1 already succeeded.
	f.addPods(newPod(j, v1.PodSucceeded, 1, f.clock.Now()))
	f.sync(j)

	got := map[string]v1.PodTemplateSpec{}
	for _, tmpl := range f.pc.Templates {
		got[tmpl.Annotations[batch.JobCompletionIndexAnnotation]] = tmpl
	}
	if len(got) != 2 || got["0"].Labels == nil || got["2"].Labels == nil {
		t.Fatalf("created indexes %v, want 0 and 2", got)
	}
	for ix, tmpl := range got {
		if tmpl.Labels[batch.JobCompletionIndexAnnotation] != ix {
			t.Errorf("index %s: label %q", ix, tmpl.Labels[batch.JobCompletionIndexAnnotation])
		}
		if tmpl.GenerateName != "idx-"+ix+"-" {
			t.Errorf("index %s: generateName %q", ix, tmpl.GenerateName)
		}
		if tmpl.Spec.Hostname != "idx-"+ix || tmpl.Spec.Subdomain != "svc" {
			t.Errorf("index %s: hostname %q subdomain %q", ix, tmpl.Spec.Hostname, tmpl.Spec.Subdomain)
		}
		env := tmpl.Spec.Containers[0].Env
		if len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" || env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("index %s: env %+v", ix, env)
		}
	}
	s := f.lastStatus()
	if s.CompletedIndexes != "1" || s.Succeeded != 1 || s.Active != 2 {
		t.Errorf("status completedIndexes=%q succeeded=%d active=%d", s.CompletedIndexes, s.Succeeded, s.Active)
	}
	if len(f.pc.Patches) != 1 {
		t.Errorf("finalizer patches = %d, want 1", len(f.pc.Patches))
	}
}

func TestUncountedTerminatedPodsThenFinalizerRemoval(t *testing.T) {
	f := newFixture(t)
	j := newJob("track", ptr.To[int32](5), ptr.To[int32](1), 6)
	f.addJob(j)
	now := f.clock.Now()
	s1, s2, fl := newPod(j, v1.PodSucceeded, -1, now), newPod(j, v1.PodSucceeded, -1, now), newPod(j, v1.PodFailed, -1, now.Add(-time.Hour))
	running := newPod(j, v1.PodRunning, -1, now)
	f.addPods(s1, s2, fl, running)
	f.sync(j)

	if len(f.updates) != 2 {
		t.Fatalf("status updates = %d, want 2 (uncounted, then counted)", len(f.updates))
	}
	first := f.updates[0].Status
	if len(first.UncountedTerminatedPods.Succeeded) != 2 || len(first.UncountedTerminatedPods.Failed) != 1 || first.Succeeded != 0 || first.Failed != 0 {
		t.Errorf("first update: uncounted=%+v succeeded=%d failed=%d", first.UncountedTerminatedPods, first.Succeeded, first.Failed)
	}
	if len(f.pc.Patches) != 3 {
		t.Errorf("finalizer removals = %d, want 3", len(f.pc.Patches))
	}
	want := `{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}`
	if len(f.pc.Patches) > 0 && string(f.pc.Patches[0]) != want {
		t.Errorf("patch = %s", f.pc.Patches[0])
	}
	last := f.lastStatus()
	if last.Succeeded != 2 || last.Failed != 1 || len(last.UncountedTerminatedPods.Succeeded)+len(last.UncountedTerminatedPods.Failed) != 0 || last.Active != 1 || *last.Ready != 1 {
		t.Errorf("last update: %+v", last)
	}
	// Expectations now hold those UIDs: a stale cache does not recount.
	if exp := f.jm.finalizerExpectations.expected("default/track"); exp.Len() != 3 {
		t.Errorf("expected finalizer removals = %v", exp)
	}
}

func TestCompletion(t *testing.T) {
	f := newFixture(t)
	j := newJob("done", ptr.To[int32](2), ptr.To[int32](2), 6)
	j.Status.StartTime = ptr.To(metav1.NewTime(f.clock.Now().Add(-time.Minute)))
	f.addJob(j)
	f.addPods(newPod(j, v1.PodSucceeded, -1, f.clock.Now()), newPod(j, v1.PodSucceeded, -1, f.clock.Now()))
	f.sync(j)

	s := f.lastStatus()
	if s.Succeeded != 2 || s.Active != 0 {
		t.Errorf("succeeded=%d active=%d", s.Succeeded, s.Active)
	}
	scm, c := condition(s, batch.JobSuccessCriteriaMet), condition(s, batch.JobComplete)
	if scm == nil || scm.Reason != batch.JobReasonCompletionsReached || c == nil || c.Status != v1.ConditionTrue ||
		c.Reason != batch.JobReasonCompletionsReached || c.Message != "Reached expected number of succeeded pods" {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
	if s.CompletionTime == nil || !s.CompletionTime.Equal(&c.LastTransitionTime) {
		t.Errorf("completionTime = %v", s.CompletionTime)
	}
	// The interim condition was written before finalizers were removed.
	if condition(&f.updates[0].Status, batch.JobSuccessCriteriaMet) == nil || condition(&f.updates[0].Status, batch.JobComplete) != nil {
		t.Errorf("first update conditions = %+v", f.updates[0].Status.Conditions)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Normal Completed Job completed" {
		t.Errorf("events = %v", ev)
	}
}

func TestBackoffLimitExceeded(t *testing.T) {
	f := newFixture(t)
	j := newJob("fail", ptr.To[int32](1), ptr.To[int32](1), 0)
	f.addJob(j)
	f.addPods(newPod(j, v1.PodFailed, -1, f.clock.Now()))
	f.sync(j)

	s := f.lastStatus()
	ft, failed := condition(s, batch.JobFailureTarget), condition(s, batch.JobFailed)
	if ft == nil || failed == nil || failed.Reason != batch.JobReasonBackoffLimitExceeded || failed.Message != "Job has reached the specified backoff limit" {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
	if s.Failed != 1 || s.CompletionTime != nil || len(f.pc.Templates) != 0 {
		t.Errorf("failed=%d completionTime=%v created=%d", s.Failed, s.CompletionTime, len(f.pc.Templates))
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Warning BackoffLimitExceeded Job has reached the specified backoff limit" {
		t.Errorf("events = %v", ev)
	}
}

func TestActiveDeadline(t *testing.T) {
	f := newFixture(t)
	j := newJob("late", ptr.To[int32](1), ptr.To[int32](1), 6)
	j.Spec.ActiveDeadlineSeconds = ptr.To[int64](10)
	j.Status.StartTime = ptr.To(metav1.NewTime(f.clock.Now().Add(-20 * time.Second)))
	f.addJob(j)
	f.addPods(newPod(j, v1.PodRunning, -1, f.clock.Now()))
	f.sync(j)

	if len(f.pc.DeletePodName) != 1 {
		t.Fatalf("deleted %v", f.pc.DeletePodName)
	}
	s := f.lastStatus()
	ft := condition(s, batch.JobFailureTarget)
	if ft == nil || ft.Reason != batch.JobReasonDeadlineExceeded || ft.Message != "Job was active longer than specified deadline" {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
	// The deleted pod is still terminating: Failed waits for it.
	if condition(s, batch.JobFailed) != nil || *s.Terminating != 1 || s.Active != 0 || s.Failed != 1 {
		t.Errorf("status = %+v", s)
	}

	// Once the pod is gone, the next sync turns FailureTarget into Failed.
	f2 := newFixture(t)
	j2 := j.DeepCopy()
	j2.Status = *s.DeepCopy()
	f2.addJob(j2)
	f2.sync(j2)
	if c := condition(f2.lastStatus(), batch.JobFailed); c == nil || c.Reason != batch.JobReasonDeadlineExceeded {
		t.Errorf("conditions = %+v", f2.lastStatus().Conditions)
	}
}

func TestDeadlineRequeues(t *testing.T) {
	f := newFixture(t)
	j := newJob("soon", ptr.To[int32](1), ptr.To[int32](1), 6)
	j.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	f.addJob(j)
	f.sync(j)
	f.clock.Step(31 * time.Second)
	if err := waitFor(func() bool { return f.jm.queue.Len() > 0 }); err != nil {
		t.Fatal("job not requeued for its deadline")
	}
}

func waitFor(cond func() bool) error {
	for i := 0; i < 200; i++ {
		if cond() {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("timed out")
}

func TestSuspend(t *testing.T) {
	f := newFixture(t)
	j := newJob("sus", ptr.To[int32](4), ptr.To[int32](2), 6)
	j.Spec.Suspend = ptr.To(true)
	j.Status.StartTime = ptr.To(metav1.NewTime(f.clock.Now().Add(-time.Minute)))
	f.addJob(j)
	f.addPods(newPod(j, v1.PodRunning, -1, f.clock.Now()), newPod(j, v1.PodPending, -1, f.clock.Now()))
	f.sync(j)

	if len(f.pc.DeletePodName) != 2 || len(f.pc.Patches) != 2 || len(f.pc.Templates) != 0 {
		t.Fatalf("deleted=%v patches=%d created=%d", f.pc.DeletePodName, len(f.pc.Patches), len(f.pc.Templates))
	}
	s := f.lastStatus()
	c := condition(s, batch.JobSuspended)
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != "JobSuspended" || c.Message != "Job suspended" {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
	// Suspended pods are not failures; startTime is cleared.
	if s.Active != 0 || s.Failed != 0 || *s.Terminating != 2 || *s.Ready != 0 || s.StartTime != nil {
		t.Errorf("status = %+v", s)
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Normal Suspended Job suspended" {
		t.Errorf("events = %v", ev)
	}

	// Resume.
	f2 := newFixture(t)
	j2 := j.DeepCopy()
	j2.Spec.Suspend = ptr.To(false)
	j2.Status = *s.DeepCopy()
	f2.addJob(j2)
	f2.sync(j2)
	s2 := f2.lastStatus()
	if c := condition(s2, batch.JobSuspended); c == nil || c.Status != v1.ConditionFalse || c.Reason != "JobResumed" || c.Message != "Job resumed" {
		t.Errorf("conditions = %+v", s2.Conditions)
	}
	if len(f2.pc.Templates) != 2 || s2.StartTime == nil {
		t.Errorf("created=%d startTime=%v", len(f2.pc.Templates), s2.StartTime)
	}
	if ev := f2.events(); len(ev) != 1 || ev[0] != "Normal Resumed Job resumed" {
		t.Errorf("events = %v", ev)
	}
}

func TestCreatedSuspendedHasNoStartTime(t *testing.T) {
	f := newFixture(t)
	j := newJob("sus0", ptr.To[int32](1), ptr.To[int32](1), 6)
	j.Spec.Suspend = ptr.To(true)
	f.addJob(j)
	f.sync(j)
	if s := f.lastStatus(); s.StartTime != nil || condition(s, batch.JobSuspended) == nil {
		t.Errorf("status = %+v", s)
	}
}

func TestIndexedCompletedIndexesFormat(t *testing.T) {
	f := newFixture(t)
	j := indexed(newJob("fmt", ptr.To[int32](7), ptr.To[int32](0), 6))
	f.addJob(j)
	for _, ix := range []int{1, 3, 4, 5} {
		f.addPods(newPod(j, v1.PodSucceeded, ix, f.clock.Now()))
	}
	// A second success of index 4 and an out-of-range index count once / never.
	f.addPods(newPod(j, v1.PodSucceeded, 4, f.clock.Now()), newPod(j, v1.PodSucceeded, 9, f.clock.Now()))
	f.sync(j)
	s := f.lastStatus()
	if s.CompletedIndexes != "1,3-5" || s.Succeeded != 4 {
		t.Errorf("completedIndexes=%q succeeded=%d", s.CompletedIndexes, s.Succeeded)
	}
	if len(s.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf("indexed jobs track by index, not uid: %v", s.UncountedTerminatedPods)
	}
}

func TestIndexSet(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		in          []int
		prev, want  string
		completions int
	}{
		{in: []int{1, 3, 4, 5}, want: "1,3-5", completions: 10},
		{in: []int{0, 1}, want: "0,1", completions: 10},
		{in: []int{2}, prev: "0,1", want: "0-2", completions: 10},
		{in: []int{7}, prev: "1,3-5", want: "1,3-5,7", completions: 10},
		{in: nil, prev: "1,3-9", want: "1,3-5", completions: 6},
		{in: []int{4}, prev: "x,1-3", want: "1-4", completions: 6},
	} {
		s := parseIndexSet(logger, tc.prev, tc.completions).withIndexes(tc.in)
		if got := s.String(); got != tc.want {
			t.Errorf("%q + %v = %q, want %q", tc.prev, tc.in, got, tc.want)
		}
	}
	s := parseIndexSet(logger, "1,3-5,9", 10)
	if s.total() != 5 || !s.has(4) || s.has(2) || s.has(6) || !s.has(9) {
		t.Errorf("bad set %v", s)
	}
}

func TestManagedByExternalControllerIsSkipped(t *testing.T) {
	f := newFixture(t)
	j := newJob("ext", ptr.To[int32](1), ptr.To[int32](1), 6)
	j.Spec.ManagedBy = ptr.To("example.com/other")
	f.addJob(j)
	f.sync(j)
	if len(f.pc.Templates) != 0 || len(f.updates) != 0 {
		t.Errorf("created=%d updates=%d; want nothing", len(f.pc.Templates), len(f.updates))
	}
	// The built-in name is ours.
	f2 := newFixture(t)
	j2 := newJob("own", ptr.To[int32](1), ptr.To[int32](1), 6)
	j2.Spec.ManagedBy = ptr.To(batch.JobControllerName)
	f2.addJob(j2)
	f2.sync(j2)
	if len(f2.pc.Templates) != 1 {
		t.Errorf("created=%d, want 1", len(f2.pc.Templates))
	}
}

func TestPodFailureBackoffDelaysRecreation(t *testing.T) {
	f := newFixture(t)
	j := newJob("retry", ptr.To[int32](1), ptr.To[int32](1), 6)
	f.addJob(j)
	f.addPods(newPod(j, v1.PodFailed, -1, f.clock.Now()))
	f.sync(j)
	if len(f.pc.Templates) != 0 {
		t.Fatalf("recreated immediately; want a 10s backoff")
	}
	if s := f.lastStatus(); s.Failed != 1 {
		t.Errorf("failed = %d", s.Failed)
	}
	// 10s later, with the failure counted, the pod is recreated.
	f.clock.Step(11 * time.Second)
	j2 := j.DeepCopy()
	j2.Status = *f.lastStatus()
	f.addJob(j2)
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Replace(nil, ""); err != nil {
		t.Fatal(err)
	}
	f.sync(j2)
	if len(f.pc.Templates) != 1 {
		t.Errorf("created = %d after backoff", len(f.pc.Templates))
	}
}

func TestRemainingBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	last := clk.Now()
	for _, tc := range []struct {
		failures int32
		want     time.Duration
	}{
		{0, 0}, {1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second},
		{7, 640*time.Second*0 + 10*time.Minute}, {20, 10 * time.Minute},
	} {
		if got := remainingBackoff(clk, DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff, tc.failures, &last); got != tc.want {
			t.Errorf("failures=%d: %v, want %v", tc.failures, got, tc.want)
		}
	}
}

func TestPodFailurePolicyFailJob(t *testing.T) {
	f := newFixture(t)
	j := newJob("pfp", ptr.To[int32](1), ptr.To[int32](1), 6)
	j.Spec.PodFailurePolicy = &batch.PodFailurePolicy{Rules: []batch.PodFailurePolicyRule{{
		Action:      batch.PodFailurePolicyActionFailJob,
		OnExitCodes: &batch.PodFailurePolicyOnExitCodesRequirement{Operator: batch.PodFailurePolicyOnExitCodesOpIn, Values: []int32{1}},
	}}}
	f.addJob(j)
	p := newPod(j, v1.PodFailed, -1, f.clock.Now())
	f.addPods(p)
	f.sync(j)
	c := condition(f.lastStatus(), batch.JobFailed)
	want := fmt.Sprintf("Container pi for pod default/%s failed with exit code 1 matching FailJob rule at index 0", p.Name)
	if c == nil || c.Reason != batch.JobReasonPodFailurePolicy || c.Message != want {
		t.Errorf("conditions = %+v", f.lastStatus().Conditions)
	}
}

func TestSuccessPolicy(t *testing.T) {
	f := newFixture(t)
	j := indexed(newJob("sp", ptr.To[int32](5), ptr.To[int32](5), 6))
	j.Spec.SuccessPolicy = &batch.SuccessPolicy{Rules: []batch.SuccessPolicyRule{{SucceededIndexes: ptr.To("0-1")}}}
	f.addJob(j)
	f.addPods(newPod(j, v1.PodSucceeded, 0, f.clock.Now()), newPod(j, v1.PodSucceeded, 1, f.clock.Now()), newPod(j, v1.PodRunning, 2, f.clock.Now()))
	f.sync(j)
	s := f.lastStatus()
	if c := condition(s, batch.JobSuccessCriteriaMet); c == nil || c.Reason != batch.JobReasonSuccessPolicy || c.Message != "Matched rules at index 0" {
		t.Errorf("conditions = %+v", s.Conditions)
	}
	if len(f.pc.DeletePodName) != 1 {
		t.Errorf("deleted %v, want the running pod", f.pc.DeletePodName)
	}
}

func TestBackoffLimitPerIndex(t *testing.T) {
	f := newFixture(t)
	j := indexed(newJob("bpi", ptr.To[int32](3), ptr.To[int32](3), 0))
	j.Spec.BackoffLimit = ptr.To[int32](1 << 30)
	j.Spec.BackoffLimitPerIndex = ptr.To[int32](0)
	j.Spec.MaxFailedIndexes = ptr.To[int32](1)
	f.addJob(j)
	f.addPods(newPod(j, v1.PodFailed, 1, f.clock.Now()), newPod(j, v1.PodRunning, 0, f.clock.Now()), newPod(j, v1.PodRunning, 2, f.clock.Now()))
	f.sync(j)
	s := f.lastStatus()
	if ptr.Deref(s.FailedIndexes, "") != "1" || condition(s, batch.JobFailed) != nil {
		t.Errorf("failedIndexes=%v conditions=%+v", s.FailedIndexes, s.Conditions)
	}
	if len(f.pc.Templates) != 0 {
		t.Errorf("recreated a failed index")
	}
}

func TestAdoptsOrphanWithFinalizer(t *testing.T) {
	f := newFixture(t)
	j := newJob("adopt", ptr.To[int32](1), ptr.To[int32](1), 6)
	f.addJob(j)
	p := newPod(j, v1.PodRunning, -1, f.clock.Now())
	p.OwnerReferences = nil
	p.Finalizers = nil
	f.addPods(p)
	// Adoption re-reads the Job live.
	_, _ = f.jm.kubeClient.BatchV1().Jobs("default").Create(context.Background(), j, metav1.CreateOptions{})
	f.sync(j)
	if len(f.pc.Patches) != 1 {
		t.Fatalf("patches = %d", len(f.pc.Patches))
	}
	if got := string(f.pc.Patches[0]); !strings.Contains(got, batch.JobTrackingFinalizer) || !strings.Contains(got, string(j.UID)) {
		t.Errorf("adopt patch %s", got)
	}
}

func TestOrphanPodFinalizerRemoved(t *testing.T) {
	f := newFixture(t)
	j := newJob("gone", ptr.To[int32](1), ptr.To[int32](1), 6)
	p := newPod(j, v1.PodSucceeded, -1, f.clock.Now())
	f.addPods(p) // its Job no longer exists
	_, ctx := ktesting.NewTestContext(t)
	if err := f.jm.syncOrphanPod(ctx, orphanPodKey{namespace: p.Namespace, value: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(f.pc.Patches) != 1 {
		t.Errorf("patches = %d, want the finalizer removal", len(f.pc.Patches))
	}
}

func TestPodReplacementPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy      batch.PodReplacementPolicy
		wantCreated int
		wantFailed  int32
	}{
		// Default: a terminating pod counts as failed and is replaced at once
		// (the failure backoff applies, so here: after 10s).
		{batch.TerminatingOrFailed, 0, 1},
		// Failed: wait for the terminating pod to reach Failed.
		{batch.Failed, 0, 0},
	} {
		f := newFixture(t)
		j := newJob("prp", ptr.To[int32](1), ptr.To[int32](1), 6)
		j.Spec.PodReplacementPolicy = ptr.To(tc.policy)
		f.addJob(j)
		p := newPod(j, v1.PodRunning, -1, f.clock.Now())
		p.DeletionTimestamp = ptr.To(metav1.NewTime(f.clock.Now()))
		f.addPods(p)
		f.sync(j)
		s := f.lastStatus()
		if len(f.pc.Templates) != tc.wantCreated || s.Failed != tc.wantFailed || *s.Terminating != 1 {
			t.Errorf("%s: created=%d failed=%d terminating=%d", tc.policy, len(f.pc.Templates), s.Failed, *s.Terminating)
		}
	}
}

// v137Features are the v1.37 defaults of the gates the controller reads.
var v137Features = Features{StaleControllerConsistency: true, MutableSchedulingDirectivesForSuspendedJobs: true}
