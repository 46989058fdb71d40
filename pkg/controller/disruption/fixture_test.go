package disruption

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const ns = metav1.NamespaceDefault

// widgetGVK is a custom workload that only the scale finder knows.
var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

var selLabels = map[string]string{"app": "web"}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	dc       *Controller
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	scale    *scalefake.FakeScaleClient
	disc     *discoveryfake.FakeDiscovery

	mu sync.Mutex
	// writes are the PDB statuses sent, in order (failSafe's included).
	writes []*policy.PodDisruptionBudget
	// writeErr, when set, is returned by the status writer (after
	// recording the attempt) and the cache is left as it was.
	writeErr func(*policy.PodDisruptionBudget) error
}

// newFixture builds a controller whose informers are never started: tests
// fill the caches and call the sync functions themselves. Status writes
// are recorded and copied into the PDB cache, as the watch would.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{widgetGVK.GroupVersion()})
	mapper.Add(widgetGVK, apimeta.RESTScopeNamespace)
	f := &fixture{
		t:        t,
		ctx:      klog.NewContext(context.Background(), klog.Background()),
		client:   client,
		factory:  factory,
		recorder: record.NewFakeRecorder(1000),
		clock:    testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)),
		scale:    &scalefake.FakeScaleClient{},
		disc:     &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}},
	}
	f.dc = NewControllerInternal(f.ctx,
		factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets(),
		client, mapper, f.scale, f.disc, f.clock, stalePodDisruptionTimeout)
	f.dc.recorder = f.recorder
	f.dc.writeStatus = f.recordWrite
	t.Cleanup(func() {
		f.dc.queue.ShutDown()
		f.dc.recheckQueue.ShutDown()
		f.dc.stalePodDisruptionQueue.ShutDown()
	})
	return f
}

func (f *fixture) recordWrite(_ context.Context, pdb *policy.PodDisruptionBudget) error {
	f.mu.Lock()
	f.writes = append(f.writes, pdb.DeepCopy())
	errFn := f.writeErr
	f.mu.Unlock()
	if errFn != nil {
		if err := errFn(pdb); err != nil {
			return err
		}
	}
	f.add(pdb.DeepCopy())
	return nil
}

func (f *fixture) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

