package disruption

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// An integer minAvailable counts the selected pods themselves: every pod
// raises expectedPods, ready ones raise currentHealthy, and disruptions are
// allowed once more than minAvailable are ready.
func TestMinAvailableIntegerCountsSelectedPods(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(3)))
	f.mustSync("pdb")
	f.expectStatus("pdb", 0, 0, 3, 0, map[string]metav1.Time{})

	var pods []*v1.Pod
	for i := int32(1); i <= 4; i++ {
		p := readyPod(fmt.Sprintf("p%d", i))
		pods = append(pods, p)
		f.add(p)
		f.mustSync("pdb")
		f.expectStatus("pdb", max(i-3, 0), i, 3, i, map[string]metav1.Time{})
	}

	// Pods the selector or namespace exclude do not count.
	other := readyPod("other")
	other.Labels = map[string]string{"app": "db"}
	elsewhere := readyPod("elsewhere")
	elsewhere.Namespace = "other-ns"
	f.add(other, elsewhere)
	f.mustSync("pdb")
	f.expectStatus("pdb", 1, 4, 3, 4, map[string]metav1.Time{})

	// A pod going unready takes the allowance away.
	p0 := pods[0].DeepCopy()
	p0.Status.Conditions = nil
	f.add(p0)
	f.mustSync("pdb")
	f.expectStatus("pdb", 0, 3, 3, 4, map[string]metav1.Time{})
}

// Terminating pods are expected but not healthy.
func TestTerminatingPodIsNotHealthy(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)))
	gone := readyPod("gone")
	gone.DeletionTimestamp = &metav1.Time{Time: f.clock.Now()}
	f.add(readyPod("a"), readyPod("b"), gone)
	f.mustSync("pdb")
	f.expectStatus("pdb", 1, 2, 1, 3, map[string]metav1.Time{})
}

// In policy/v1 an empty selector selects every pod of the namespace, while
// a missing selector selects none.
func TestSelectorEmptyVersusNil(t *testing.T) {
	f := newFixture(t)
	empty := minAvailablePDB("empty", intstr.FromInt32(1))
	empty.Spec.Selector = &metav1.LabelSelector{}
	none := minAvailablePDB("none", intstr.FromInt32(1))
	none.Spec.Selector = nil
	unlabelled := readyPod("unlabelled")
	unlabelled.Labels = nil
	f.add(empty, none, unlabelled, readyPod("labelled"))

	f.mustSync("empty")
	f.expectStatus("empty", 1, 2, 1, 2, map[string]metav1.Time{})
	f.mustSync("none")
	f.expectStatus("none", 0, 0, 1, 0, map[string]metav1.Time{})
}

// maxUnavailable counts the replicas of the pods' controller, not the pods,
// and follows the controller's scale.
func TestMaxUnavailableFollowsControllerScale(t *testing.T) {
	f := newFixture(t)
	f.add(maxUnavailablePDB("pdb", intstr.FromInt32(2)))
	rs := newRS("rs", 7)
	f.add(rs, ownedBy(readyPod("p"), rsKind, rs))
	f.mustSync("pdb")
	f.expectStatus("pdb", 0, 1, 5, 7, map[string]metav1.Time{})

	rs = rs.DeepCopy()
	rs.Spec.Replicas = ptr.To[int32](5)
	f.add(rs)
	f.mustSync("pdb")
	f.expectStatus("pdb", 0, 1, 3, 5, map[string]metav1.Time{})
}

// desiredHealthy never goes below zero when maxUnavailable exceeds the scale.
func TestMaxUnavailableAboveScaleClampsDesired(t *testing.T) {
	f := newFixture(t)
	f.add(maxUnavailablePDB("pdb", intstr.FromInt32(10)))
	rs := newRS("rs", 3)
	f.add(rs)
	for i := range 3 {
		f.add(ownedBy(readyPod(fmt.Sprintf("p%d", i)), rsKind, rs))
	}
	f.mustSync("pdb")
	f.expectStatus("pdb", 3, 3, 0, 3, map[string]metav1.Time{})
}

