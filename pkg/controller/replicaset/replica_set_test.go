package replicaset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var rsGVK = apps.SchemeGroupVersion.WithKind("ReplicaSet")

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	rsc      *Controller
	pc       *testutil.FakePodControl
	recorder *record.FakeRecorder
}

// newFixture builds a controller whose informers are never started: tests
// put objects into the caches themselves and call sync directly.
func newFixture(t *testing.T, burst int, objs ...runtime.Object) *fixture {
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx := klog.NewContext(context.Background(), klog.Background())
	rsc := NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, burst, v137Features)
	f := &fixture{t: t, client: client, factory: factory, rsc: rsc, pc: &testutil.FakePodControl{}}
	rsc.podControl = f.pc
	for _, o := range objs {
		f.addToCache(o)
	}
	return f
}

// useRealPodControl makes pod writes go through the fake clientset, with
// names generated like the API server does.
func (f *fixture) useRealPodControl() {
	f.recorder = record.NewFakeRecorder(100)
	testutil.NamePods(f.client)
	f.rsc.podControl = controller.RealPodControl{KubeClient: f.client, Recorder: f.recorder}
}

func (f *fixture) addToCache(o runtime.Object) {
	testutil.AddToInformers(f.t, f.factory, o)
}

func (f *fixture) sync(key string) error {
	return f.rsc.syncHandler(klog.NewContext(context.Background(), klog.Background()), key)
}

// statusUpdates returns the ReplicaSets written through UpdateStatus.
func (f *fixture) statusUpdates() []*apps.ReplicaSet {
	var out []*apps.ReplicaSet
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "status" {
			out = append(out, u.GetObject().(*apps.ReplicaSet))
		}
	}
	return out
}

func (f *fixture) lastStatus() *apps.ReplicaSet {
	f.t.Helper()
	u := f.statusUpdates()
	if len(u) == 0 {
		f.t.Fatal("no status update")
	}
	return u[len(u)-1]
}

func (f *fixture) expectations(key string) (int64, int64) {
	e, ok, _ := f.rsc.expectations.GetExpectations(key)
	if !ok {
		return 0, 0
	}
	return e.GetExpectations()
}

func newRS(name string, replicas int32) *apps.ReplicaSet {
	lbls := map[string]string{"app": name}
	return &apps.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Generation: 1},
		Spec: apps.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
}

type podOpt func(*v1.Pod)

func newPod(name string, rs *apps.ReplicaSet, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name + "-uid"),
			Labels:            map[string]string{"app": rs.Name, "tier": "web"},
			CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour)),
			ResourceVersion:   "1",
		},
		Spec:   v1.PodSpec{NodeName: "node-1"},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rs, rsGVK)}
	for _, o := range opts {
		o(p)
	}
	return p
}

func orphan(p *v1.Pod)                      { p.OwnerReferences = nil }
func unscheduled(p *v1.Pod)                 { p.Spec.NodeName = ""; p.Status.Phase = v1.PodPending }
func onNode(n string) podOpt                { return func(p *v1.Pod) { p.Spec.NodeName = n } }
func withLabels(l map[string]string) podOpt { return func(p *v1.Pod) { p.Labels = l } }
func cost(c string) podOpt {
	return func(p *v1.Pod) { p.Annotations = map[string]string{controller.PodDeletionCostAnnotation: c} }
}
func readySince(d time.Duration) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-d))}}
	}
}
func terminating(p *v1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }

