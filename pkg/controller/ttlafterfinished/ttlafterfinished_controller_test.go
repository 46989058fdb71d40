package ttlafterfinished

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func finishedJob(name string, finishedAt time.Time, ttl *int32, cond batch.JobConditionType) *batch.Job {
	return &batch.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       batch.JobSpec{TTLSecondsAfterFinished: ttl},
		Status: batch.JobStatus{Conditions: []batch.JobCondition{{
			Type: cond, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(finishedAt),
		}}},
	}
}

func setup(t *testing.T, job *batch.Job) (*Controller, *fake.Clientset, *testingclock.FakeClock) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(job)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tc := newWithClock(ctx, factory.Batch().V1().Jobs(), client, clk)
	t.Cleanup(tc.queue.ShutDown)
	if err := factory.Batch().V1().Jobs().Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	return tc, client, clk
}

func deletes(c *fake.Clientset) []clienttesting.DeleteActionImpl {
	var out []clienttesting.DeleteActionImpl
	for _, a := range c.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestDeletesAfterTTL(t *testing.T) {
	for _, cond := range []batch.JobConditionType{batch.JobComplete, batch.JobFailed} {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		job := finishedJob("j", now.Add(-11*time.Second), ptr.To[int32](10), cond)
		tc, client, _ := setup(t, job)
		_, ctx := ktesting.NewTestContext(t)
		if err := tc.processJob(ctx, "ns/j"); err != nil {
			t.Fatal(err)
		}
		d := deletes(client)
		if len(d) != 1 {
			t.Fatalf("%s: deletes = %v", cond, client.Actions())
		}
		opts := d[0].DeleteOptions
		if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationForeground ||
			opts.Preconditions == nil || *opts.Preconditions.UID != job.UID ||
			opts.Preconditions.ResourceVersion == nil || *opts.Preconditions.ResourceVersion != job.ResourceVersion {
			t.Errorf("delete options = %+v", opts)
		}
		// The cached Job is current: no live read.
		if n := len(client.Actions()); n != 1 {
			t.Errorf("%s: actions = %v, want the delete only", cond, client.Actions())
		}
	}
}

// refuseStaleDeletes makes the fake client honour a delete's
// resourceVersion precondition, as the API server does.
func refuseStaleDeletes(client *fake.Clientset) {
	client.PrependReactor("delete", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteActionImpl)
		pre := d.DeleteOptions.Preconditions
		if pre == nil || pre.ResourceVersion == nil {
			return false, nil, nil
		}
		live, err := client.Tracker().Get(a.GetResource(), d.Namespace, d.Name)
		if err != nil {
			return false, nil, nil
		}
		if live.(*batch.Job).ResourceVersion != *pre.ResourceVersion {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.Name, fmt.Errorf("precondition failed"))
		}
		return false, nil, nil
	})
}

// A cached Job whose TTL has expired is not deleted when the live Job has
// since been given a longer TTL: the delete at the cached version is
// refused, and the live read finds the TTL not expired.
func TestStaleCacheDoesNotDeleteChangedJob(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cached := finishedJob("j", now.Add(-11*time.Second), ptr.To[int32](10), batch.JobComplete)
	cached.ResourceVersion = "1"
	tc, client, _ := setup(t, cached)
	refuseStaleDeletes(client)
	live := cached.DeepCopy()
	live.ResourceVersion = "2"
	live.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	if err := client.Tracker().Update(batch.SchemeGroupVersion.WithResource("jobs"), live, "ns"); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	_, ctx := ktesting.NewTestContext(t)
	if err := tc.processJob(ctx, "ns/j"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if want := []string{"delete", "get"}; !slices.Equal(verbs, want) {
		t.Errorf("actions = %v, want %v", verbs, want)
	}
	if _, err := client.Tracker().Get(batch.SchemeGroupVersion.WithResource("jobs"), "ns", "j"); err != nil {
		t.Errorf("job deleted: %v", err)
	}

	// Positive control: with the live Job expired too, the fresh read is
	// deleted.
	live.ResourceVersion = "3"
	live.Spec.TTLSecondsAfterFinished = ptr.To[int32](10)
	if err := client.Tracker().Update(batch.SchemeGroupVersion.WithResource("jobs"), live, "ns"); err != nil {
		t.Fatal(err)
	}
	if err := tc.processJob(ctx, "ns/j"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Tracker().Get(batch.SchemeGroupVersion.WithResource("jobs"), "ns", "j"); !apierrors.IsNotFound(err) {
		t.Errorf("expired job not deleted: %v", err)
	}
}

// A Job deleted by someone else after it was cached is done with: the
// delete's NotFound is success, not an error to retry.
func TestCachedJobAlreadyGone(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := finishedJob("j", now.Add(-11*time.Second), ptr.To[int32](10), batch.JobComplete)
	tc, client, _ := setup(t, job)
	if err := client.Tracker().Delete(batch.SchemeGroupVersion.WithResource("jobs"), "ns", "j"); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	_, ctx := ktesting.NewTestContext(t)
	if err := tc.processJob(ctx, "ns/j"); err != nil {
		t.Errorf("processJob = %v, want nil for a Job already gone", err)
	}
	if d := deletes(client); len(d) != 1 {
		t.Errorf("actions = %v, want one delete attempt", client.Actions())
	}
}

func TestWaitsForTTL(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := finishedJob("j", now.Add(-5*time.Second), ptr.To[int32](10), batch.JobComplete)
	tc, client, clk := setup(t, job)
	_, ctx := ktesting.NewTestContext(t)
	if err := tc.processJob(ctx, "ns/j"); err != nil {
		t.Fatal(err)
	}
	if len(deletes(client)) != 0 {
		t.Fatal("deleted before the TTL")
	}
	// Requeued for the expiry, 5s from now.
	clk.Step(6 * time.Second)
	for i := 0; i < 200 && tc.queue.Len() == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if tc.queue.Len() != 1 {
		t.Fatal("not requeued at expiry")
	}
	if err := tc.processJob(ctx, "ns/j"); err != nil {
		t.Fatal(err)
	}
	if len(deletes(client)) != 1 {
		t.Fatal("not deleted at expiry")
	}
}

func TestIgnoresUnfinishedOrNoTTL(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	noTTL := finishedJob("a", now.Add(-time.Hour), nil, batch.JobComplete)
	running := finishedJob("b", now.Add(-time.Hour), ptr.To[int32](0), batch.JobSuspended)
	for _, j := range []*batch.Job{noTTL, running} {
		tc, client, _ := setup(t, j)
		tc.onJob(klogger(t), j)
		if tc.queue.Len() != 0 {
			t.Errorf("%s queued", j.Name)
		}
		_, ctx := ktesting.NewTestContext(t)
		if err := tc.processJob(ctx, "ns/"+j.Name); err != nil {
			t.Fatal(err)
		}
		if len(deletes(client)) != 0 {
			t.Errorf("%s deleted", j.Name)
		}
	}
}

func klogger(t *testing.T) klog.Logger {
	l, _ := ktesting.NewTestContext(t)
	return l
}
