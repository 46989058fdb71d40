package testutil

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func TestFixtureStores(t *testing.T) {
	f := NewFixture(t, pod("seeded"))
	f.Add(&apps.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "both"}})
	f.AddToCache(pod("cache-only"))

	pods := f.Informers.Core().V1().Pods().Lister().Pods("ns")
	for _, name := range []string{"seeded", "cache-only"} {
		if _, err := pods.Get(name); err != nil {
			t.Errorf("pod %s not in the informer store: %v", name, err)
		}
	}
	if _, err := f.Informers.Apps().V1().Deployments().Lister().Deployments("ns").Get("both"); err != nil {
		t.Errorf("deployment not in the informer store: %v", err)
	}
	if _, err := f.Client.CoreV1().Pods("ns").Get(f.Ctx, "seeded", metav1.GetOptions{}); err != nil {
		t.Errorf("seeded pod not in the clientset: %v", err)
	}
	if _, err := f.Client.AppsV1().Deployments("ns").Get(f.Ctx, "both", metav1.GetOptions{}); err != nil {
		t.Errorf("added deployment not in the clientset: %v", err)
	}
	if _, err := f.Client.CoreV1().Pods("ns").Get(f.Ctx, "cache-only", metav1.GetOptions{}); err == nil {
		t.Error("AddToCache wrote to the clientset")
	}
}

func TestReplaceCache(t *testing.T) {
	f := NewFixture(t, pod("stale"), pod("kept"))
	idx := f.Informers.Core().V1().Pods().Informer().GetIndexer()
	ReplaceCache(t, idx, []v1.Pod{*pod("kept"), *pod("new")})
	var got []string
	for _, obj := range idx.List() {
		got = append(got, obj.(*v1.Pod).Name)
	}
	sort.Strings(got)
	if want := []string{"kept", "new"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cache holds %v, want %v", got, want)
	}
}

func TestFixtureStart(t *testing.T) {
	f := NewFixture(t)
	lister := f.Informers.Core().V1().Pods().Lister()
	f.Start()
	if _, err := f.Client.CoreV1().Pods("ns").Create(f.Ctx, pod("late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, "the informer to see the pod", func() bool {
		_, err := lister.Pods("ns").Get("late")
		return err == nil
	})
}

func TestFixtureRunEndsWithTest(t *testing.T) {
	var returned atomic.Bool
	t.Run("inner", func(t *testing.T) {
		f := NewFixture(t)
		lister := f.Informers.Core().V1().Pods().Lister()
		f.Run(func(ctx context.Context) {
			<-ctx.Done()
			returned.Store(true)
		})
		if _, err := f.Client.CoreV1().Pods("ns").Create(f.Ctx, pod("p"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		WaitFor(t, "the started informer to see the pod", func() bool {
			_, err := lister.Pods("ns").Get("p")
			return err == nil
		})
		if returned.Load() {
			t.Error("run ended while the test runs")
		}
	})
	if !returned.Load() {
		t.Error("run still going after the test's cleanup")
	}
}

func TestResourceOf(t *testing.T) {
	for _, c := range []struct {
		obj  runtime.Object
		want schema.GroupVersionResource
	}{
		{pod("p"), v1.SchemeGroupVersion.WithResource("pods")},
		{&apps.ReplicaSet{}, apps.SchemeGroupVersion.WithResource("replicasets")},
		{&v1.Endpoints{}, v1.SchemeGroupVersion.WithResource("endpoints")}, //nolint:staticcheck // the endpoints controller still writes them
		{&v1.ServiceAccount{}, v1.SchemeGroupVersion.WithResource("serviceaccounts")},
	} {
		if got := ResourceOf(t, c.obj); got != c.want {
			t.Errorf("%T: %v, want %v", c.obj, got, c.want)
		}
	}
}

func TestWrites(t *testing.T) {
	f := NewFixture(t, pod("a"), &apps.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}})
	ctx := f.Ctx
	pods := f.Client.CoreV1().Pods("ns")
	deps := f.Client.AppsV1().Deployments("ns")
	_, _ = pods.Get(ctx, "a", metav1.GetOptions{})
	_, _ = pods.List(ctx, metav1.ListOptions{})
	w, _ := pods.Watch(ctx, metav1.ListOptions{})
	w.Stop()
	_, _ = pods.Create(ctx, pod("b"), metav1.CreateOptions{})
	_, _ = pods.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	d, _ := deps.Get(ctx, "d", metav1.GetOptions{})
	_, _ = deps.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	_, _ = deps.Update(ctx, d, metav1.UpdateOptions{})
	_ = pods.Delete(ctx, "b", metav1.DeleteOptions{})

	if got, want := Describe(f.AllWrites()), []string{"create pods", "patch pods", "update deployments/status", "update deployments", "delete pods"}; !reflect.DeepEqual(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	for _, c := range []struct {
		verb, resource string
		want           []string
	}{
		{"", "pods", []string{"create pods", "patch pods", "delete pods"}},
		{"update", "deployments", []string{"update deployments/status", "update deployments"}},
		{"update", "deployments/status", []string{"update deployments/status"}},
		{"update", "deployments/", []string{"update deployments"}},
		{"get", "pods", []string{}},
		{"delete", "", []string{"delete pods"}},
	} {
		if got := Describe(f.Writes(c.verb, c.resource)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Writes(%q, %q) = %v, want %v", c.verb, c.resource, got, c.want)
		}
	}
}

func TestContextEndsWithTest(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t)
		if ctx.Err() != nil {
			t.Fatal("cancelled while the test runs")
		}
	})
	if ctx.Err() == nil {
		t.Error("not cancelled after the test's cleanup")
	}
}

