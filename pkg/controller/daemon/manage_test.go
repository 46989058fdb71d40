package daemon

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
)

func TestCreatesOnePodPerNode(t *testing.T) {
	f := newFixture(t, nodes(3)...)
	ds := newDS("ds")
	f.addDS(ds)
	f.mustSync(ds)

	if got, want := f.createdNodes(), []string{"node-0", "node-1", "node-2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("created on %v, want %v", got, want)
	}
	if add, del := f.expectations(ds); add != 3 || del != 0 {
		t.Errorf("expectations = %d/%d, want 3/0", add, del)
	}
	tmpl := f.pc.Templates[0]
	hash := hashOf(ds)
	if tmpl.Labels[apps.DefaultDaemonSetUniqueLabelKey] != hash || tmpl.Labels[util.TemplateGenerationLabelKey] != "1" || tmpl.Labels["app"] != "ds" {
		t.Errorf("template labels = %v, want app, hash %s and generation 1", tmpl.Labels, hash)
	}
	if len(tmpl.Spec.Tolerations) != 6 {
		t.Errorf("template tolerations = %v, want the 6 daemon defaults", tmpl.Spec.Tolerations)
	}
	ref := f.pc.ControllerRefs[0]
	if ref.Kind != "DaemonSet" || ref.Name != "ds" || ref.UID != ds.UID || !*ref.Controller || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref = %+v", ref)
	}
	// The template in the cache is untouched.
	if ds.Spec.Template.Spec.Affinity != nil || len(ds.Spec.Template.Spec.Tolerations) != 0 || len(ds.Spec.Template.Labels) != 1 {
		t.Errorf("cached DaemonSet template was modified: %+v", ds.Spec.Template)
	}

	// While waiting for the creations nothing more is created.
	f.pc.Clear()
	f.mustSync(ds)
	if len(f.pc.Templates) != 0 {
		t.Errorf("created %d pods before the previous creations were observed", len(f.pc.Templates))
	}
}

func TestCreatedPodsThroughAPI(t *testing.T) {
	f := newFixture(t, newNode("n1", nil))
	f.useRealPodControl()
	ds := newDS("web")
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{
		NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/os", Operator: v1.NodeSelectorOpDoesNotExist}},
			}}},
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 1, Preference: v1.NodeSelectorTerm{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "a", Operator: v1.NodeSelectorOpExists}},
			}}},
		},
	}
	f.addDS(ds)
	f.mustSync(ds)

	pods, err := f.client.CoreV1().Pods(testNS).List(f.ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods = %v, %v", pods, err)
	}
	pod := pods.Items[0]
	if pod.GenerateName != "web-" {
		t.Errorf("generateName = %q, want web-", pod.GenerateName)
	}
	na := pod.Spec.Affinity.NodeAffinity
	wantTerms := []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}}
	if !reflect.DeepEqual(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, wantTerms) {
		t.Errorf("required terms = %+v, want only the node pin", na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms)
	}
	if len(na.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("preferred terms dropped: %+v", na)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("pod bound by the controller to %q; the scheduler binds daemon pods", pod.Spec.NodeName)
	}
	if ev := f.events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal SuccessfulCreate Created pod: web-") {
		t.Errorf("events = %v", ev)
	}
	// The template's own affinity in the cache is untouched.
	if got := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions; len(got) != 1 {
		t.Errorf("cached template affinity modified: %+v", got)
	}
}