// Percentages are taken of the controllers' total scale, rounding up.
func TestPercentagesRoundUp(t *testing.T) {
	cases := []struct {
		name           string
		pdb            *policy.PodDisruptionBudget
		replicas       int32
		ready          int
		allowed        int32
		desired        int32
		expectedPods   int32
		useRC, useSSet bool
	}{
		// 30% of 7 is 2.1, rounded up to 3 unavailable: 4 must stay.
		{name: "maxUnavailable 30% of 7", pdb: maxUnavailablePDB("pdb", intstr.FromString("30%")), replicas: 7, ready: 1, desired: 4, expectedPods: 7},
		{name: "maxUnavailable 30% of 3", pdb: maxUnavailablePDB("pdb", intstr.FromString("30%")), replicas: 3, ready: 3, allowed: 1, desired: 2, expectedPods: 3},
		// 34% of 3 is 1.02, rounded up to 2.
		{name: "minAvailable 34% of RC 3", pdb: minAvailablePDB("pdb", intstr.FromString("34%")), replicas: 3, ready: 3, allowed: 1, desired: 2, expectedPods: 3, useRC: true},
		{name: "minAvailable 34% of StatefulSet 3", pdb: minAvailablePDB("pdb", intstr.FromString("34%")), replicas: 3, ready: 2, desired: 2, expectedPods: 3, useSSet: true},
		{name: "minAvailable 20% of 10", pdb: minAvailablePDB("pdb", intstr.FromString("20%")), replicas: 10, ready: 1, desired: 2, expectedPods: 10},
		{name: "minAvailable 1% of 2", pdb: minAvailablePDB("pdb", intstr.FromString("1%")), replicas: 2, ready: 2, allowed: 1, desired: 1, expectedPods: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.add(tc.pdb)
			for i := range tc.ready {
				p := readyPod(fmt.Sprintf("p%d", i))
				switch {
				case tc.useRC:
					rc := newRC("ctrl", tc.replicas)
					f.add(rc, ownedBy(p, rcKind, rc))
				case tc.useSSet:
					ss := newSS("ctrl", tc.replicas)
					f.add(ss, ownedBy(p, ssKind, ss))
				default:
					rs := newRS("ctrl", tc.replicas)
					f.add(rs, ownedBy(p, rsKind, rs))
				}
			}
			f.mustSync("pdb")
			f.expectStatus("pdb", tc.allowed, int32(tc.ready), tc.desired, tc.expectedPods, map[string]metav1.Time{})
		})
	}
}

// expectedPods sums each distinct controller once: a Deployment's replicas
// stand for all its ReplicaSets, and different controllers add up.
func TestExpectedPodsSumsDistinctControllers(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromString("50%")))
	d := newDeployment("d", 10)
	oldRS := rsOfDeployment("d-old", 4, d)
	newRS1 := rsOfDeployment("d-new", 6, d)
	rc := newRC("rc", 3)
	f.add(d, oldRS, newRS1, rc,
		ownedBy(readyPod("old"), rsKind, oldRS),
		ownedBy(readyPod("new"), rsKind, newRS1),
		ownedBy(readyPod("rc-1"), rcKind, rc),
		ownedBy(readyPod("rc-2"), rcKind, rc))
	f.mustSync("pdb")
	// 10 (Deployment) + 3 (RC) = 13; 50% rounds up to 7.
	f.expectStatus("pdb", 0, 4, 7, 13, map[string]metav1.Time{})
}

// A custom controller is counted through its scale subresource.
func TestScaleSubresourceController(t *testing.T) {
	f := newFixture(t)
	f.scale.AddReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns, UID: "uid-w"}, Spec: autoscalingv1.ScaleSpec{Replicas: 10}}, nil
	})
	f.add(maxUnavailablePDB("pdb", intstr.FromInt32(5)))
	widget := &metav1.ObjectMeta{Name: "w", Namespace: ns, UID: "uid-w"}
	for i := range 4 {
		f.add(ownedBy(readyPod(fmt.Sprintf("p%d", i)), widgetGVK, widget))
	}
	f.mustSync("pdb")
	// 10 wanted, 5 must stay, 4 ready: none may go.
	f.expectStatus("pdb", 0, 4, 5, 10, map[string]metav1.Time{})
	for _, a := range f.scale.Actions() {
		if a.GetResource().Resource != "widgets" || a.GetSubresource() != "scale" {
			t.Errorf("unexpected scale action %v", a)
		}
	}
}

