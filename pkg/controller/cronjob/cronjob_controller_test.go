package cronjob

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // time zones in tests do not depend on the host

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const ns = "default"

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newCronJob(name, schedule string, created time.Time) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         ns,
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.Time{Time: created},
			ResourceVersion:   "1",
		},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "x"},
					Annotations: map[string]string{"note": "y"},
				},
				Spec: batchv1.JobSpec{
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
					}},
				},
			},
		},
	}
}

// childJob is a Job cj started at scheduled; finished is "", Complete or
// Failed.
func childJob(t *testing.T, cj *batchv1.CronJob, scheduled time.Time, finished batchv1.JobConditionType) *batchv1.Job {
	t.Helper()
	j, err := jobFromTemplate(cj, scheduled)
	if err != nil {
		t.Fatal(err)
	}
	j.Namespace = ns
	j.UID = types.UID("uid-" + j.Name)
	j.Status.StartTime = &metav1.Time{Time: scheduled}
	if finished != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: finished, Status: corev1.ConditionTrue}}
		if finished == batchv1.JobComplete {
			j.Status.CompletionTime = &metav1.Time{Time: scheduled.Add(time.Minute)}
		}
	}
	return j
}

func activeRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

type fixture struct {
	jm     *Controller
	client *fake.Clientset
	rec    *record.FakeRecorder
	clk    *clocktesting.FakePassiveClock
}

func newFixture(t *testing.T, now time.Time, cj *batchv1.CronJob, jobs ...*batchv1.Job) *fixture {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakePassiveClock(now)
	jm, err := NewControllerWithClock(context.Background(), factory.Batch().V1().Jobs(), factory.Batch().V1().CronJobs(), client, clk)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	jm.recorder = rec
	if cj != nil {
		if _, err := client.BatchV1().CronJobs(ns).Create(context.Background(), cj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(cj); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		if _, err := client.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := factory.Batch().V1().Jobs().Informer().GetIndexer().Add(j); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return &fixture{jm: jm, client: client, rec: rec, clk: clk}
}

func (f *fixture) sync(t *testing.T, name string) *time.Duration {
	t.Helper()
	d, err := f.jm.sync(context.Background(), ns+"/"+name)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return d
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func (f *fixture) created() []*batchv1.Job {
	var out []*batchv1.Job
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "jobs" {
			out = append(out, c.GetObject().(*batchv1.Job))
		}
	}
	return out
}

func (f *fixture) deleted() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "jobs" {
			out = append(out, d.GetName())
		}
	}
	return out
}

func (f *fixture) status(t *testing.T, name string) batchv1.CronJobStatus {
	t.Helper()
	cj, err := f.client.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cj.Status
}

func wantRequeue(t *testing.T, got *time.Duration, want time.Duration) {
	t.Helper()
	if got == nil {
		t.Fatalf("requeue: got none, want %v", want)
	}
	if *got != want {
		t.Fatalf("requeue: got %v, want %v", *got, want)
	}
}

func TestCreatesJobAtScheduledTime(t *testing.T) {
	created := mustTime(t, "2026-01-01T09:30:00Z")
	cj := newCronJob("hourly", "0 * * * *", created)

	// Before the first start time: nothing, come back just after it.
	f := newFixture(t, mustTime(t, "2026-01-01T09:45:00Z"), cj)
	wantRequeue(t, f.sync(t, "hourly"), 15*time.Minute+nextScheduleDelta)
	if len(f.created()) != 0 {
		t.Fatalf("created jobs early: %v", f.created())
	}

	f = newFixture(t, mustTime(t, "2026-01-01T10:00:05Z"), cj)
	wantRequeue(t, f.sync(t, "hourly"), time.Hour-5*time.Second+nextScheduleDelta)
	jobs := f.created()
	if len(jobs) != 1 {
		t.Fatalf("created %d jobs, want 1", len(jobs))
	}
	j := jobs[0]
	scheduled := mustTime(t, "2026-01-01T10:00:00Z")
	if want := "hourly-" + strconv.FormatInt(scheduled.Unix()/60, 10); j.Name != want {
		t.Errorf("job name %q, want %q", j.Name, want)
	}
	if got := j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-01-01T10:00:00Z" {
		t.Errorf("scheduled-timestamp annotation %q", got)
	}
	if j.Annotations["note"] != "y" || j.Labels["app"] != "x" {
		t.Errorf("template metadata not copied: %v %v", j.Labels, j.Annotations)
	}
	ref := metav1.GetControllerOf(j)
	if ref == nil || ref.Kind != "CronJob" || ref.Name != "hourly" || ref.UID != cj.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller ref %+v", ref)
	}
	if j.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Errorf("job spec not from template")
	}
	st := f.status(t, "hourly")
	if len(st.Active) != 1 || st.Active[0].Name != j.Name || st.Active[0].Kind != "Job" {
		t.Errorf("status.active %+v", st.Active)
	}
	if st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(scheduled) {
		t.Errorf("lastScheduleTime %v", st.LastScheduleTime)
	}
	if ev := f.events(); !hasEvent(ev, "Normal SuccessfulCreate Created job "+j.Name) {
		t.Errorf("events %v", ev)
	}
}