func TestEligibility(t *testing.T) {
	tests := []struct {
		name   string
		tweak  func(*apps.DaemonSet)
		node   *v1.Node
		create bool
	}{
		{name: "plain node", node: newNode("n", nil), create: true},
		{name: "nodeSelector matches", tweak: withNodeSelector, node: newNode("n", map[string]string{"disk": "ssd"}), create: true},
		{name: "nodeSelector does not match", tweak: withNodeSelector, node: newNode("n", map[string]string{"disk": "hdd"})},
		{name: "affinity matches", tweak: withAffinity, node: newNode("n", map[string]string{"zone": "a"}), create: true},
		{name: "affinity does not match", tweak: withAffinity, node: newNode("n", map[string]string{"zone": "c"})},
		{name: "template nodeName other node", tweak: func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.NodeName = "other" }, node: newNode("n", nil)},
		{name: "template nodeName this node", tweak: func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.NodeName = "n" }, node: newNode("n", nil), create: true},
		{name: "NoSchedule taint", node: newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule})},
		{name: "NoExecute taint", node: newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute})},
		{name: "PreferNoSchedule taint ignored", node: newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectPreferNoSchedule}), create: true},
		{name: "tolerated taint", tweak: withToleration, node: newNode("n", nil, v1.Taint{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "not-ready tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute}), create: true},
		{name: "unreachable tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute}), create: true},
		{name: "disk-pressure tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeDiskPressure, Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "memory-pressure tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "pid-pressure tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodePIDPressure, Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "unschedulable tolerated by default", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "network-unavailable not tolerated", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule})},
		{name: "network-unavailable tolerated with hostNetwork", tweak: func(ds *apps.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }, node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeNetworkUnavailable, Effect: v1.TaintEffectNoSchedule}), create: true},
		{name: "not-ready NoSchedule not tolerated", node: newNode("n", nil, v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.node)
			ds := newDS("ds")
			if tc.tweak != nil {
				tc.tweak(ds)
			}
			f.addDS(ds)
			f.mustSync(ds)
			if got := len(f.pc.Templates) == 1; got != tc.create {
				t.Errorf("created a pod = %v, want %v", got, tc.create)
			}
			st := f.lastStatus()
			want := int32(0)
			if tc.create {
				want = 1
			}
			if st.DesiredNumberScheduled != want {
				t.Errorf("desiredNumberScheduled = %d, want %d", st.DesiredNumberScheduled, want)
			}
		})
	}
}

func withNodeSelector(ds *apps.DaemonSet) {
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
}

func withAffinity(ds *apps.DaemonSet) {
	ds.Spec.Template.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
		}}},
	}}
}

func withToleration(ds *apps.DaemonSet) {
	ds.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpEqual, Value: "v", Effect: v1.TaintEffectNoSchedule}}
}

// Existing pods stay on nodes with an untolerated NoSchedule taint but
// leave nodes with an untolerated NoExecute taint or that stop matching.
func TestExistingPodsAndNodeChanges(t *testing.T) {
	tests := []struct {
		name    string
		node    *v1.Node
		deleted bool
	}{
		{name: "NoSchedule keeps pod", node: newNode("n", map[string]string{"disk": "ssd"}, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule})},
		{name: "NoExecute evicts pod", node: newNode("n", map[string]string{"disk": "ssd"}, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}), deleted: true},
		{name: "label removed", node: newNode("n", nil), deleted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := newDS("ds")
			withNodeSelector(ds)
			f := newFixture(t, tc.node)
			f.addDS(ds)
			f.addToCache(newPod("p", ds, "n", hashOf(ds), ready(time.Hour)))
			f.mustSync(ds)
			if got := len(f.deletedPods()) == 1; got != tc.deleted {
				t.Errorf("deleted = %v, want %v", got, tc.deleted)
			}
			if len(f.pc.Templates) != 0 {
				t.Errorf("created a pod on an ineligible node")
			}
			st := f.lastStatus()
			if st.DesiredNumberScheduled != 0 || st.NumberMisscheduled != 1 {
				t.Errorf("status = %+v, want 0 desired, 1 misscheduled", st)
			}
		})
	}
}

func TestBurstReplicasCapsCreations(t *testing.T) {
	f := newFixture(t, nodes(BurstReplicas+20)...)
	ds := newDS("ds")
	f.addDS(ds)
	f.mustSync(ds)
	if n := len(f.pc.Templates); n != BurstReplicas {
		t.Errorf("created %d pods, want %d", n, BurstReplicas)
	}
	if add, _ := f.expectations(ds); add != BurstReplicas {
		t.Errorf("expected creations = %d, want %d", add, BurstReplicas)
	}
}