// Pods without a controller are skipped when counting the scale: the budget
// is computed without them (no SyncFailed) and the user gets a warning.
func TestUnmanagedPods(t *testing.T) {
	cases := map[string]*policy.PodDisruptionBudget{
		"minAvailable percentage": minAvailablePDB("pdb", intstr.FromString("28%")),
		"maxUnavailable integer":  maxUnavailablePDB("pdb", intstr.FromInt32(1)),
	}
	for name, pdb := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.add(pdb)
			f.mustSync("pdb")
			f.expectStatus("pdb", 0, 0, 0, 0, map[string]metav1.Time{})

			f.add(readyPod("naked"))
			f.mustSync("pdb")
			f.expectStatus("pdb", 0, 1, 0, 0, map[string]metav1.Time{})
			f.expectEvent(`Warning UnmanagedPods Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an integer value.`)
		})
	}
}

// Managed pods still count next to an unmanaged one.
func TestUnmanagedPodNextToManagedOnes(t *testing.T) {
	f := newFixture(t)
	f.add(maxUnavailablePDB("pdb", intstr.FromInt32(1)))
	rs := newRS("rs", 3)
	f.add(rs, readyPod("rogue"))
	for i := range 3 {
		f.add(ownedBy(readyPod(fmt.Sprintf("p%d", i)), rsKind, rs))
	}
	f.mustSync("pdb")
	f.expectStatus("pdb", 2, 4, 2, 3, map[string]metav1.Time{})
	f.expectEvent("Warning UnmanagedPods ")
}

// The minAvailable integer form needs no controllers, so no warning.
func TestIntegerMinAvailableIgnoresControllers(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)), readyPod("a"), readyPod("b"))
	f.mustSync("pdb")
	f.expectStatus("pdb", 1, 2, 1, 2, map[string]metav1.Time{})
	for _, e := range f.events() {
		if strings.Contains(e, "UnmanagedPods") {
			t.Fatalf("unexpected event %q", e)
		}
	}
}

