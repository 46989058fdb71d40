package daemon

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
	deployutil "github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const testNS = "ns"

// recordingQueue remembers delayed adds, which a workqueue cannot show.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu     sync.Mutex
	delays map[string][]time.Duration
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.delays[key] = append(q.delays[key], d)
	q.mu.Unlock()
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *recordingQueue) delaysFor(key string) []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]time.Duration(nil), q.delays[key]...)
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	dsc      *Controller
	pc       *testutil.FakePodControl
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	queue    *recordingQueue
}

var testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newFixture builds a controller whose informers are never started: tests
// put objects into the caches and call the sync directly. Pod writes go to
// a FakePodControl; everything else to the fake clientset.
// v137Features are the v1.37 defaults of the gates the controller reads.
var v137Features = Features{StaleControllerConsistency: true}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx := klog.NewContext(context.Background(), klog.Background())
	clk := testingclock.NewFakeClock(testStart)
	dsc, err := NewController(ctx,
		factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), client,
		flowcontrol.NewFakeBackOff(time.Second, 15*time.Minute, clk), v137Features)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, client: client, factory: factory, dsc: dsc, pc: &testutil.FakePodControl{}, recorder: record.NewFakeRecorder(1000), clock: clk}
	dsc.podControl = f.pc
	dsc.eventRecorder = f.recorder
	f.queue = &recordingQueue{TypedRateLimitingInterface: dsc.queue, delays: map[string][]time.Duration{}}
	dsc.queue = f.queue
	dsc.loop.Queue = f.queue
	t.Cleanup(func() { dsc.queue.ShutDown(); dsc.nodeUpdateQueue.ShutDown() })
	for _, o := range objs {
		f.addToCache(o)
	}
	return f
}

// useRealPodControl sends pod writes to the fake clientset, naming pods
// like the API server does.
func (f *fixture) useRealPodControl() {
	testutil.NamePods(f.client)
	f.dsc.podControl = controller.RealPodControl{KubeClient: f.client, Recorder: f.recorder}
}

func (f *fixture) addToCache(objs ...runtime.Object) {
	f.t.Helper()
	testutil.AddToInformers(f.t, f.factory, objs...)
}

// addDS stores ds in the cache and the clientset.
func (f *fixture) addDS(ds *apps.DaemonSet) {
	f.t.Helper()
	if err := f.client.Tracker().Add(ds); err != nil {
		f.t.Fatal(err)
	}
	f.addToCache(ds)
}

