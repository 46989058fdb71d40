package podgc

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(name, node string, phase v1.PodPhase, age time.Duration) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(base.Add(-age))},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: phase},
	}
}

func node(name string, ready bool, taints ...v1.Taint) *v1.Node {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{Taints: taints},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}},
	}
}

func run(t *testing.T, threshold int, pods []*v1.Pod, nodes []*v1.Node) *fake.Clientset {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(base)
	gcc := newController(ctx, client, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), threshold, gcCheckPeriod, 0, clk)
	t.Cleanup(gcc.nodeQueue.ShutDown)
	for _, p := range pods {
		_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(p)
	}
	for _, n := range nodes {
		_ = factory.Core().V1().Nodes().Informer().GetIndexer().Add(n)
	}
	client.ClearActions()
	gcc.gc(ctx)
	return client
}

func deleted(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok && d.Resource.Resource == "pods" {
			if d.DeleteOptions.GracePeriodSeconds == nil || *d.DeleteOptions.GracePeriodSeconds != 0 {
				panic("podgc must force delete")
			}
			out = append(out, d.Name)
		}
	}
	sort.Strings(out)
	return out
}

func statusPatches(c *fake.Clientset) map[string]v1.Pod {
	out := map[string]v1.Pod{}
	for _, a := range c.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok && p.Subresource == "status" {
			var pod v1.Pod
			if err := json.Unmarshal(p.Patch, &pod); err != nil {
				panic(err)
			}
			out[p.Name] = pod
		}
	}
	return out
}

func TestTerminatedOverThreshold(t *testing.T) {
	n := node("n", true)
	evicted := pod("evicted", "n", v1.PodFailed, time.Minute)
	evicted.Status.Reason = "Evicted"
	pods := []*v1.Pod{
		pod("old", "n", v1.PodSucceeded, 5*time.Hour),
		pod("older", "n", v1.PodFailed, 6*time.Hour),
		pod("new", "n", v1.PodSucceeded, time.Hour),
		pod("running", "n", v1.PodRunning, 10*time.Hour),
		evicted,
	}
	// 4 terminated, threshold 2: evicted first, then the oldest.
	got := deleted(run(t, 2, pods, []*v1.Node{n}))
	if want := []string{"evicted", "older"}; !equal(got, want) {
		t.Errorf("deleted %v, want %v", got, want)
	}
	if got := deleted(run(t, 0, pods, []*v1.Node{n})); len(got) != 0 {
		t.Errorf("threshold 0 disables: deleted %v", got)
	}
	if got := deleted(run(t, 4, pods, []*v1.Node{n})); len(got) != 0 {
		t.Errorf("at threshold: deleted %v", got)
	}
}

func TestOrphanedPodsGetDisruptionTarget(t *testing.T) {
	p := pod("orphan", "gone", v1.PodRunning, time.Minute)
	p.Generation = 3
	ok := pod("fine", "n", v1.PodRunning, time.Minute)
	c := run(t, 10, []*v1.Pod{p, ok}, []*v1.Node{node("n", true)})
	if got := deleted(c); !equal(got, []string{"orphan"}) {
		t.Fatalf("deleted %v", got)
	}
	st := statusPatches(c)["orphan"].Status
	if st.Phase != v1.PodFailed || st.ObservedGeneration != 3 {
		t.Errorf("status patch %+v", st)
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Type != v1.DisruptionTarget || st.Conditions[0].Reason != "DeletionByPodGC" ||
		st.Conditions[0].Message != "PodGC: node no longer exists" || st.Conditions[0].Status != v1.ConditionTrue || st.Conditions[0].ObservedGeneration != 3 {
		t.Errorf("conditions %+v", st.Conditions)
	}
}

func TestOrphanQuarantineChecksLiveNode(t *testing.T) {
	// The node is missing from the cache but exists on the server.
	_, ctx := ktesting.NewTestContext(t)
	p := pod("p", "late", v1.PodRunning, time.Minute)
	client := fake.NewClientset(p, node("late", true))
	factory := informers.NewSharedInformerFactory(client, 0)
	gcc := newController(ctx, client, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), 10, gcCheckPeriod, 0, testingclock.NewFakeClock(base))
	t.Cleanup(gcc.nodeQueue.ShutDown)
	_ = factory.Core().V1().Pods().Informer().GetIndexer().Add(p)
	client.ClearActions()
	gcc.gc(ctx)
	if got := deleted(client); len(got) != 0 {
		t.Errorf("deleted %v", got)
	}
}

func TestUnscheduledTerminating(t *testing.T) {
	now := metav1.NewTime(base)
	p := pod("unsched", "", v1.PodPending, time.Minute)
	p.DeletionTimestamp = &now
	q := pod("pending", "", v1.PodPending, time.Minute)
	c := run(t, 10, []*v1.Pod{p, q}, nil)
	if got := deleted(c); !equal(got, []string{"unsched"}) {
		t.Errorf("deleted %v", got)
	}
	if st := statusPatches(c)["unsched"].Status; st.Phase != v1.PodFailed || len(st.Conditions) != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestTerminatingOnOutOfServiceNode(t *testing.T) {
	now := metav1.NewTime(base)
	taint := v1.Taint{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}
	a := pod("a", "oos", v1.PodRunning, time.Minute)
	a.DeletionTimestamp = &now
	b := pod("b", "readyoos", v1.PodRunning, time.Minute)
	b.DeletionTimestamp = &now
	c := pod("c", "notready", v1.PodRunning, time.Minute)
	c.DeletionTimestamp = &now
	client := run(t, 10, []*v1.Pod{a, b, c}, []*v1.Node{node("oos", false, taint), node("readyoos", true, taint), node("notready", false)})
	if got := deleted(client); !equal(got, []string{"a"}) {
		t.Errorf("deleted %v", got)
	}
}

func TestSucceededPodIsNotPatched(t *testing.T) {
	c := run(t, 0, []*v1.Pod{pod("s", "gone", v1.PodSucceeded, time.Minute)}, nil)
	if got := deleted(c); !equal(got, []string{"s"}) {
		t.Fatalf("deleted %v", got)
	}
	if len(statusPatches(c)) != 0 {
		t.Error("terminal pod status patched")
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