func TestScaleUpCreatesPodsFromTemplate(t *testing.T) {
	rs := newRS("web", 3)
	f := newFixture(t, BurstReplicas, rs)
	f.withoutStatusHolds()
	f.useRealPodControl()
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	pods, _ := f.client.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 3 {
		t.Fatalf("created %d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.GenerateName != "web-" || p.Labels["app"] != "web" || p.Labels["tier"] != "web" {
			t.Fatalf("pod meta %+v", p.ObjectMeta)
		}
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || ref.Name != "web" || ref.UID != rs.UID || !*ref.BlockOwnerDeletion {
			t.Fatalf("controller ref %+v", ref)
		}
	}
	if add, _ := f.expectations("ns/web"); add != 3 {
		t.Fatalf("expected adds %d, want 3", add)
	}
	events := 0
	for len(f.recorder.Events) > 0 {
		if e := <-f.recorder.Events; strings.HasPrefix(e, "Normal SuccessfulCreate Created pod: web-") {
			events++
		}
	}
	if events != 3 {
		t.Fatalf("SuccessfulCreate events %d", events)
	}
	st := f.lastStatus()
	if st.Status.Replicas != 0 || st.Status.ObservedGeneration != 1 || st.Status.TerminatingReplicas == nil || *st.Status.TerminatingReplicas != 0 {
		t.Fatalf("status %+v", st.Status)
	}
}

func TestExpectationsPreventDoubleCreation(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, BurstReplicas, rs)
	_ = f.sync("ns/web")
	_ = f.sync("ns/web")
	if len(f.pc.Templates) != 2 {
		t.Fatalf("created %d, want 2 (second sync must wait for the first's pods)", len(f.pc.Templates))
	}
	// The informer reports both creations: the next sync may act again.
	for i := 0; i < 2; i++ {
		p := newPod(fmt.Sprintf("p%d", i), rs)
		f.addToCache(p)
		f.rsc.addPod(klog.Background(), p)
	}
	if !f.rsc.expectations.SatisfiedExpectations(klog.Background(), "ns/web") {
		t.Fatal("expectations not satisfied after both creations were observed")
	}
	_ = f.sync("ns/web")
	if len(f.pc.Templates) != 2 || len(f.pc.DeletePodName) != 0 {
		t.Fatalf("steady state must not create or delete")
	}
}

func TestBurstReplicas(t *testing.T) {
	rs := newRS("web", 10)
	f := newFixture(t, 4, rs)
	_ = f.sync("ns/web")
	if len(f.pc.Templates) != 4 {
		t.Fatalf("created %d, want burst of 4", len(f.pc.Templates))
	}
	if add, _ := f.expectations("ns/web"); add != 4 {
		t.Fatalf("expected adds %d", add)
	}

	// Scale-down is capped too.
	rs2 := newRS("down", 1)
	f = newFixture(t, 3, rs2)
	for i := 0; i < 10; i++ {
		f.addToCache(newPod(fmt.Sprintf("p%d", i), rs2))
	}
	_ = f.sync("ns/down")
	if len(f.pc.DeletePodName) != 3 {
		t.Fatalf("deleted %d, want burst of 3", len(f.pc.DeletePodName))
	}
	if _, del := f.expectations("ns/down"); del != 3 {
		t.Fatalf("expected dels %d", del)
	}
	if uids := f.rsc.expectations.GetUIDs("ns/down"); uids.Len() != 3 {
		t.Fatalf("tracked %v", uids)
	}
}

func TestSlowStartStopsAtFirstFailedBatch(t *testing.T) {
	rs := newRS("web", 20)
	f := newFixture(t, BurstReplicas, rs)
	f.pc.CreateLimit = 4 // batches of 1 and 2 succeed; in the batch of 4 only one does
	err := f.sync("ns/web")
	if err == nil {
		t.Fatal("want the creation error")
	}
	if f.pc.CreateCallCount != 7 {
		t.Fatalf("create calls %d, want 7 (batches 1+2+4, then stop)", f.pc.CreateCallCount)
	}
	if add, _ := f.expectations("ns/web"); add != 4 {
		// 20 expected; 13 never attempted and 3 failed are given back.
		t.Fatalf("expected adds %d, want 4", add)
	}
	cond := f.lastStatus().Status.Conditions
	if len(cond) != 1 || cond[0].Type != apps.ReplicaSetReplicaFailure || cond[0].Reason != "FailedCreate" || cond[0].Status != v1.ConditionTrue {
		t.Fatalf("conditions %+v", cond)
	}
}