func TestSlowStartStopsAfterFailedBatch(t *testing.T) {
	f := newFixture(t, nodes(10)...)
	f.pc.Err = errors.New("quota exceeded")
	ds := newDS("ds")
	f.addDS(ds)
	if err := f.sync(ds); err == nil {
		t.Fatal("sync succeeded despite failed creations")
	}
	if n := f.pc.CreateCallCount; n != 1 {
		t.Errorf("create calls = %d, want 1 (first batch only)", n)
	}
	if add, del := f.expectations(ds); add != 0 || del != 0 {
		t.Errorf("expectations = %d/%d, want 0/0 after failed and skipped creations", add, del)
	}
}

func TestSlowStartBatchesAfterPartialFailure(t *testing.T) {
	f := newFixture(t, nodes(10)...)
	f.pc.CreateLimit = 6 // batches of 1 and 2 succeed; the batch of 4 has one failure
	ds := newDS("ds")
	f.addDS(ds)
	if err := f.sync(ds); err == nil {
		t.Fatal("sync succeeded despite a failed creation")
	}
	if n := f.pc.CreateCallCount; n != 7 {
		t.Errorf("create calls = %d, want 7 (batches of 1, 2 and 4)", n)
	}
	// 10 expected, 1 failed, 3 never attempted: the 6 that were made
	// remain to be observed.
	if add, _ := f.expectations(ds); add != 6 {
		t.Errorf("pending creations = %d, want 6", add)
	}
}

func TestNamespaceTerminatingCreateErrorIgnored(t *testing.T) {
	f := newFixture(t, nodes(2)...)
	f.useRealPodControl()
	f.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("namespace is terminating"))
		err.ErrStatus.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}}
		return true, nil, err
	})
	ds := newDS("ds")
	f.addDS(ds)
	if err := f.sync(ds); err != nil {
		t.Errorf("sync failed on a terminating namespace: %v", err)
	}
}

func TestFailedPodDeletedWithBackoff(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("bad", ds, "n", hashOf(ds), phase(v1.PodFailed)))

	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"bad"}) {
		t.Fatalf("deleted %v, want [bad]", got)
	}
	if len(f.pc.Templates) != 0 {
		t.Errorf("replacement created before the failed pod is gone")
	}
	wantEvent := "Warning FailedDaemonPod Found failed daemon pod ns/bad on node n, will try to kill it"
	if ev := f.events(); !contains(ev, wantEvent) {
		t.Errorf("events = %v, want %q", ev, wantEvent)
	}

	// The pod failed again at once: within the backoff it is left alone and
	// the set is retried when the backoff ends.
	f.pc.Clear()
	f.observeAll(ds)
	f.mustSync(ds)
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("deleted %v inside the backoff", got)
	}
	if d := f.queue.delaysFor(testNS + "/ds"); len(d) != 1 || d[0] != time.Second {
		t.Errorf("requeue delays = %v, want [1s]", d)
	}

	f.clock.Step(1500 * time.Millisecond)
	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"bad"}) {
		t.Errorf("deleted %v after the backoff, want [bad]", got)
	}
	// The backoff doubles.
	f.pc.Clear()
	f.observeAll(ds)
	f.clock.Step(1500 * time.Millisecond)
	f.mustSync(ds)
	if got := f.deletedPods(); len(got) != 0 {
		t.Errorf("deleted %v inside the doubled backoff", got)
	}
}

func TestSucceededPodDeleted(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("done", ds, "n", hashOf(ds), phase(v1.PodSucceeded)))
	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"done"}) {
		t.Fatalf("deleted %v, want [done]", got)
	}
	want := "Normal SucceededDaemonPod Found succeeded daemon pod ns/done on node n, will try to delete it"
	if ev := f.events(); !contains(ev, want) {
		t.Errorf("events = %v, want %q", ev, want)
	}
}

func TestDeletedTerminalPodIgnored(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	// A failed pod being deleted is as good as gone: a new one is created.
	f.addToCache(newPod("gone", ds, "n", hashOf(ds), phase(v1.PodFailed), deleting()))
	f.mustSync(ds)
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"n"}) {
		t.Errorf("created on %v, want [n]", got)
	}
	if len(f.deletedPods()) != 0 {
		t.Errorf("deleted a pod already being deleted")
	}
}