func TestAlreadyProcessedScheduleDoesNotCreateAgain(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T09:30:00Z"))
	scheduled := mustTime(t, "2026-01-01T10:00:00Z")
	j := childJob(t, cj, scheduled, "")
	cj.Status.Active = []corev1.ObjectReference{activeRef(j)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: scheduled}
	f := newFixture(t, scheduled.Add(time.Minute), cj, j)
	wantRequeue(t, f.sync(t, "c"), 59*time.Minute+nextScheduleDelta)
	if len(f.created()) != 0 {
		t.Fatal("created a job twice")
	}
}

func TestJobAlreadyExistsIsAddedToActive(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T09:30:00Z"))
	scheduled := mustTime(t, "2026-01-01T10:00:00Z")
	j := childJob(t, cj, scheduled, "")
	// In the apiserver but not yet in the cache nor in the status.
	f := newFixture(t, scheduled.Add(time.Second), cj)
	if _, err := f.client.BatchV1().Jobs(ns).Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync(t, "c")
	st := f.status(t, "c")
	if len(st.Active) != 1 || st.Active[0].UID != j.UID {
		t.Fatalf("active %+v", st.Active)
	}
	if hasEvent(f.events(), "Normal SuccessfulCreate") {
		t.Error("SuccessfulCreate for a job that already existed")
	}
}

func TestForbidSkipsWhileActive(t *testing.T) {
	cj := newCronJob("c", "*/5 * * * *", mustTime(t, "2026-01-01T09:59:00Z"))
	cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
	prev := mustTime(t, "2026-01-01T10:00:00Z")
	j := childJob(t, cj, prev, "")
	cj.Status.Active = []corev1.ObjectReference{activeRef(j)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: prev}

	f := newFixture(t, mustTime(t, "2026-01-01T10:05:01Z"), cj, j)
	wantRequeue(t, f.sync(t, "c"), 5*time.Minute-time.Second+nextScheduleDelta)
	if len(f.created()) != 0 || len(f.deleted()) != 0 {
		t.Fatalf("created %v deleted %v", f.created(), f.deleted())
	}
	if ev := f.events(); !hasEvent(ev, "Normal JobAlreadyActive") {
		t.Errorf("events %v", ev)
	}

	// Once the running Job finished, the next start goes ahead.
	done := childJob(t, cj, prev, batchv1.JobComplete)
	f = newFixture(t, mustTime(t, "2026-01-01T10:05:01Z"), cj, done)
	f.sync(t, "c")
	if len(f.created()) != 1 {
		t.Fatalf("created %d jobs after the active one finished", len(f.created()))
	}
}

func TestReplaceDeletesActiveJob(t *testing.T) {
	cj := newCronJob("c", "*/5 * * * *", mustTime(t, "2026-01-01T09:59:00Z"))
	cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent
	prev := mustTime(t, "2026-01-01T10:00:00Z")
	old := childJob(t, cj, prev, "")
	cj.Status.Active = []corev1.ObjectReference{activeRef(old)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: prev}

	f := newFixture(t, mustTime(t, "2026-01-01T10:05:00Z"), cj, old)
	f.sync(t, "c")
	if d := f.deleted(); len(d) != 1 || d[0] != old.Name {
		t.Fatalf("deleted %v, want [%s]", d, old.Name)
	}
	c := f.created()
	if len(c) != 1 {
		t.Fatalf("created %d jobs", len(c))
	}
	st := f.status(t, "c")
	if len(st.Active) != 1 || st.Active[0].Name != c[0].Name {
		t.Fatalf("active %+v", st.Active)
	}
	ev := f.events()
	if !hasEvent(ev, "Normal SuccessfulDelete Deleted job "+old.Name) || !hasEvent(ev, "Normal SuccessfulCreate") {
		t.Errorf("events %v", ev)
	}
}