// cachedPods returns the named pods from the cache.
func (f *fixture) cachedPods(names ...string) []*v1.Pod {
	f.t.Helper()
	var out []*v1.Pod
	for _, n := range names {
		p, err := f.factory.Core().V1().Pods().Lister().Pods(testNS).Get(n)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// updateDS replaces ds in the cache and the clientset.
func (f *fixture) updateDS(ds *apps.DaemonSet) {
	f.t.Helper()
	if err := f.client.Tracker().Update(apps.SchemeGroupVersion.WithResource("daemonsets"), ds, ds.Namespace); err != nil {
		f.t.Fatal(err)
	}
	if err := f.factory.Apps().V1().DaemonSets().Informer().GetIndexer().Update(ds); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) sync(ds *apps.DaemonSet) error {
	return f.dsc.syncHandler(f.ctx, testNS+"/"+ds.Name)
}

func (f *fixture) mustSync(ds *apps.DaemonSet) {
	f.t.Helper()
	if err := f.sync(ds); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// createdNodes returns the nodes FakePodControl was asked to create pods
// on, sorted.
func (f *fixture) createdNodes() []string {
	f.t.Helper()
	f.pc.Lock()
	defer f.pc.Unlock()
	var out []string
	for _, tmpl := range f.pc.Templates {
		pod := &v1.Pod{Spec: tmpl.Spec}
		n, err := util.GetTargetNodeName(pod)
		if err != nil {
			f.t.Fatalf("created pod not pinned to a node: %v", err)
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) deletedPods() []string {
	f.pc.Lock()
	defer f.pc.Unlock()
	out := append([]string(nil), f.pc.DeletePodName...)
	sort.Strings(out)
	return out
}

func (f *fixture) expectations(ds *apps.DaemonSet) (int64, int64) {
	e, ok, _ := f.dsc.expectations.GetExpectations(testNS + "/" + ds.Name)
	if !ok {
		return 0, 0
	}
	return e.GetExpectations()
}

// observeAll drops ds's expectations, as if the informer had shown every
// pending create and delete.
func (f *fixture) observeAll(ds *apps.DaemonSet) {
	f.dsc.expectations.DeleteExpectations(klog.FromContext(f.ctx), testNS+"/"+ds.Name)
}

// statusUpdates returns the DaemonSets written through UpdateStatus.
func (f *fixture) statusUpdates() []*apps.DaemonSet {
	var out []*apps.DaemonSet
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" && a.GetResource().Resource == "daemonsets" {
			out = append(out, u.GetObject().(*apps.DaemonSet))
		}
	}
	return out
}

func (f *fixture) lastStatus() apps.DaemonSetStatus {
	f.t.Helper()
	u := f.statusUpdates()
	if len(u) == 0 {
		f.t.Fatal("no status update")
	}
	return u[len(u)-1].Status
}

// events drains the recorder.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// revisions lists the ControllerRevisions in the clientset, by name.
func (f *fixture) revisions() map[string]*apps.ControllerRevision {
	f.t.Helper()
	l, err := f.client.AppsV1().ControllerRevisions(testNS).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]*apps.ControllerRevision{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// syncRevisionsToCache copies the clientset's revisions into the cache, as
// the informer would.
func (f *fixture) syncRevisionsToCache() {
	for _, r := range f.revisions() {
		f.addToCache(r)
	}
}

func newDS(name string) *apps.DaemonSet {
	lbls := map[string]string{"app": name}
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID(name + "-uid"), Generation: 1,
			Annotations: map[string]string{apps.DeprecatedTemplateGeneration: "1"},
		},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img:1"}}},
			},
			UpdateStrategy: apps.DaemonSetUpdateStrategy{
				Type: apps.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &apps.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
}

// hashOf is the revision hash the controller gives ds's current template.
func hashOf(ds *apps.DaemonSet) string {
	return deployutil.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
}

func newNode(name string, lbls map[string]string, taints ...v1.Taint) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       v1.NodeSpec{Taints: taints},
	}
}

func nodes(n int) []runtime.Object {
	out := make([]runtime.Object, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, newNode(fmt.Sprintf("node-%d", i), nil))
	}
	return out
}

type podOpt func(*v1.Pod)

// newPod is a daemon pod of ds bound to node, of the given revision hash,
// created at testStart plus age.
func newPod(name string, ds *apps.DaemonSet, node, hash string, opts ...podOpt) *v1.Pod {
	lbls := map[string]string{}
	for k, v := range ds.Spec.Template.Labels {
		lbls[k] = v
	}
	if hash != "" {
		lbls[apps.DefaultDaemonSetUniqueLabelKey] = hash
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNS, UID: types.UID(name + "-uid"), Labels: lbls,
			CreationTimestamp: metav1.NewTime(testStart.Add(-time.Hour)),
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
			ResourceVersion:   "1",
		},
		Spec:   v1.PodSpec{NodeName: node, Containers: ds.Spec.Template.Spec.Containers},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// ready marks the pod ready since readyFor before testStart.
func ready(readyFor time.Duration) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(testStart.Add(-readyFor))}}
	}
}

func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }

func createdAt(t time.Time) podOpt {
	return func(p *v1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func unbound() podOpt {
	return func(p *v1.Pod) {
		p.Spec.Affinity = util.ReplaceDaemonSetPodNodeNameNodeAffinity(nil, p.Spec.NodeName)
		p.Spec.NodeName = ""
	}
}

func deleting() podOpt {
	return func(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(testStart)) }
}

func orphan() podOpt { return func(p *v1.Pod) { p.OwnerReferences = nil } }