// add puts objects into the informer caches (replacing same-named ones).
func (f *fixture) add(objs ...runtime.Object) {
	f.t.Helper()
	for _, o := range objs {
		var err error
		switch obj := o.(type) {
		case *policy.PodDisruptionBudget:
			err = f.factory.Policy().V1().PodDisruptionBudgets().Informer().GetIndexer().Update(obj)
		case *v1.Pod:
			err = f.factory.Core().V1().Pods().Informer().GetIndexer().Update(obj)
		case *v1.ReplicationController:
			err = f.factory.Core().V1().ReplicationControllers().Informer().GetIndexer().Update(obj)
		case *apps.ReplicaSet:
			err = f.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Update(obj)
		case *apps.Deployment:
			err = f.factory.Apps().V1().Deployments().Informer().GetIndexer().Update(obj)
		case *apps.StatefulSet:
			err = f.factory.Apps().V1().StatefulSets().Informer().GetIndexer().Update(obj)
		default:
			f.t.Fatalf("unexpected object %T", o)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) sync(name string) error {
	return f.dc.sync(f.ctx, ns+"/"+name)
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// cached returns the budget as the cache holds it (the last written status).
func (f *fixture) cached(name string) *policy.PodDisruptionBudget {
	f.t.Helper()
	pdb, err := f.dc.pdbLister.PodDisruptionBudgets(ns).Get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	return pdb
}

// expectStatus checks the budget's counters, disruptedPods and that
// DisruptionAllowed agrees with disruptionsAllowed.
func (f *fixture) expectStatus(name string, allowed, current, desired, expected int32, disrupted map[string]metav1.Time) {
	f.t.Helper()
	pdb := f.cached(name)
	st := pdb.Status
	if st.DisruptionsAllowed != allowed || st.CurrentHealthy != current || st.DesiredHealthy != desired || st.ExpectedPods != expected {
		f.t.Fatalf("status (allowed, current, desired, expected) = (%d, %d, %d, %d), want (%d, %d, %d, %d)",
			st.DisruptionsAllowed, st.CurrentHealthy, st.DesiredHealthy, st.ExpectedPods, allowed, current, desired, expected)
	}
	if !apiequality.Semantic.DeepEqual(st.DisruptedPods, disrupted) {
		f.t.Fatalf("disruptedPods = %v, want %v", st.DisruptedPods, disrupted)
	}
	if st.ObservedGeneration != pdb.Generation {
		f.t.Fatalf("observedGeneration = %d, want %d", st.ObservedGeneration, pdb.Generation)
	}
	wantStatus, wantReason := metav1.ConditionFalse, policy.InsufficientPodsReason
	if allowed > 0 {
		wantStatus, wantReason = metav1.ConditionTrue, policy.SufficientPodsReason
	}
	f.expectCondition(name, wantStatus, wantReason)
}

func (f *fixture) expectCondition(name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	f.t.Helper()
	pdb := f.cached(name)
	c := apimeta.FindStatusCondition(pdb.Status.Conditions, policy.DisruptionAllowedCondition)
	if c == nil {
		f.t.Fatalf("no %s condition in %+v", policy.DisruptionAllowedCondition, pdb.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || c.ObservedGeneration != pdb.Status.ObservedGeneration {
		f.t.Fatalf("%s condition = %+v, want status %s reason %s observedGeneration %d", c.Type, c, status, reason, pdb.Status.ObservedGeneration)
	}
	return c
}

// events drains the events recorded so far.
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

// expectEvent checks that an event starting with prefix (type, reason,
// message) was recorded.
func (f *fixture) expectEvent(prefix string) {
	f.t.Helper()
	evs := f.events()
	for _, e := range evs {
		if strings.HasPrefix(e, prefix) {
			return
		}
	}
	f.t.Fatalf("no event %q among %q", prefix, evs)
}

func minAvailablePDB(name string, v intstr.IntOrString) *policy.PodDisruptionBudget {
	return &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Generation: 1, ResourceVersion: "1"},
		Spec: policy.PodDisruptionBudgetSpec{
			MinAvailable: &v,
			Selector:     &metav1.LabelSelector{MatchLabels: selLabels},
		},
	}
}

func maxUnavailablePDB(name string, v intstr.IntOrString) *policy.PodDisruptionBudget {
	pdb := minAvailablePDB(name, v)
	pdb.Spec.MinAvailable = nil
	pdb.Spec.MaxUnavailable = &v
	return pdb
}

// readyPod is a running, ready pod labelled for the budgets above.
func readyPod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}, ResourceVersion: "1"},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
}

// ownedBy makes obj (of gvk) the pod's controller.
func ownedBy(pod *v1.Pod, gvk schema.GroupVersionKind, obj metav1.Object) *v1.Pod {
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(obj, gvk)}
	return pod
}

func newRS(name string, replicas int32) *apps.ReplicaSet {
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       apps.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: selLabels}},
	}
}

func newRC(name string, replicas int32) *v1.ReplicationController {
	return &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       v1.ReplicationControllerSpec{Replicas: ptr.To(replicas), Selector: selLabels},
	}
}

func newSS(name string, replicas int32) *apps.StatefulSet {
	return &apps.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       apps.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: selLabels}},
	}
}

func newDeployment(name string, replicas int32) *apps.Deployment {
	return &apps.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)},
		Spec:       apps.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: selLabels}},
	}
}

// rsOfDeployment is a ReplicaSet controlled by d.
func rsOfDeployment(name string, replicas int32, d *apps.Deployment) *apps.ReplicaSet {
	rs := newRS(name, replicas)
	rs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d, apps.SchemeGroupVersion.WithKind("Deployment"))}
	return rs
}

var (
	rsKind = apps.SchemeGroupVersion.WithKind("ReplicaSet")
	rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")
	ssKind = apps.SchemeGroupVersion.WithKind("StatefulSet")
)