func TestMissedDeadlineSkips(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T09:30:00Z"))
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10)
	f := newFixture(t, mustTime(t, "2026-01-01T10:00:30Z"), cj)
	wantRequeue(t, f.sync(t, "c"), time.Hour-30*time.Second+nextScheduleDelta)
	if len(f.created()) != 0 {
		t.Fatal("created a job past its deadline")
	}
	// The start time left the window; nothing is due, nothing reported.
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v", ev)
	}

	// Within the deadline it starts.
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
	f = newFixture(t, mustTime(t, "2026-01-01T10:00:30Z"), cj)
	f.sync(t, "c")
	if len(f.created()) != 1 {
		t.Fatal("did not start within the deadline")
	}
}

func TestSuspend(t *testing.T) {
	cj := newCronJob("c", "* * * * *", mustTime(t, "2026-01-01T09:30:00Z"))
	cj.Spec.Suspend = ptr.To(true)
	f := newFixture(t, mustTime(t, "2026-01-01T10:00:05Z"), cj)
	if d := f.sync(t, "c"); d != nil {
		t.Fatalf("suspended cronjob requeued after %v", *d)
	}
	if len(f.created()) != 0 {
		t.Fatal("suspended cronjob created a job")
	}
}

func TestHistoryLimits(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T00:30:00Z"))
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](1)
	cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](0)
	base := mustTime(t, "2026-01-01T01:00:00Z")
	s1 := childJob(t, cj, base, batchv1.JobComplete)
	s2 := childJob(t, cj, base.Add(time.Hour), batchv1.JobComplete)
	s3 := childJob(t, cj, base.Add(2*time.Hour), batchv1.JobComplete)
	f1 := childJob(t, cj, base.Add(3*time.Hour), batchv1.JobFailed)
	running := childJob(t, cj, base.Add(4*time.Hour), "")
	cj.Status.Active = []corev1.ObjectReference{activeRef(running)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: base.Add(4 * time.Hour)}

	f := newFixture(t, base.Add(4*time.Hour+time.Minute), cj, s3, s1, running, f1, s2)
	f.sync(t, "c")
	got := map[string]bool{}
	for _, n := range f.deleted() {
		got[n] = true
	}
	if len(got) != 3 || !got[s1.Name] || !got[s2.Name] || !got[f1.Name] {
		t.Fatalf("deleted %v, want %s %s %s", f.deleted(), s1.Name, s2.Name, f1.Name)
	}
	if ev := f.events(); !hasEvent(ev, "Normal SuccessfulDelete Deleted job "+s1.Name) {
		t.Errorf("events %v", ev)
	}
}

func TestByStartTimeOrder(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", time.Time{})
	a := childJob(t, cj, mustTime(t, "2026-01-01T01:00:00Z"), "")
	b := childJob(t, cj, mustTime(t, "2026-01-01T02:00:00Z"), "")
	n := childJob(t, cj, mustTime(t, "2026-01-01T00:00:00Z"), "")
	n.Status.StartTime = nil
	if jobStartedBefore(a, b) >= 0 || jobStartedBefore(b, a) <= 0 || jobStartedBefore(n, a) <= 0 || jobStartedBefore(a, n) >= 0 {
		t.Fatal("wrong order")
	}
}

func TestStatusActiveAndLastSuccessfulTime(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T00:30:00Z"))
	prev := mustTime(t, "2026-01-01T01:00:00Z")
	done := childJob(t, cj, prev, batchv1.JobComplete)
	gone := childJob(t, cj, prev.Add(-time.Hour), "")
	cj.Status.Active = []corev1.ObjectReference{activeRef(done), activeRef(gone)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: prev}

	f := newFixture(t, prev.Add(10*time.Minute), cj, done)
	wantRequeue(t, f.sync(t, "c"), 50*time.Minute+nextScheduleDelta)
	st := f.status(t, "c")
	if len(st.Active) != 0 {
		t.Errorf("active %+v", st.Active)
	}
	if st.LastSuccessfulTime == nil || !st.LastSuccessfulTime.Equal(done.Status.CompletionTime) {
		t.Errorf("lastSuccessfulTime %v, want %v", st.LastSuccessfulTime, done.Status.CompletionTime)
	}
	ev := f.events()
	if !hasEvent(ev, "Normal SawCompletedJob Saw completed job: "+done.Name+", condition: Complete") {
		t.Errorf("events %v", ev)
	}
	if !hasEvent(ev, "Normal MissingJob Active job went missing: "+gone.Name) {
		t.Errorf("events %v", ev)
	}
}

