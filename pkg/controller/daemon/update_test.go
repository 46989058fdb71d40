package daemon

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// rollingFixture has n nodes each running an old, available pod of ds.
func rollingFixture(t *testing.T, ds *apps.DaemonSet, n int) *fixture {
	t.Helper()
	f := newFixture(t, nodes(n)...)
	f.addDS(ds)
	for i := 0; i < n; i++ {
		f.addToCache(newPod(fmt.Sprintf("old-%d", i), ds, fmt.Sprintf("node-%d", i), "oldhash", ready(time.Hour)))
	}
	return f
}

func withStrategy(ds *apps.DaemonSet, maxUnavailable, maxSurge intstr.IntOrString) *apps.DaemonSet {
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{
		Type:          apps.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &apps.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge},
	}
	return ds
}

func TestRollingUpdateMaxUnavailable(t *testing.T) {
	tests := []struct {
		name           string
		maxUnavailable intstr.IntOrString
		want           int
	}{
		{"one", intstr.FromInt32(1), 1},
		{"two", intstr.FromInt32(2), 2},
		{"percent rounds up", intstr.FromString("30%"), 2}, // 30% of 5 = 1.5
		{"more than nodes", intstr.FromInt32(9), 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := withStrategy(newDS("ds"), tc.maxUnavailable, intstr.FromInt32(0))
			f := rollingFixture(t, ds, 5)
			f.mustSync(ds)
			if got := len(f.deletedPods()); got != tc.want {
				t.Errorf("deleted %d old pods, want %d", got, tc.want)
			}
			if len(f.pc.Templates) != 0 {
				t.Errorf("created pods while old ones still run")
			}
			if _, del := f.expectations(ds); del != int64(tc.want) {
				t.Errorf("expected deletions = %d, want %d", del, tc.want)
			}
		})
	}
}

func TestRollingUpdateCountsUnavailablePods(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(2), intstr.FromInt32(0))
	f := newFixture(t, nodes(5)...)
	f.addDS(ds)
	h := hashOf(ds)
	f.addToCache(
		// Updated but not ready yet: uses one unit of the budget.
		newPod("new-0", ds, "node-0", h),
		// Old and not ready: replaced whatever the budget.
		newPod("old-1", ds, "node-1", "oldhash"),
		newPod("old-2", ds, "node-2", "oldhash", ready(time.Hour)),
		newPod("old-3", ds, "node-3", "oldhash", ready(time.Hour)),
		newPod("old-4", ds, "node-4", "oldhash", ready(time.Hour)),
	)
	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"old-1"}) {
		t.Errorf("deleted %v, want [old-1]", got)
	}
}

func TestRollingUpdateEmptyNodeCountsUnavailable(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(1), intstr.FromInt32(0))
	f := rollingFixture(t, ds, 2)
	f.addToCache(newNode("empty", nil))
	f.mustSync(ds)
	// manage creates on the empty node; that node uses the whole budget, so
	// the update waits until expectations are met anyway.
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"empty"}) {
		t.Errorf("created on %v, want [empty]", got)
	}
	if len(f.deletedPods()) != 0 {
		t.Errorf("deleted %v while a node has no available pod", f.deletedPods())
	}
	f.observeAll(ds)
	f.pc.Clear()
	f.mustSync(ds)
	if len(f.deletedPods()) != 0 {
		t.Errorf("deleted %v while a node has no available pod", f.deletedPods())
	}
}

func TestRollingUpdateMinReadySeconds(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(1), intstr.FromInt32(0))
	ds.Spec.MinReadySeconds = 600
	f := newFixture(t, nodes(2)...)
	f.addDS(ds)
	f.addToCache(
		newPod("new-0", ds, "node-0", hashOf(ds), ready(time.Minute)), // ready, not available
		newPod("old-1", ds, "node-1", "oldhash", ready(time.Hour)),
	)
	f.mustSync(ds)
	if len(f.deletedPods()) != 0 {
		t.Errorf("deleted %v before the new pod is available", f.deletedPods())
	}
	f.clock.Step(10 * time.Minute)
	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"old-1"}) {
		t.Errorf("deleted %v once available, want [old-1]", got)
	}
}

