package daemon

import (
	"errors"
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
)

func TestStatusCounts(t *testing.T) {
	ds := newDS("ds")
	ds.Generation = 3
	ds.Spec.MinReadySeconds = 60
	ds.Spec.UpdateStrategy.Type = apps.OnDeleteDaemonSetStrategyType
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"run": "yes"}
	yes := map[string]string{"run": "yes"}
	f := newFixture(t,
		newNode("avail", yes), newNode("ready", yes), newNode("old", yes), newNode("empty", yes),
		newNode("notready", yes), newNode("mis", nil), newNode("nopod", nil),
	)
	f.addDS(ds)
	h := hashOf(ds)
	f.addToCache(
		newPod("p-avail", ds, "avail", h, ready(2*time.Minute)),
		newPod("p-ready", ds, "ready", h, ready(10*time.Second)),
		newPod("p-old", ds, "old", "oldhash", ready(time.Hour)),
		newPod("p-notready", ds, "notready", h),
		newPod("p-mis", ds, "mis", h, ready(time.Hour)),
	)
	f.mustSync(ds)

	want := apps.DaemonSetStatus{
		ObservedGeneration:     3,
		DesiredNumberScheduled: 5,
		CurrentNumberScheduled: 4,
		NumberMisscheduled:     1,
		NumberReady:            3,
		UpdatedNumberScheduled: 3,
		NumberAvailable:        2,
		NumberUnavailable:      3,
	}
	if got := f.lastStatus(); !reflect.DeepEqual(got, want) {
		t.Errorf("status = %+v\nwant     %+v", got, want)
	}
	// One pod is ready but not yet available: come back after minReadySeconds.
	if d := f.queue.delaysFor(testNS + "/ds"); len(d) != 1 || d[0] != time.Minute {
		t.Errorf("requeue delays = %v, want [1m]", d)
	}
}

func TestStatusOldestPodOfNodeCounts(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	// The older pod is not ready; the younger extra one is. Only the
	// oldest counts.
	f.addToCache(
		newPod("older", ds, "n", hashOf(ds), createdAt(testStart.Add(-time.Hour))),
		newPod("younger", ds, "n", hashOf(ds), createdAt(testStart.Add(-time.Minute)), ready(time.Minute)),
	)
	f.mustSync(ds)
	if st := f.lastStatus(); st.NumberReady != 0 || st.CurrentNumberScheduled != 1 {
		t.Errorf("status = %+v, want 0 ready, 1 current", st)
	}
}

func TestStatusTemplateGenerationCountsAsUpdated(t *testing.T) {
	ds := newDS("ds")
	ds.Annotations[apps.DeprecatedTemplateGeneration] = "4"
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	// A pod of an old controller: no hash, but the current generation.
	p := newPod("p", ds, "n", "")
	p.Labels["pod-template-generation"] = "4"
	f.addToCache(p)
	f.mustSync(ds)
	if st := f.lastStatus(); st.UpdatedNumberScheduled != 1 {
		t.Errorf("updatedNumberScheduled = %d, want 1", st.UpdatedNumberScheduled)
	}
}

func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	ds := newDS("ds")
	ds.Status = apps.DaemonSetStatus{
		ObservedGeneration: 1, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1,
		NumberReady: 1, UpdatedNumberScheduled: 1, NumberAvailable: 1,
	}
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("p", ds, "n", hashOf(ds), ready(time.Hour)))
	f.mustSync(ds)
	if u := f.statusUpdates(); len(u) != 0 {
		t.Errorf("status written although unchanged: %+v", u[0].Status)
	}

	// A newer generation must be recorded even with equal counts.
	ds2 := ds.DeepCopy()
	ds2.Generation = 2
	f.updateDS(ds2)
	f.mustSync(ds2)
	if st := f.lastStatus(); st.ObservedGeneration != 2 {
		t.Errorf("observedGeneration = %d, want 2", st.ObservedGeneration)
	}
}

func TestStatusUpdateRetriesOnConflict(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("p", ds, "n", hashOf(ds)))
	calls := 0
	f.client.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewConflict(apps.Resource("daemonsets"), "ds", errors.New("stale"))
		}
		return false, nil, nil
	})
	f.mustSync(ds)
	if calls != 2 {
		t.Errorf("status writes = %d, want 2 (one retry)", calls)
	}
	got, _ := f.client.AppsV1().DaemonSets(testNS).Get(f.ctx, "ds", metav1.GetOptions{})
	if got.Status.CurrentNumberScheduled != 1 {
		t.Errorf("stored status = %+v", got.Status)
	}
}

func TestStatusDoesNotCountPodsBeingDeletedAsMissing(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("p", ds, "n", hashOf(ds), deleting()))
	f.mustSync(ds)
	// A running pod being deleted still occupies its node.
	if len(f.pc.Templates) != 0 {
		t.Errorf("created a pod while the old one is terminating")
	}
	if st := f.lastStatus(); st.CurrentNumberScheduled != 1 {
		t.Errorf("currentNumberScheduled = %d, want 1", st.CurrentNumberScheduled)
	}
}
