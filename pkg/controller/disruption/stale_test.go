package disruption

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// podWithDisruptionTarget is a running pod with a True DisruptionTarget
// condition set age ago, next to a Ready condition.
func podWithDisruptionTarget(f *fixture, age time.Duration) *v1.Pod {
	p := readyPod("victim")
	p.Generation = 3
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
		Type:               v1.DisruptionTarget,
		Status:             v1.ConditionTrue,
		Reason:             "EvictionByEvictionAPI",
		Message:            "Eviction API: evicting",
		LastTransitionTime: metav1.NewTime(f.clock.Now().Add(-age)),
	})
	return p
}

// podStatusUpdates returns the pods written through the status subresource.
func (f *fixture) podStatusUpdates() []*v1.Pod {
	var out []*v1.Pod
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "pods" && a.GetSubresource() == "status" {
			out = append(out, u.GetObject().(*v1.Pod))
		}
	}
	return out
}

func (f *fixture) createPod(p *v1.Pod) {
	f.t.Helper()
	if err := f.client.Tracker().Add(p); err != nil {
		f.t.Fatal(err)
	}
	f.add(p)
}

// A True DisruptionTarget older than the timeout on a pod that is not being
// deleted is set to False (reason and message dropped, observedGeneration
// set) with a status update; the other conditions are untouched.
func TestStaleDisruptionTargetIsReset(t *testing.T) {
	f := newFixture(t)
	f.createPod(podWithDisruptionTarget(f, stalePodDisruptionTimeout+time.Second))
	if err := f.dc.syncStalePodDisruption(f.ctx, ns+"/victim"); err != nil {
		t.Fatal(err)
	}
	ups := f.podStatusUpdates()
	if len(ups) != 1 {
		t.Fatalf("%d pod status updates, want 1", len(ups))
	}
	conds := ups[0].Status.Conditions
	if len(conds) != 2 || conds[0].Type != v1.PodReady || conds[0].Status != v1.ConditionTrue {
		t.Fatalf("conditions = %+v", conds)
	}
	want := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(f.clock.Now())}
	if got := conds[1]; !got.LastTransitionTime.Equal(&want.LastTransitionTime) || got.Type != want.Type || got.Status != want.Status ||
		got.Reason != "" || got.Message != "" || got.ObservedGeneration != want.ObservedGeneration {
		t.Fatalf("DisruptionTarget = %+v, want %+v", got, want)
	}
}

// A condition that is not stale yet is looked at again when it will be.
func TestStaleDisruptionTargetNotDueYet(t *testing.T) {
	f := newFixture(t)
	f.createPod(podWithDisruptionTarget(f, time.Minute))
	if err := f.dc.syncStalePodDisruption(f.ctx, ns+"/victim"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.podStatusUpdates()); n != 0 {
		t.Fatalf("%d pod status updates, want 0", n)
	}
	f.clock.Step(time.Minute - time.Second)
	if f.dc.stalePodDisruptionQueue.Len() != 0 {
		t.Fatal("requeued before the condition is stale")
	}
	f.clock.Step(time.Second)
	testutil.WaitFor(t, "the pod to be requeued", func() bool { return f.dc.stalePodDisruptionQueue.Len() == 1 })
}

// The condition is left alone when the disruption is real or harmless.
func TestStaleDisruptionTargetLeftAlone(t *testing.T) {
	cases := map[string]func(*v1.Pod){
		"pod being deleted": func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
		"set by the kubelet": func(p *v1.Pod) {
			p.Status.Conditions[1].Reason = v1.PodReasonTerminationByKubelet
		},
		"pod failed":         func(p *v1.Pod) { p.Status.Phase = v1.PodFailed },
		"pod succeeded":      func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded },
		"condition is false": func(p *v1.Pod) { p.Status.Conditions[1].Status = v1.ConditionFalse },
		"no condition":       func(p *v1.Pod) { p.Status.Conditions = p.Status.Conditions[:1] },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			p := podWithDisruptionTarget(f, time.Hour)
			mutate(p)
			f.createPod(p)
			if err := f.dc.syncStalePodDisruption(f.ctx, ns+"/victim"); err != nil {
				t.Fatal(err)
			}
			if n := len(f.podStatusUpdates()); n != 0 {
				t.Fatalf("%d pod status updates, want 0", n)
			}
			if f.dc.stalePodDisruptionQueue.Len() != 0 {
				t.Fatal("pod requeued")
			}
		})
	}
}

// A pod gone from the cache needs nothing.
func TestStaleDisruptionTargetPodGone(t *testing.T) {
	f := newFixture(t)
	if err := f.dc.syncStalePodDisruption(f.ctx, ns+"/gone"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("%d client actions", n)
	}
}

// A failed write is returned so the queue retries it.
func TestStaleDisruptionTargetWriteError(t *testing.T) {
	f := newFixture(t)
	// In the cache only: the update hits a missing object.
	f.add(podWithDisruptionTarget(f, time.Hour))
	if err := f.dc.syncStalePodDisruption(f.ctx, ns+"/victim"); err == nil {
		t.Fatal("no error")
	}
}
