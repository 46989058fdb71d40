package tainteviction

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var noExec = v1.Taint{Key: "example.com/evict", Effect: v1.TaintEffectNoExecute}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	tc       *Controller
	recorder *record.FakeRecorder

	mu      sync.Mutex
	patches []string
}

func start(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	f := &fixture{t: t, ctx: ctx, client: client}
	client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			f.mu.Lock()
			f.patches = append(f.patches, string(a.(clienttesting.PatchAction).GetPatch()))
			f.mu.Unlock()
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	tc, err := NewController(ctx, client, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), "taint-eviction-controller", false)
	if err != nil {
		t.Fatal(err)
	}
	f.clock = testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tc.clock = f.clock
	tc.evictions.clock = f.clock
	f.recorder = record.NewFakeRecorder(100)
	tc.recorder = f.recorder
	f.tc = tc
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { tc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func node(name string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: taints}}
}

func pod(name, nodeName string, tolerations ...v1.Toleration) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "uid-" + "x"},
		Spec:       v1.PodSpec{NodeName: nodeName, Tolerations: tolerations},
	}
}

func (f *fixture) exists(name string) bool {
	f.t.Helper()
	_, err := f.client.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return true
}

func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// scheduled waits until the pod's deletion timer is armed, so stepping the
// fake clock afterwards fires it.
func (f *fixture) scheduled(name string) {
	f.t.Helper()
	f.eventually("deletion of "+name+" scheduled", func() bool { return f.tc.evictions.get("default/"+name) != nil })
}

func (f *fixture) events() []string {
	var got []string
	for {
		select {
		case e := <-f.recorder.Events:
			got = append(got, e)
		default:
			return got
		}
	}
}

func TestUntoleratedPodIsDeletedAtOnce(t *testing.T) {
	f := start(t, node("n1", noExec), pod("victim", "n1"),
		pod("tolerant", "n1", v1.Toleration{Key: noExec.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}),
		pod("elsewhere", "n2"))
	f.eventually("victim deleted", func() bool { return !f.exists("victim") })
	time.Sleep(100 * time.Millisecond)
	if !f.exists("tolerant") || !f.exists("elsewhere") {
		t.Fatal("a tolerating or unrelated pod was deleted")
	}
	f.mu.Lock()
	patches := strings.Join(f.patches, "\n")
	f.mu.Unlock()
	if !strings.Contains(patches, `"type":"DisruptionTarget"`) || !strings.Contains(patches, `"reason":"DeletionByTaintManager"`) {
		t.Errorf("no DisruptionTarget condition patched before deletion: %s", patches)
	}
	ev := strings.Join(f.events(), "\n")
	if !strings.Contains(ev, "Normal TaintManagerEviction Marking for deletion Pod default/victim") {
		t.Errorf("missing eviction event in %q", ev)
	}
}

func TestTolerationSecondsDelaysDeletion(t *testing.T) {
	tol := v1.Toleration{Key: noExec.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}
	f := start(t, node("n1", noExec), pod("p", "n1", tol))
	f.scheduled("p")
	f.clock.Step(59 * time.Second)
	time.Sleep(50 * time.Millisecond)
	if !f.exists("p") {
		t.Fatal("deleted before tolerationSeconds passed")
	}
	f.clock.Step(2 * time.Second)
	f.eventually("p deleted after 60s", func() bool { return !f.exists("p") })
}

func TestDeletionCancelledWhenTaintRemoved(t *testing.T) {
	tol := v1.Toleration{Key: noExec.Key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)}
	f := start(t, node("n1", noExec), pod("p", "n1", tol))
	f.scheduled("p")

	n, err := f.client.CoreV1().Nodes().Get(f.ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if _, err := f.client.CoreV1().Nodes().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("deletion cancelled", func() bool { return f.tc.evictions.get("default/p") == nil })
	f.clock.Step(2 * time.Minute)
	time.Sleep(50 * time.Millisecond)
	if !f.exists("p") {
		t.Fatal("pod deleted although the taint was removed")
	}
	ev := strings.Join(f.events(), "\n")
	if !strings.Contains(ev, "Normal TaintManagerEviction Cancelling deletion of Pod default/p") {
		t.Errorf("missing cancel event in %q", ev)
	}
}

func TestMinTolerationTime(t *testing.T) {
	s := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		tols []v1.Toleration
		want time.Duration
	}{
		{nil, 0},
		{[]v1.Toleration{{}}, -1},
		{[]v1.Toleration{{TolerationSeconds: s(30)}, {TolerationSeconds: s(10)}}, 10 * time.Second},
		{[]v1.Toleration{{TolerationSeconds: s(30)}, {TolerationSeconds: s(-5)}}, 0},
	} {
		if got := minTolerationTime(tc.tols); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.tols, got, tc.want)
		}
	}
}

// Gt and Lt tolerations match only with the comparison-operators gate the
// constructor was given.
func TestMatchingTolerationsComparisonOperators(t *testing.T) {
	taints := []v1.Taint{{Key: "level", Value: "5", Effect: v1.TaintEffectNoExecute}}
	tolerations := []v1.Toleration{{Key: "level", Operator: v1.TolerationOpGt, Value: "3", Effect: v1.TaintEffectNoExecute}}
	for _, enabled := range []bool{false, true} {
		if got, _ := matchingTolerations(klog.Background(), taints, tolerations, enabled); got != enabled {
			t.Errorf("gate %v: tolerated = %v, want %v", enabled, got, enabled)
		}
	}
}