func TestUnexpectedJob(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T00:30:00Z"))
	stray := childJob(t, cj, mustTime(t, "2026-01-01T01:00:00Z"), "")
	f := newFixture(t, mustTime(t, "2026-01-01T00:40:00Z"), cj, stray)
	f.sync(t, "c")
	if ev := f.events(); !hasEvent(ev, "Warning UnexpectedJob") {
		t.Errorf("events %v", ev)
	}
}

// The cached CronJob lags: it still lists a Job an earlier sync found
// missing and lacks the Job it then started. The sync goes on with the
// apiserver's copy: no second MissingJob event, no second Job for the
// same schedule, and the status written is the current one.
func TestLaggingCacheGoesOnWithFreshCronJob(t *testing.T) {
	cj := newCronJob("c", "0 * * * *", mustTime(t, "2026-01-01T00:30:00Z"))
	prev, last := mustTime(t, "2026-01-01T00:00:00Z"), mustTime(t, "2026-01-01T01:00:00Z")
	gone := childJob(t, cj, prev, "")
	running := childJob(t, cj, last, "")
	cached := cj.DeepCopy()
	cached.Status.Active = []corev1.ObjectReference{activeRef(gone)}
	cached.Status.LastScheduleTime = &metav1.Time{Time: prev}

	f := newFixture(t, last.Add(10*time.Minute), cached, running)
	current := cached.DeepCopy()
	current.Status.Active = []corev1.ObjectReference{activeRef(running)}
	current.Status.LastScheduleTime = &metav1.Time{Time: last}
	if _, err := f.client.BatchV1().CronJobs(ns).UpdateStatus(context.Background(), current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()

	wantRequeue(t, f.sync(t, "c"), 50*time.Minute+nextScheduleDelta)
	if ev := f.events(); hasEvent(ev, "Normal MissingJob") || hasEvent(ev, "Warning UnexpectedJob") {
		t.Errorf("events %v", ev)
	}
	if got := f.created(); len(got) != 0 {
		t.Errorf("created %d Jobs, want none", len(got))
	}
	st := f.status(t, "c")
	if len(st.Active) != 1 || st.Active[0].UID != running.UID || st.LastScheduleTime == nil || !st.LastScheduleTime.Time.Equal(last) {
		t.Errorf("status %+v", st)
	}
}

func TestInvalidScheduleEmitsEventAndDoesNotRequeue(t *testing.T) {
	for _, tc := range []struct{ schedule, reason string }{
		{"not a schedule", "Warning UnparseableSchedule"},
		{"59 23 31 2 *", "Warning InvalidSchedule"}, // never fires
	} {
		t.Run(tc.schedule, func(t *testing.T) {
			cj := newCronJob("c", tc.schedule, mustTime(t, "2026-01-01T00:30:00Z"))
			f := newFixture(t, mustTime(t, "2026-01-02T00:00:00Z"), cj)
			// Through the work loop: the key is forgotten, not requeued.
			f.jm.queue.Add(ns + "/c")
			loop := controller.WorkLoop[string]{Name: queueName, Queue: f.jm.queue, Sync: f.jm.syncKey}
			loop.ProcessNextWorkItem(context.Background())
			if n := f.jm.queue.Len(); n != 0 {
				t.Fatalf("queue length %d after an invalid schedule", n)
			}
			if n := f.jm.queue.NumRequeues(ns + "/c"); n != 0 {
				t.Fatalf("%d rate-limited requeues", n)
			}
			if ev := f.events(); !hasEvent(ev, tc.reason) {
				t.Errorf("events %v, want %s", ev, tc.reason)
			}
			if len(f.created()) != 0 {
				t.Error("created a job")
			}
			f.jm.queue.ShutDown()
		})
	}
}

func TestUpdateToInvalidScheduleEmitsEvent(t *testing.T) {
	cj := newCronJob("c", "* * * * *", mustTime(t, "2026-01-01T00:30:00Z"))
	f := newFixture(t, mustTime(t, "2026-01-01T00:40:00Z"), cj)
	bad := cj.DeepCopy()
	bad.Spec.Schedule = "bogus"
	f.jm.updateCronJob(klog.Background(), cj, bad)
	if ev := f.events(); !hasEvent(ev, "Warning UnParseableCronJobSchedule") {
		t.Errorf("events %v", ev)
	}
	if f.jm.queue.Len() != 0 {
		t.Error("queued a cronjob with an unparseable schedule")
	}
	f.jm.queue.ShutDown()
}

func TestTooManyMissedTimes(t *testing.T) {
	cj := newCronJob("c", "* * * * *", mustTime(t, "2026-01-01T00:00:00Z"))
	f := newFixture(t, mustTime(t, "2026-01-01T05:00:30Z"), cj)
	f.sync(t, "c")
	if ev := f.events(); !hasEvent(ev, "Warning TooManyMissedTimes") {
		t.Errorf("events %v", ev)
	}
	// Only the most recent missed time is started.
	c := f.created()
	if len(c) != 1 || c[0].Name != jobName(cj, mustTime(t, "2026-01-01T05:00:00Z")) {
		t.Fatalf("created %v", c)
	}
}

func TestTimeZone(t *testing.T) {
	cj := newCronJob("c", "0 9 * * *", mustTime(t, "2026-01-01T12:00:00Z"))
	cj.Spec.TimeZone = ptr.To("Asia/Tokyo") // UTC+9: 09:00 there is 00:00 UTC
	f := newFixture(t, mustTime(t, "2026-01-02T00:00:01Z"), cj)
	wantRequeue(t, f.sync(t, "c"), 24*time.Hour-time.Second+nextScheduleDelta)
	c := f.created()
	if len(c) != 1 {
		t.Fatalf("created %d jobs", len(c))
	}
	if got := c[0].Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-01-02T09:00:00+09:00" {
		t.Errorf("annotation %q", got)
	}
	if want := jobName(cj, mustTime(t, "2026-01-02T00:00:00Z")); c[0].Name != want {
		t.Errorf("name %q, want %q", c[0].Name, want)
	}

	// Not yet 09:00 in Tokyo although 09:00 UTC has passed a day earlier.
	cj2 := newCronJob("d", "0 9 * * *", mustTime(t, "2026-01-01T12:00:00Z"))
	cj2.Spec.TimeZone = ptr.To("Asia/Tokyo")
	f = newFixture(t, mustTime(t, "2026-01-01T23:00:00Z"), cj2)
	wantRequeue(t, f.sync(t, "d"), time.Hour+nextScheduleDelta)
	if len(f.created()) != 0 {
		t.Fatal("started early")
	}
}