func TestExtraPodsOnNodeKeepOldest(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	h := hashOf(ds)
	f.addToCache(
		newPod("young", ds, "n", h, createdAt(testStart.Add(-time.Minute))),
		newPod("old", ds, "n", h, createdAt(testStart.Add(-time.Hour))),
		newPod("mid", ds, "n", h, createdAt(testStart.Add(-30*time.Minute))),
	)
	f.mustSync(ds)
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"mid", "young"}) {
		t.Errorf("deleted %v, want [mid young]", got)
	}
}

func TestUnscheduledPodsOfMissingNodesDeleted(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	h := hashOf(ds)
	f.addToCache(
		newPod("here", ds, "n", h),
		newPod("pending-gone", ds, "gone", h, unbound()),
		newPod("bound-gone", ds, "gone2", h),
	)
	f.mustSync(ds)
	// Bound pods on deleted nodes are the pod GC's.
	if got := f.deletedPods(); !reflect.DeepEqual(got, []string{"pending-gone"}) {
		t.Errorf("deleted %v, want [pending-gone]", got)
	}
	if len(f.pc.Templates) != 0 {
		t.Errorf("created %d pods, want none", len(f.pc.Templates))
	}
}

func TestUnboundPodCountsForItsNode(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("pending", ds, "n", hashOf(ds), unbound()))
	f.mustSync(ds)
	if len(f.pc.Templates) != 0 || len(f.deletedPods()) != 0 {
		t.Errorf("created %d, deleted %v; a pending pod pinned to the node is its daemon pod", len(f.pc.Templates), f.deletedPods())
	}
	if st := f.lastStatus(); st.CurrentNumberScheduled != 1 {
		t.Errorf("currentNumberScheduled = %d, want 1", st.CurrentNumberScheduled)
	}
}

func TestSelectingAll(t *testing.T) {
	ds := newDS("ds")
	ds.Spec.Selector = &metav1.LabelSelector{}
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.mustSync(ds)
	want := "Warning SelectingAll This daemon set is selecting all pods. A non-empty selector is required."
	if ev := f.events(); !reflect.DeepEqual(ev, []string{want}) {
		t.Errorf("events = %v, want [%s]", ev, want)
	}
	if len(f.pc.Templates) != 0 || len(f.statusUpdates()) != 0 || len(f.revisions()) != 0 {
		t.Errorf("acted on a DaemonSet selecting everything")
	}
}

func TestDeletingDaemonSetIsLeftAlone(t *testing.T) {
	ds := newDS("ds")
	ds.DeletionTimestamp = ptr.To(metav1.NewTime(testStart))
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.mustSync(ds)
	if len(f.pc.Templates) != 0 || len(f.statusUpdates()) != 0 || len(f.revisions()) != 0 {
		t.Errorf("acted on a DaemonSet being deleted")
	}
}

func TestMissingDaemonSetForgetsExpectations(t *testing.T) {
	f := newFixture(t)
	ds := newDS("ds")
	_ = f.dsc.expectations.SetExpectations(klog.FromContext(f.ctx), testNS+"/ds", 3, 0)
	f.mustSync(ds)
	if _, ok, _ := f.dsc.expectations.GetExpectations(testNS + "/ds"); ok {
		t.Error("expectations kept for a deleted DaemonSet")
	}
}

func TestUnsatisfiedExpectationsOnlyUpdateStatus(t *testing.T) {
	ds := newDS("ds")
	ds.Generation = 2
	ds.Status.ObservedGeneration = 1
	f := newFixture(t, nodes(2)...)
	f.addDS(ds)
	_ = f.dsc.expectations.ExpectCreations(klog.FromContext(f.ctx), testNS+"/ds", 1)
	f.mustSync(ds)
	if len(f.pc.Templates) != 0 {
		t.Errorf("created pods while waiting on expectations")
	}
	st := f.lastStatus()
	if st.DesiredNumberScheduled != 2 || st.ObservedGeneration != 1 {
		t.Errorf("status = %+v, want desired 2 and observedGeneration still 1", st)
	}
}