func TestOnDeleteLeavesOldPods(t *testing.T) {
	ds := newDS("ds")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	f := rollingFixture(t, ds, 3)
	f.mustSync(ds)
	if len(f.deletedPods()) != 0 || len(f.pc.Templates) != 0 {
		t.Errorf("OnDelete replaced pods: deleted %v, created %d", f.deletedPods(), len(f.pc.Templates))
	}
	if st := f.lastStatus(); st.UpdatedNumberScheduled != 0 || st.CurrentNumberScheduled != 3 {
		t.Errorf("status = %+v", st)
	}

	// A deleted pod is replaced from the new template.
	f2 := newFixture(t, nodes(1)...)
	f2.addDS(ds)
	f2.mustSync(ds)
	if len(f2.pc.Templates) != 1 || f2.pc.Templates[0].Labels[apps.DefaultDaemonSetUniqueLabelKey] != hashOf(ds) {
		t.Errorf("replacement not created from the current template: %+v", f2.pc.Templates)
	}
}

func TestRollingUpdateSurge(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromInt32(1))
	f := rollingFixture(t, ds, 3)
	f.mustSync(ds)
	if n := len(f.createdNodes()); n != 1 {
		t.Fatalf("created %d surge pods, want 1", n)
	}
	if len(f.deletedPods()) != 0 {
		t.Errorf("deleted %v before any new pod is available", f.deletedPods())
	}
}

func TestRollingUpdateSurgePercent(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromString("50%"))
	f := rollingFixture(t, ds, 5)
	f.mustSync(ds)
	if n := len(f.createdNodes()); n != 3 { // 50% of 5 rounds up
		t.Errorf("created %d surge pods, want 3", n)
	}
}

func TestRollingUpdateSurgeProgress(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromInt32(1))
	f := newFixture(t, nodes(4)...)
	f.addDS(ds)
	h := hashOf(ds)
	f.addToCache(
		// node-0: surged, the new pod is available: the old pod goes.
		newPod("old-0", ds, "node-0", "oldhash", ready(time.Hour)),
		newPod("new-0", ds, "node-0", h, ready(time.Minute), createdAt(testStart.Add(-time.Minute))),
		// node-1: surged, the new pod is not ready: that uses the budget.
		newPod("old-1", ds, "node-1", "oldhash", ready(time.Hour)),
		newPod("new-1", ds, "node-1", h, createdAt(testStart.Add(-time.Minute))),
		// node-2: old pod unavailable: replaced regardless of the budget.
		newPod("old-2", ds, "node-2", "oldhash"),
		// node-3: old and available: waits for budget.
		newPod("old-3", ds, "node-3", "oldhash", ready(time.Hour)),
	)
	// manage would act on node-0 first; look at the update step alone.
	nodeList, err := f.factory.Core().V1().Nodes().Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.dsc.rollingUpdate(f.ctx, ds, nodeList, h); err != nil {
		t.Fatal(err)
	}
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"old-0"}) {
		t.Errorf("deleted %v, want [old-0]", got)
	}
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-2"}) {
		t.Errorf("created on %v, want [node-2]", got)
	}
}