func TestReplicaFailureOnQuotaAndCleared(t *testing.T) {
	rs := newRS("web", 3)
	f := newFixture(t, BurstReplicas, rs)
	f.useRealPodControl()
	quota := true
	f.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if quota {
			return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "", errors.New(`exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0`))
		}
		return false, nil, nil
	})
	if err := f.sync("ns/web"); err == nil {
		t.Fatal("want error")
	}
	creates := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("create attempts %d, want 1 (slow start)", creates)
	}
	if e := <-f.recorder.Events; !strings.HasPrefix(e, "Warning FailedCreate Error creating: ") || !strings.Contains(e, "exceeded quota") {
		t.Fatalf("event %q", e)
	}
	updated := f.lastStatus()
	cond := updated.Status.Conditions
	if len(cond) != 1 || cond[0].Reason != "FailedCreate" || !strings.Contains(cond[0].Message, "exceeded quota") {
		t.Fatalf("conditions %+v", cond)
	}
	if !f.rsc.expectations.SatisfiedExpectations(klog.Background(), "ns/web") {
		t.Fatal("failed creations must be given back")
	}

	// A second failing sync keeps the condition without rewriting it.
	f.addToCache(updated)
	f.client.ClearActions()
	_ = f.sync("ns/web")
	if n := len(f.statusUpdates()); n != 0 {
		t.Fatalf("unchanged failure rewrote status %d times", n)
	}

	// Quota freed: pods get created and the condition goes away.
	quota = false
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if c := f.lastStatus().Status.Conditions; len(c) != 0 {
		t.Fatalf("condition not cleared: %+v", c)
	}
}

func TestScaleDownDeletesByRank(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, BurstReplicas, rs,
		newPod("ready-old", rs, readySince(time.Hour)),
		newPod("unscheduled", rs, unscheduled),
		newPod("ready-older", rs, readySince(2*time.Hour)),
		newPod("not-ready", rs),
	)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	got := append([]string{}, f.pc.DeletePodName...)
	sort.Strings(got)
	if strings.Join(got, ",") != "not-ready,unscheduled" {
		t.Fatalf("deleted %v", got)
	}
}

func TestScaleDownHonoursDeletionCost(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, BurstReplicas, rs,
		newPod("cheap", rs, readySince(time.Minute), cost("-5")),
		newPod("young", rs, readySince(time.Second), cost("10")),
	)
	_ = f.sync("ns/web")
	if len(f.pc.DeletePodName) != 1 || f.pc.DeletePodName[0] != "cheap" {
		t.Fatalf("deleted %v", f.pc.DeletePodName)
	}
}

// With PodDeletionCost off the annotation is ignored: the more recently
// ready pod goes.
func TestScaleDownIgnoresDeletionCostWhenGateOff(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, BurstReplicas, rs,
		newPod("cheap", rs, readySince(time.Hour), cost("-5")),
		newPod("young", rs, readySince(time.Second), cost("10")),
	)
	f.rsc.opts.PodDeletionCost = false
	_ = f.sync("ns/web")
	if len(f.pc.DeletePodName) != 1 || f.pc.DeletePodName[0] != "young" {
		t.Fatalf("deleted %v, want young", f.pc.DeletePodName)
	}
}

func TestScaleDownPrefersCrowdedNodes(t *testing.T) {
	d := &apps.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "d-uid"}}
	ref := metav1.NewControllerRef(d, apps.SchemeGroupVersion.WithKind("Deployment"))
	rs := newRS("new", 1)
	old := newRS("old", 1)
	rs.OwnerReferences = []metav1.OwnerReference{*ref}
	old.OwnerReferences = []metav1.OwnerReference{*ref}
	same := readySince(time.Hour)
	f := newFixture(t, BurstReplicas, rs, old,
		newPod("alone", rs, onNode("a"), same),
		newPod("crowded", rs, onNode("b"), same),
		// The old ReplicaSet's pod shares node b.
		newPod("old-pod", old, onNode("b"), same),
	)
	_ = f.sync("ns/new")
	if len(f.pc.DeletePodName) != 1 || f.pc.DeletePodName[0] != "crowded" {
		t.Fatalf("deleted %v, want the pod on the crowded node", f.pc.DeletePodName)
	}
}