func TestInvalidTimeZone(t *testing.T) {
	cj := newCronJob("c", "* * * * *", mustTime(t, "2026-01-01T00:00:00Z"))
	cj.Spec.TimeZone = ptr.To("Mars/Olympus")
	f := newFixture(t, mustTime(t, "2026-01-01T00:05:00Z"), cj)
	if d := f.sync(t, "c"); d != nil {
		t.Fatalf("requeued after %v", *d)
	}
	if ev := f.events(); !hasEvent(ev, "Warning UnknownTimeZone") {
		t.Errorf("events %v", ev)
	}
	if len(f.created()) != 0 {
		t.Fatal("created a job")
	}
}

func TestTZInScheduleIsWarnedButHonoured(t *testing.T) {
	cj := newCronJob("c", "CRON_TZ=Asia/Tokyo 0 9 * * *", mustTime(t, "2026-01-01T12:00:00Z"))
	f := newFixture(t, mustTime(t, "2026-01-02T00:00:01Z"), cj)
	f.sync(t, "c")
	if ev := f.events(); !hasEvent(ev, "Warning UnsupportedSchedule") {
		t.Errorf("events %v", ev)
	}
	if len(f.created()) != 1 {
		t.Fatal("did not start at 09:00 Tokyo")
	}
}

func TestMostRecentScheduleTime(t *testing.T) {
	for _, tc := range []struct {
		name, schedule, created, last, now string
		deadline                           *int64
		want                               string // "" for none
		missed                             missed
	}{
		{name: "before first", schedule: "0 * * * *", created: "2026-01-01T09:30:00Z", now: "2026-01-01T09:59:59Z"},
		{name: "first", schedule: "0 * * * *", created: "2026-01-01T09:30:00Z", now: "2026-01-01T10:00:00Z", want: "2026-01-01T10:00:00Z"},
		{name: "several missed", schedule: "0 * * * *", created: "2026-01-01T09:30:00Z", now: "2026-01-01T13:10:00Z", want: "2026-01-01T13:00:00Z", missed: missedFew},
		{name: "from last schedule", schedule: "*/10 * * * *", created: "2026-01-01T00:00:00Z", last: "2026-01-01T10:00:00Z", now: "2026-01-01T10:15:00Z", want: "2026-01-01T10:10:00Z"},
		{name: "irregular", schedule: "30 6-16/4 * * 1-5", created: "2026-01-05T00:00:00Z", now: "2026-01-06T15:00:00Z", want: "2026-01-06T14:30:00Z", missed: missedFew},
		{name: "every", schedule: "@every 1h", created: "2026-01-01T00:00:00Z", now: "2026-01-01T05:30:00Z", want: "2026-01-01T05:00:00Z", missed: missedFew},
		{name: "many", schedule: "* * * * *", created: "2026-01-01T00:00:00Z", now: "2026-01-01T02:00:00Z", want: "2026-01-01T02:00:00Z", missed: missedMany},
		{name: "deadline clamps", schedule: "* * * * *", created: "2026-01-01T00:00:00Z", now: "2026-01-01T02:00:30Z", deadline: ptr.To[int64](60), want: "2026-01-01T02:00:00Z", missed: missedNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := newCronJob("c", tc.schedule, mustTime(t, tc.created))
			if tc.last != "" {
				cj.Status.LastScheduleTime = &metav1.Time{Time: mustTime(t, tc.last)}
			}
			cj.Spec.StartingDeadlineSeconds = tc.deadline
			sched, err := parseSchedule(tc.schedule)
			if err != nil {
				t.Fatal(err)
			}
			_, got, m, err := mostRecentScheduleTime(cj, mustTime(t, tc.now), sched, true)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("got %v, want none", got)
			case tc.want != "" && (got == nil || !got.Equal(mustTime(t, tc.want))):
				t.Fatalf("got %v, want %s", got, tc.want)
			}
			if m != tc.missed {
				t.Errorf("missed %v, want %v", m, tc.missed)
			}
		})
	}
}