// With surge, manage keeps the old pod next to a new one until the new one
// is available, and drops it at once if it is not ready.
func TestManageSurgePairs(t *testing.T) {
	tests := []struct {
		name        string
		oldReady    bool
		newReadyFor time.Duration // 0: not ready
		wantDeleted []string
	}{
		{name: "both waiting", oldReady: true},
		{name: "new available", oldReady: true, newReadyFor: time.Minute, wantDeleted: []string{"old"}},
		{name: "old not ready", oldReady: false, wantDeleted: []string{"old"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromInt32(1))
			ds.Spec.UpdateStrategy.Type = apps.RollingUpdateDaemonSetStrategyType
			f := newFixture(t, newNode("n", nil))
			f.addDS(ds)
			var oldOpts, newOpts []podOpt
			if tc.oldReady {
				oldOpts = append(oldOpts, ready(time.Hour))
			}
			if tc.newReadyFor > 0 {
				newOpts = append(newOpts, ready(tc.newReadyFor))
			}
			f.addToCache(
				newPod("old", ds, "n", "oldhash", oldOpts...),
				newPod("new", ds, "n", hashOf(ds), append(newOpts, createdAt(testStart.Add(-time.Minute)))...),
				// A third pod is always excess.
				newPod("new-extra", ds, "n", hashOf(ds), createdAt(testStart.Add(-time.Second))),
			)
			p := newPlacement(ds, false)
			_, del := f.dsc.podsShouldBeOnNode(klog.Background(), newNode("n", nil), map[string][]*v1.Pod{"n": f.cachedPods("old", "new", "new-extra")}, ds, hashOf(ds), p)
			want := append([]string{"new-extra"}, tc.wantDeleted...)
			if !reflect.DeepEqual(del, want) {
				t.Errorf("deleted %v, want %v", del, want)
			}
		})
	}
}

// A surging DaemonSet whose pods must leave a node (NoSchedule taint added)
// only deletes them as far as more pods are available than needed.
func TestSurgeLeavingNodeKeepsAvailability(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromInt32(1))
	taint := v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}
	f := newFixture(t, newNode("a", nil), newNode("b", nil, taint))
	f.addDS(ds)
	f.addToCache(
		newPod("new-a", ds, "a", hashOf(ds), ready(time.Hour)),
		newPod("old-b", ds, "b", "oldhash", ready(time.Hour)),
	)
	f.mustSync(ds)
	// Available: 2, desired: 1 -> one pod may go.
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"old-b"}) {
		t.Errorf("deleted %v, want [old-b]", got)
	}

	f2 := newFixture(t, newNode("a", nil), newNode("b", nil, taint))
	f2.addDS(ds)
	f2.addToCache(
		newPod("new-a", ds, "a", hashOf(ds)), // not yet available
		newPod("old-b", ds, "b", "oldhash", ready(time.Hour)),
	)
	f2.mustSync(ds)
	if got := f2.deletedPods(); len(got) != 0 {
		t.Errorf("deleted %v while it is the only available pod", got)
	}
}

func TestUpdatedDesiredNodeCountsDefaultsToOneUnavailable(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(0), intstr.FromInt32(0))
	f := rollingFixture(t, ds, 3)
	f.mustSync(ds)
	if n := len(f.deletedPods()); n != 1 {
		t.Errorf("deleted %d with maxUnavailable=maxSurge=0, want 1", n)
	}
}

func TestRollingUpdateWaitsForExpectations(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(1), intstr.FromInt32(0))
	f := rollingFixture(t, ds, 2)
	f.addToCache(
		newNode("tainted", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}),
		newPod("old-t", ds, "tainted", "oldhash", ready(time.Hour)),
	)
	f.mustSync(ds)
	// manage evicts old-t; the update waits until that is observed.
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"old-t"}) {
		t.Errorf("deleted %v, want only [old-t]", got)
	}
}

func TestSurgeAllowsSecondPodOnlyWithSurge(t *testing.T) {
	ds := withStrategy(newDS("ds"), intstr.FromInt32(1), intstr.FromInt32(0))
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(
		newPod("old", ds, "n", "oldhash", ready(time.Hour)),
		newPod("new", ds, "n", hashOf(ds), createdAt(testStart.Add(-time.Minute))),
	)
	f.mustSync(ds)
	// Without surge one pod per node: the younger goes.
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"new"}) {
		t.Errorf("deleted %v, want [new]", got)
	}
}