func TestAdoptionAndRelease(t *testing.T) {
	rs := newRS("web", 3)
	other := newRS("other", 1)
	f := newFixture(t, BurstReplicas, rs, other,
		newPod("orphan", rs, orphan),
		newPod("owned", rs),
		newPod("relabeled", rs, withLabels(map[string]string{"app": "gone"})),
		newPod("foreign", other, withLabels(map[string]string{"app": "web"})),
	)
	f.withoutStatusHolds()
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	var adopt, release int
	for _, p := range f.pc.Patches {
		s := string(p)
		switch {
		case strings.Contains(s, `"$patch":"delete","uid":"web-uid"`) && strings.Contains(s, `"uid":"relabeled-uid"`):
			release++
		case strings.Contains(s, `"kind":"ReplicaSet","name":"web","uid":"web-uid","controller":true`) && strings.Contains(s, `"uid":"orphan-uid"`):
			adopt++
		default:
			t.Fatalf("unexpected patch %s", s)
		}
	}
	if adopt != 1 || release != 1 {
		t.Fatalf("adopt=%d release=%d", adopt, release)
	}
	// Two claimed pods (orphan + owned): one more is created.
	if len(f.pc.Templates) != 1 {
		t.Fatalf("created %d, want 1", len(f.pc.Templates))
	}
	if f.lastStatus().Status.Replicas != 2 {
		t.Fatalf("status replicas %d", f.lastStatus().Status.Replicas)
	}
	// The adoption was vetted with a live GET first.
	gets := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "replicasets" {
			gets++
		}
	}
	if gets != 1 {
		t.Fatalf("live gets %d, want 1", gets)
	}
}

func TestNoAdoptionOrCreationWhileDeleting(t *testing.T) {
	rs := newRS("web", 3)
	now := metav1.Now()
	rs.DeletionTimestamp = &now
	f := newFixture(t, BurstReplicas, rs, newPod("orphan", rs, orphan))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if len(f.pc.Patches) != 0 || len(f.pc.Templates) != 0 {
		t.Fatalf("patches=%d creates=%d", len(f.pc.Patches), len(f.pc.Templates))
	}

	// Cache says alive, the API server says deleting: no adoption.
	rs2 := newRS("web2", 1)
	live := rs2.DeepCopy()
	live.DeletionTimestamp = &now
	f = newFixture(t, BurstReplicas, live, newPod("orphan2", rs2, orphan))
	f.addToCache(rs2)
	if err := f.sync("ns/web2"); err == nil {
		t.Fatal("adoption must fail")
	}
	if len(f.pc.Patches) != 0 {
		t.Fatalf("patched %d", len(f.pc.Patches))
	}
}