func TestJobHandlersEnqueueOwner(t *testing.T) {
	cj := newCronJob("c", "* * * * *", mustTime(t, "2026-01-01T00:00:00Z"))
	f := newFixture(t, mustTime(t, "2026-01-01T00:00:30Z"), cj)
	defer f.jm.queue.ShutDown()
	j := childJob(t, cj, mustTime(t, "2026-01-01T00:01:00Z"), "")
	f.jm.addJob(j)
	if f.jm.queue.Len() != 1 {
		t.Fatalf("queue length %d after addJob", f.jm.queue.Len())
	}
	orphan := j.DeepCopy()
	orphan.OwnerReferences = nil
	orphan.Name = "orphan"
	f.jm.deleteJob(orphan)
	if f.jm.queue.Len() != 1 {
		t.Fatalf("an orphan woke a cronjob")
	}
}

// TestRunRequeuesAtNextSchedule runs the whole controller: the first sync
// finds nothing due and requeues the key for just after the next start
// time; no event wakes it, yet the Job is created then.
func TestRunRequeuesAtNextSchedule(t *testing.T) {
	due := mustTime(t, "2026-01-01T10:00:00Z")
	cj := newCronJob("c", "0 * * * *", due.Add(-30*time.Minute))
	client := fake.NewClientset(cj)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := clocktesting.NewFakeClock(due.Add(-500 * time.Millisecond))
	jm, err := NewControllerWithClock(context.Background(), factory.Batch().V1().Jobs(), factory.Batch().V1().CronJobs(), client, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { jm.Run(ctx, 1); close(done) }()
	defer func() { cancel(); <-done }()

	// Let the first sync run and requeue (after 600ms of real time).
	time.Sleep(200 * time.Millisecond)
	jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Fatalf("jobs before the start time: %v (%v)", jobs, err)
	}
	clk.SetTime(due.Add(time.Second))
	deadline := time.Now().Add(5 * time.Second)
	for {
		jobs, err := client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) == 1 {
			if want := jobName(cj, due); jobs.Items[0].Name != want {
				t.Fatalf("job %q, want %q", jobs.Items[0].Name, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no Job after the requeue")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