func TestWaitForWaits(t *testing.T) {
	var ready atomic.Bool
	polls := 0
	go func() {
		time.Sleep(20 * time.Millisecond)
		ready.Store(true)
	}()
	WaitFor(t, "ready", func() bool { polls++; return ready.Load() })
	if polls < 2 {
		t.Errorf("returned after %d polls, before the condition could change", polls)
	}
}

// fatalTB catches Fatalf the way testing does (the calling goroutine ends)
// so the failure paths of the wait helpers can be checked.
type fatalTB struct {
	testing.TB
	deadline time.Time
	mu       sync.Mutex
	msg      string
	cleanups []func()
}

func (f *fatalTB) Helper()                     {}
func (f *fatalTB) Cleanup(fn func())           { f.cleanups = append(f.cleanups, fn) }
func (f *fatalTB) Deadline() (time.Time, bool) { return f.deadline, !f.deadline.IsZero() }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	f.mu.Unlock()
	for _, fn := range f.cleanups {
		fn()
	}
	goruntime.Goexit()
}

// run calls fn on a goroutine that Fatalf may end and returns the message.
func (f *fatalTB) run(fn func()) string {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

func TestWaitForGivesUpAtTestDeadline(t *testing.T) {
	ftb := &fatalTB{TB: t, deadline: time.Now().Add(50 * time.Millisecond)}
	msg := ftb.run(func() { WaitFor(ftb, "never", func() bool { return false }) })
	if !strings.Contains(msg, "gave up waiting for never") {
		t.Errorf("failure %q", msg)
	}
	// Without a deadline a condition that comes true is still awaited.
	ftb = &fatalTB{TB: t}
	n := 0
	msg = ftb.run(func() { WaitFor(ftb, "third poll", func() bool { n++; return n == 3 }) })
	if msg != "" || n != 3 {
		t.Errorf("failure %q after %d polls", msg, n)
	}
}

func TestWaitUntilStopsOnError(t *testing.T) {
	ftb := &fatalTB{TB: t}
	polls := 0
	msg := ftb.run(func() {
		WaitUntil(ftb, "boom", func(context.Context) (bool, error) { polls++; return false, errors.New("broken") })
	})
	if !strings.Contains(msg, "broken") || polls != 1 {
		t.Errorf("failure %q after %d polls", msg, polls)
	}
}

// forgetting records Forget, which Drain must call on rate-limiting queues
// so their backoff does not outlive the drained item.
type forgetting struct {
	workqueue.TypedRateLimitingInterface[string]
	forgot []string
}

func (q *forgetting) Forget(k string) {
	q.forgot = append(q.forgot, k)
	q.TypedRateLimitingInterface.Forget(k)
}

func TestDrain(t *testing.T) {
	q := &forgetting{TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer q.ShutDown()
	q.Add("b")
	q.Add("a")
	q.Add("b")
	q.AddAfter("later", time.Hour)
	if got := Drain[string](q); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("drained %v", got)
	}
	if !reflect.DeepEqual(q.forgot, []string{"b", "a"}) {
		t.Errorf("forgot %v", q.forgot)
	}
	if q.Len() != 0 {
		t.Errorf("%d left", q.Len())
	}
	// Done was called: the key can be queued (and drained) again.
	q.Add("a")
	if got := Drain[string](q); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("drained %v after re-adding", got)
	}

	plain := workqueue.NewTyped[int]()
	defer plain.ShutDown()
	plain.Add(1)
	if got := Drain[int](plain); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("plain queue drained %v", got)
	}
}

func TestFakePodControl(t *testing.T) {
	ctx := Context(t)
	tmpl := &v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}
	ref := &metav1.OwnerReference{Name: "owner"}
	pc := &FakePodControl{CreateLimit: 2}
	for i := 0; i < 3; i++ {
		err := pc.CreatePodsWithGenerateName(ctx, "ns", tmpl, nil, ref, "gen-")
		if (err != nil) != (i == 2) {
			t.Errorf("create %d: %v", i, err)
		}
	}
	if len(pc.Templates) != 2 || pc.Templates[0].GenerateName != "gen-" || pc.ControllerRefs[1].Name != "owner" || pc.CreateCallCount != 3 {
		t.Errorf("recorded %+v", pc)
	}
	pc.Err = errors.New("injected")
	if err := pc.DeletePod(ctx, "ns", "p", nil); err != pc.Err {
		t.Errorf("delete: %v", err)
	}
	if err := pc.PatchPod(ctx, "ns", "p", []byte("{}")); err != pc.Err {
		t.Errorf("patch: %v", err)
	}
	if !reflect.DeepEqual(pc.DeletePodName, []string{"p"}) || len(pc.Patches) != 1 {
		t.Errorf("recorded %+v", pc)
	}
	pc.Clear()
	if pc.Templates != nil || pc.DeletePodName != nil || pc.Patches != nil || pc.CreateCallCount != 0 || pc.CreateLimit != 0 || pc.Err == nil {
		t.Errorf("after Clear %+v", pc)
	}
}

func TestNamePods(t *testing.T) {
	f := NewFixture(t)
	NamePods(f.Client)
	gen := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "web-"}}
	for i := 0; i < 2; i++ {
		if _, err := f.Client.CoreV1().Pods("ns").Create(f.Ctx, gen.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Client.CoreV1().Pods("ns").Create(f.Ctx, pod("fixed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := f.Client.CoreV1().Pods("ns").List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	if want := []string{"fixed", "web-1", "web-2"}; !reflect.DeepEqual(names, want) {
		t.Errorf("pods %v, want %v", names, want)
	}
}