// When the expected count cannot be computed the budget fails safe:
// disruptionsAllowed 0 and DisruptionAllowed=False/SyncFailed carrying the
// error, whatever the previous status allowed.
func TestUnresolvableControllerFailsSafe(t *testing.T) {
	cases := map[string]struct {
		owner    func(*v1.Pod) *v1.Pod
		setup    func(*fixture)
		errorMsg string
		events   string
	}{
		"unknown kind": {
			owner: func(p *v1.Pod) *v1.Pod {
				return ownedBy(p, schema.GroupVersionKind{Group: "apps.test.io", Version: "v1", Kind: "TestWorkload"}, &metav1.ObjectMeta{Name: "x", UID: "uid-x"})
			},
			errorMsg: `no matches for kind "TestWorkload" in version "apps.test.io/v1"`,
		},
		"controller object of another incarnation": {
			owner: func(p *v1.Pod) *v1.Pod {
				return ownedBy(p, widgetGVK, &metav1.ObjectMeta{Name: "w", UID: "uid-old"})
			},
			setup: func(f *fixture) {
				f.scale.AddReactor("get", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "uid-new"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, nil
				})
			},
			errorMsg: `found no controllers for pod "p"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			pdb := minAvailablePDB("pdb", intstr.FromString("10%"))
			pdb.Status = policy.PodDisruptionBudgetStatus{
				ObservedGeneration: 1, DisruptionsAllowed: 3, CurrentHealthy: 4, DesiredHealthy: 1, ExpectedPods: 4,
				Conditions: []metav1.Condition{{Type: policy.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policy.SufficientPodsReason}},
			}
			f.add(pdb, tc.owner(readyPod("p")))
			// The failSafe write went through: nothing to retry.
			f.mustSync("pdb")
			got := f.cached("pdb")
			if got.Status.DisruptionsAllowed != 0 {
				t.Fatalf("disruptionsAllowed = %d, want 0", got.Status.DisruptionsAllowed)
			}
			// Only disruptionsAllowed changes; the other counters stay.
			if got.Status.CurrentHealthy != 4 || got.Status.ExpectedPods != 4 {
				t.Fatalf("failSafe changed other counters: %+v", got.Status)
			}
			c := f.expectCondition("pdb", metav1.ConditionFalse, policy.SyncFailedReason)
			if c.Message != tc.errorMsg {
				t.Fatalf("condition message = %q, want %q", c.Message, tc.errorMsg)
			}
			f.expectEvent("Warning CalculateExpectedPodCountFailed Failed to calculate the number of expected pods: " + tc.errorMsg)
			if n := f.writeCount(); n != 1 {
				t.Fatalf("%d writes, want 1", n)
			}
		})
	}
}

// An invalid selector fails safe too, after a NoPods warning.
func TestInvalidSelectorFailsSafe(t *testing.T) {
	f := newFixture(t)
	pdb := minAvailablePDB("pdb", intstr.FromInt32(3))
	pdb.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "foo", Operator: "illegal", Values: []string{"bar"}}}}
	f.add(pdb, readyPod("p"))
	f.mustSync("pdb")
	got := f.cached("pdb")
	if got.Status.DisruptionsAllowed != 0 || got.Status.CurrentHealthy != 0 || got.Status.ExpectedPods != 0 {
		t.Fatalf("status = %+v", got.Status)
	}
	f.expectCondition("pdb", metav1.ConditionFalse, policy.SyncFailedReason)
	f.expectEvent(`Warning NoPods Failed to get pods: "illegal" is not a valid label selector operator`)
}

func TestNoMatchingPodsEvent(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)))
	f.mustSync("pdb")
	f.expectEvent("Normal NoPods No matching pods found")
}

// If even the failSafe write fails, the error goes back to the queue.
func TestFailSafeWriteErrorIsReturned(t *testing.T) {
	f := newFixture(t)
	f.writeErr = func(*policy.PodDisruptionBudget) error { return errors.New("apiserver down") }
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)))
	err := f.sync("pdb")
	if err == nil || err.Error() != "apiserver down" {
		t.Fatalf("sync error = %v", err)
	}
	// The regular write and then the failSafe one were attempted.
	if n := f.writeCount(); n != 2 {
		t.Fatalf("%d writes, want 2", n)
	}
	if c := apimeta.FindStatusCondition(f.writes[1].Status.Conditions, policy.DisruptionAllowedCondition); c == nil || c.Reason != policy.SyncFailedReason || c.Message != "apiserver down" {
		t.Fatalf("failSafe condition = %+v", c)
	}
}

// A write conflict means another writer (the eviction handler) got there
// first: the key is retried from fresh data, without failSafe.
func TestConflictIsRetriedWithoutFailSafe(t *testing.T) {
	f := newFixture(t)
	f.writeErr = func(pdb *policy.PodDisruptionBudget) error {
		return apierrors.NewConflict(policy.Resource("poddisruptionbudgets"), pdb.Name, errors.New("changed"))
	}
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)), readyPod("a"), readyPod("b"))
	if err := f.sync("pdb"); !apierrors.IsConflict(err) {
		t.Fatalf("sync error = %v, want a conflict", err)
	}
	if n := f.writeCount(); n != 1 {
		t.Fatalf("%d writes, want 1 (no failSafe)", n)
	}
}

// The status is written only when something in it changes: a counter, the
// generation observed or the DisruptionAllowed condition.
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)), readyPod("a"), readyPod("b"))
	f.mustSync("pdb")
	f.mustSync("pdb")
	if n := f.writeCount(); n != 1 {
		t.Fatalf("%d writes after two identical syncs, want 1", n)
	}

	// A spec change bumps the generation: observedGeneration follows.
	pdb := f.cached("pdb").DeepCopy()
	pdb.Generation = 2
	f.add(pdb)
	f.mustSync("pdb")
	if n := f.writeCount(); n != 2 {
		t.Fatalf("%d writes, want 2", n)
	}
	f.expectStatus("pdb", 1, 2, 1, 2, map[string]metav1.Time{})

	// A condition left by a failed sync is repaired even when the counters
	// are right.
	pdb = f.cached("pdb").DeepCopy()
	apimeta.SetStatusCondition(&pdb.Status.Conditions, metav1.Condition{Type: policy.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policy.SyncFailedReason})
	f.add(pdb)
	f.mustSync("pdb")
	if n := f.writeCount(); n != 3 {
		t.Fatalf("%d writes, want 3", n)
	}
	f.expectStatus("pdb", 1, 2, 1, 2, map[string]metav1.Time{})
}

// Conditions owned by others survive a status write.
func TestKeepsOtherConditions(t *testing.T) {
	f := newFixture(t)
	pdb := minAvailablePDB("pdb", intstr.FromInt32(3))
	pdb.Status.Conditions = []metav1.Condition{{Type: "ExistingTestCondition", Status: metav1.ConditionTrue, Reason: "Test", Message: "kept", LastTransitionTime: metav1.Now()}}
	f.add(pdb)
	f.mustSync("pdb")
	got := f.cached("pdb")
	if len(got.Status.Conditions) != 2 {
		t.Fatalf("conditions = %+v, want 2", got.Status.Conditions)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, "ExistingTestCondition"); c == nil || c.Message != "kept" {
		t.Fatalf("foreign condition lost: %+v", got.Status.Conditions)
	}
}

// A budget that no longer exists is not an error.
func TestDeletedPDB(t *testing.T) {
	f := newFixture(t)
	if err := f.sync("gone"); err != nil {
		t.Fatal(err)
	}
	if n := f.writeCount(); n != 0 {
		t.Fatalf("%d writes", n)
	}
}

// disruptedPods entries are dropped once the pod terminates or disappears,
// or when they expire (with a NotDeleted event on the pod); pending ones
// keep their pod out of currentHealthy and schedule a recheck for when the
// earliest expires.
func TestDisruptedPods(t *testing.T) {
	f := newFixture(t)
	now := f.clock.Now()
	pdb := minAvailablePDB("pdb", intstr.FromInt32(1))
	pdb.Status.DisruptedPods = map[string]metav1.Time{
		"deleting": {Time: now},                       // eviction went through
		"expired":  {Time: now.Add(-3 * time.Minute)}, // never deleted
		"pending":  {Time: now.Add(-time.Minute)},     // still within the timeout
		"later":    {Time: now.Add(-30 * time.Second)},
		"missing":  {Time: now}, // pod already gone
	}
	deleting := readyPod("deleting")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	f.add(pdb, deleting, readyPod("expired"), readyPod("pending"), readyPod("later"))
	f.mustSync("pdb")

	f.expectStatus("pdb", 0, 1, 1, 4, map[string]metav1.Time{
		"pending": {Time: now.Add(-time.Minute)},
		"later":   {Time: now.Add(-30 * time.Second)},
	})
	f.expectEvent("Warning NotDeleted Pod was expected by PDB default/default to be deleted but it wasn't")

	// The recheck is due when "pending" expires, one minute from now.
	if f.dc.recheckQueue.Len() != 0 {
		t.Fatal("recheck queued too early")
	}
	f.clock.Step(time.Minute - time.Second)
	if f.dc.recheckQueue.Len() != 0 {
		t.Fatal("recheck queued before the entry expired")
	}
	f.clock.Step(time.Second)
	testutil.WaitFor(t, "recheck to be queued", func() bool { return f.dc.recheckQueue.Len() == 1 })

	// Once expired, the pod counts again and its entry goes.
	f.clock.Step(time.Second)
	f.mustSync("pdb")
	f.expectStatus("pdb", 1, 2, 1, 4, map[string]metav1.Time{"later": {Time: now.Add(-30 * time.Second)}})
}

// No disruptedPods, no recheck.
func TestNoRecheckWithoutDisruptedPods(t *testing.T) {
	f := newFixture(t)
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)), readyPod("a"))
	f.mustSync("pdb")
	f.clock.Step(DeletionTimeout + time.Second)
	if f.dc.recheckQueue.Len() != 0 {
		t.Fatal("unexpected recheck")
	}
}

// A budget's pods come from the pod labels index (the fixture's pods carry
// the label the budgets select on).
func TestBudgetPodsComeFromTheLabelsIndex(t *testing.T) {
	f := newFixture(t)
	if _, ok := f.factory.Core().V1().Pods().Informer().GetIndexer().GetIndexers()[controller.PodLabelsIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the pod informer", controller.PodLabelsIndex)
	}
	moved := readyPod("moved")
	f.add(minAvailablePDB("pdb", intstr.FromInt32(1)), readyPod("stays"), moved)
	f.mustSync("pdb")
	f.expectStatus("pdb", 1, 2, 1, 2, map[string]metav1.Time{})

	moved = moved.DeepCopy()
	moved.Labels = map[string]string{"other": "x"}
	f.add(moved)
	f.mustSync("pdb")
	f.expectStatus("pdb", 0, 1, 1, 1, map[string]metav1.Time{})
}