func TestStatusMath(t *testing.T) {
	rs := newRS("web", 5)
	rs.Spec.MinReadySeconds = 60
	rs.Status.TerminatingReplicas = ptr.To(int32(0))
	f := newFixture(t, BurstReplicas, rs,
		newPod("available", rs, readySince(2*time.Minute)),
		newPod("ready-only", rs, readySince(15*time.Second)),
		newPod("not-ready", rs),
		newPod("partial-labels", rs, withLabels(map[string]string{"app": "web"})),
		newPod("going", rs, terminating),
		newPod("done", rs, func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
	)
	f.withoutStatusHolds()
	rec := &recordingQueue{TypedRateLimitingInterface: f.rsc.queue}
	f.rsc.queue = rec
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	st := f.lastStatus().Status
	want := apps.ReplicaSetStatus{Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, TerminatingReplicas: ptr.To(int32(1)), ObservedGeneration: 1}
	if st.Replicas != want.Replicas || st.FullyLabeledReplicas != want.FullyLabeledReplicas || st.ReadyReplicas != want.ReadyReplicas ||
		st.AvailableReplicas != want.AvailableReplicas || *st.TerminatingReplicas != 1 || st.ObservedGeneration != 1 {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	// "ready-only" becomes available in ~45s: the sync is scheduled then.
	if len(rec.after) != 1 || rec.after[0] < 40*time.Second || rec.after[0] > 46*time.Second {
		t.Fatalf("requeue after %v, want ~45s", rec.after)
	}
}

type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after []time.Duration
}

func (r *recordingQueue) AddAfter(key string, d time.Duration) { r.after = append(r.after, d) }

func TestNoStatusWriteWhenUnchanged(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, BurstReplicas, rs, newPod("p", rs))
	f.withoutStatusHolds()
	_ = f.sync("ns/web")
	if len(f.statusUpdates()) != 1 {
		t.Fatal("first sync must write status")
	}
	f.addToCache(f.lastStatus())
	f.client.ClearActions()
	_ = f.sync("ns/web")
	if len(f.client.Actions()) != 0 {
		t.Fatalf("steady state made calls: %v", f.client.Actions())
	}
}

func TestStatusRetryAfterConflict(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, BurstReplicas, rs, newPod("p", rs))
	f.withoutStatusHolds()
	calls := 0
	f.client.PrependReactor("update", "replicasets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewConflict(apps.Resource("replicasets"), "web", errors.New("stale"))
		}
		return false, nil, nil
	})
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Fatalf("status writes %d, want 2", calls)
	}
}

func TestPodEventsDriveExpectations(t *testing.T) {
	rs := newRS("web", 1)
	f := newFixture(t, BurstReplicas, rs)
	p1, p2 := newPod("p1", rs), newPod("p2", rs)
	f.addToCache(p1)
	f.addToCache(p2)
	logger := klog.Background()
	_ = f.rsc.expectations.ExpectDeletions(logger, "ns/web", []string{"ns/p1"})

	// Graceful deletion (an update setting deletionTimestamp) counts once.
	cur := p1.DeepCopy()
	cur.ResourceVersion = "2"
	terminating(cur)
	f.rsc.updatePod(logger, p1, cur)
	f.rsc.deletePod(logger, cur)
	if _, del := f.expectations("ns/web"); del != 0 {
		t.Fatalf("dels %d", del)
	}
	// A pod moved to another controller wakes both owners.
	other := newRS("other", 1)
	f.addToCache(other)
	moved := p2.DeepCopy()
	moved.ResourceVersion = "2"
	moved.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, rsGVK)}
	for f.rsc.queue.Len() > 0 {
		k, _ := f.rsc.queue.Get()
		f.rsc.queue.Done(k)
	}
	f.rsc.updatePod(logger, p2, moved)
	if f.rsc.queue.Len() != 2 {
		t.Fatalf("queued %d owners, want 2", f.rsc.queue.Len())
	}
}

func TestDeletedReplicaSetForgetsExpectations(t *testing.T) {
	rs := newRS("web", 2)
	f := newFixture(t, BurstReplicas, rs)
	_ = f.sync("ns/web")
	if f.rsc.expectations.SatisfiedExpectations(klog.Background(), "ns/web") {
		t.Fatal("pending creations expected")
	}
	f.rsc.deleteOwner(klog.Background(), rs)
	if _, ok, _ := f.rsc.expectations.GetExpectations("ns/web"); ok {
		t.Fatal("expectations survive deletion")
	}
}

// v137Features are the v1.37 defaults of the gates the controller reads.
var v137Features = Features{TerminatingReplicas: true, StaleControllerConsistency: true, PodDeletionCost: true}