func TestAdoptsOrphanPods(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.addToCache(newPod("orphan", ds, "n", "", orphan()))
	f.mustSync(ds)
	// The cache never shows the adoption here, so each pass adopts again.
	if len(f.pc.Patches) == 0 || !strings.Contains(string(f.pc.Patches[0]), `"uid":"ds-uid"`) || !strings.Contains(string(f.pc.Patches[0]), `"controller":true`) {
		t.Errorf("patches = %s, want an adoption patch", f.pc.Patches)
	}
	if len(f.pc.Templates) != 0 {
		t.Errorf("created a pod on a node whose orphan was adopted")
	}
}

func TestReleasesPodsNoLongerMatching(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	p := newPod("p", ds, "n", "")
	p.Labels = map[string]string{"app": "other"}
	f.addToCache(p)
	f.mustSync(ds)
	if len(f.pc.Patches) == 0 || !strings.Contains(string(f.pc.Patches[0]), `"$patch":"delete"`) {
		t.Errorf("patches = %s, want a release patch", f.pc.Patches)
	}
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"n"}) {
		t.Errorf("created on %v, want [n] to replace the released pod", got)
	}
}

func TestIgnoresPodsOfOtherControllers(t *testing.T) {
	ds := newDS("ds")
	other := newDS("other")
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	p := newPod("p", other, "n", "")
	p.Labels = ds.Spec.Template.Labels
	f.addToCache(p)
	f.mustSync(ds)
	if len(f.pc.Patches) != 0 || len(f.deletedPods()) != 0 {
		t.Errorf("touched another controller's pod")
	}
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"n"}) {
		t.Errorf("created on %v, want [n]", got)
	}
}

func TestDeleteErrorsReported(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}))
	f.addDS(ds)
	f.addToCache(newPod("p", ds, "n", hashOf(ds)))
	f.pc.Err = fmt.Errorf("boom")
	if err := f.sync(ds); err == nil {
		t.Fatal("sync succeeded despite a failed deletion")
	}
	if _, del := f.expectations(ds); del != 0 {
		t.Errorf("pending deletions = %d, want 0 after the failure", del)
	}
}

func TestDeleteNotFoundIsNotAnError(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t, newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}))
	f.addDS(ds)
	f.addToCache(newPod("p", ds, "n", hashOf(ds)))
	f.pc.Err = apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	if err := f.sync(ds); err != nil {
		t.Errorf("sync: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestNodeShouldRunDaemonPod(t *testing.T) {
	ds := newDS("ds")
	tests := []struct {
		name             string
		node             *v1.Node
		run, continueRun bool
	}{
		{"fits", newNode("n", nil), true, true},
		{"NoSchedule", newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule}), false, true},
		{"NoExecute", newNode("n", nil, v1.Taint{Key: "k", Effect: v1.TaintEffectNoExecute}), false, false},
		{"NoSchedule and NoExecute", newNode("n", nil, v1.Taint{Key: "a", Effect: v1.TaintEffectNoSchedule}, v1.Taint{Key: "b", Effect: v1.TaintEffectNoExecute}), false, false},
	}
	for _, tc := range tests {
		run, cont := NodeShouldRunDaemonPod(klog.Background(), tc.node, ds, false)
		if run != tc.run || cont != tc.continueRun {
			t.Errorf("%s: got (%v, %v), want (%v, %v)", tc.name, run, cont, tc.run, tc.continueRun)
		}
	}
}

func TestNewPod(t *testing.T) {
	ds := newDS("ds")
	pod := NewPod(ds, "n")
	if pod.Spec.NodeName != "n" || pod.Namespace != testNS || len(pod.Spec.Tolerations) != 6 || pod.Labels["app"] != "ds" {
		t.Errorf("pod = %+v", pod)
	}
	if len(ds.Spec.Template.Spec.Tolerations) != 0 {
		t.Error("template modified")
	}
}
