package statefulset

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	ctrltestutil "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// queued drains the controller's queue and returns its keys.
func (f *fixture) queued() []string {
	return ctrltestutil.Drain[string](f.ssc.queue)
}

func patchesTo(client *fake.Clientset, resource string) map[string]string {
	out := map[string]string{}
	for _, a := range client.Actions() {
		if p, ok := a.(core.PatchAction); ok && a.GetResource().Resource == resource {
			out[p.GetName()] = string(p.GetPatch())
		}
	}
	return out
}

func TestAdoptAndReleasePods(t *testing.T) {
	set := newSet("web", 2)
	f := newFixture(t, set)
	orphan := newStatefulSetPod(set, 1)
	orphan.OwnerReferences = nil
	orphan.UID = "orphan-uid"
	orphan.Status.Phase = v1.PodRunning
	wrongName := newStatefulSetPod(set, 0)
	wrongName.Name = "other-0"
	wrongName.OwnerReferences = nil
	unmatched := newStatefulSetPod(set, 5)
	unmatched.Labels = map[string]string{"app": "else"}
	unmatched.UID = "unmatched-uid"
	otherController := newStatefulSetPod(set, 0)
	otherController.Name = "web-7"
	otherController.OwnerReferences[0].UID = "someone-else"
	for _, p := range []*v1.Pod{orphan, wrongName, unmatched, otherController} {
		if err := f.store.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*v1.Pod{orphan, unmatched} {
		if _, err := f.client.CoreV1().Pods(testNS).Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.mustSync("web")
	patches := patchesTo(f.client, "pods")
	if p := patches["web-1"]; !strings.Contains(p, `"uid":"orphan-uid"`) || !strings.Contains(p, `"controller":true`) || !strings.Contains(p, `"uid":"uid-web"`) {
		t.Errorf("adoption patch %q", p)
	}
	if p := patches["web-5"]; !strings.Contains(p, `"$patch":"delete"`) || !strings.Contains(p, `"uid":"uid-web"`) {
		t.Errorf("release patch %q", p)
	}
	if _, ok := patches["other-0"]; ok {
		t.Error("adopted a pod not named like a member")
	}
	if _, ok := patches["web-7"]; ok {
		t.Error("touched another controller's pod")
	}
	// The adoption was preceded by a live check of the set.
	gets := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "statefulsets" {
			gets++
		}
	}
	if gets != 1 {
		t.Errorf("%d live GETs of the set, want 1", gets)
	}
}

func TestNoAdoptionWhileSetIsDeleted(t *testing.T) {
	set := newSet("web", 1)
	f := newFixture(t, set)
	// The cache is stale: the API server already marks the set deleted.
	live := set.DeepCopy()
	live.DeletionTimestamp = ptr.To(metav1.Now())
	if err := f.client.Tracker().Update(apps.SchemeGroupVersion.WithResource("statefulsets"), live, testNS); err != nil {
		t.Fatal(err)
	}
	orphan := newStatefulSetPod(set, 0)
	orphan.OwnerReferences = nil
	if err := f.store.pods.Add(orphan); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("web"); err == nil || !strings.Contains(err.Error(), "has just been deleted") {
		t.Errorf("error %v", err)
	}
	if len(patchesTo(f.client, "pods")) != 0 {
		t.Error("adopted for a set being deleted")
	}
}

func TestAdoptOrphanRevisions(t *testing.T) {
	set := newSet("web", 1)
	f := newFixture(t, set)
	orphan, err := newRevision(set, 1, ptr.To[int32](0))
	if err != nil {
		t.Fatal(err)
	}
	orphan.Namespace = testNS
	orphan.OwnerReferences = nil
	if err := f.revIdx.Add(orphan); err != nil {
		t.Fatal(err)
	}
	f.mustSync("web")
	revs := f.revisions("web")
	if len(revs) != 1 || revs[0].Name != orphan.Name {
		t.Fatalf("revisions %v", revs)
	}
	if ref := metav1.GetControllerOf(revs[0]); ref == nil || ref.UID != set.UID {
		t.Errorf("orphan revision not adopted: %+v", revs[0].OwnerReferences)
	}
	if f.getSet("web").Status.UpdateRevision != orphan.Name {
		t.Error("the adopted revision was not reused")
	}
}

func TestPodEventHandlers(t *testing.T) {
	set := newSet("web", 2)
	set.Spec.MinReadySeconds = 10
	f := newFixture(t, set)
	logger := klog.Background()
	owned := newStatefulSetPod(set, 0)
	owned.ResourceVersion = "1"

	f.ssc.addPod(logger, owned)
	if got := f.queued(); len(got) != 1 || got[0] != "default/web" {
		t.Errorf("add owned: %v", got)
	}

	orphan := owned.DeepCopy()
	orphan.OwnerReferences = nil
	f.ssc.addPod(logger, orphan)
	if got := f.queued(); len(got) != 1 {
		t.Errorf("add orphan: %v", got)
	}

	foreign := owned.DeepCopy()
	foreign.OwnerReferences[0].UID = "other"
	f.ssc.addPod(logger, foreign)
	if got := f.queued(); len(got) != 0 {
		t.Errorf("add foreign: %v", got)
	}

	// Resync (same resource version): ignored.
	f.ssc.updatePod(logger, owned, owned.DeepCopy())
	if got := f.queued(); len(got) != 0 {
		t.Errorf("resync: %v", got)
	}
	cur := owned.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Status.Phase = v1.PodRunning
	f.ssc.updatePod(logger, owned, cur)
	if got := f.queued(); len(got) != 1 {
		t.Errorf("update: %v", got)
	}

	// Released: the old owner hears of it.
	released := cur.DeepCopy()
	released.ResourceVersion = "3"
	released.OwnerReferences = nil
	released.Labels = map[string]string{"app": "nothing"}
	f.ssc.updatePod(logger, cur, released)
	if got := f.queued(); len(got) != 1 {
		t.Errorf("release: %v", got)
	}

	f.ssc.deletePod(logger, cache.DeletedFinalStateUnknown{Key: "default/web-0", Obj: owned})
	if got := f.queued(); len(got) != 1 {
		t.Errorf("tombstone delete: %v", got)
	}
	f.ssc.deletePod(logger, orphan)
	if got := f.queued(); len(got) != 0 {
		t.Errorf("orphan delete: %v", got)
	}
	f.ssc.deletePod(logger, "garbage")
}

func TestStaleCacheSkipsSync(t *testing.T) {
	f := newFixture(t, newSet("web", 1))
	store := &fakeConsistency{err: &controller.ConsistencyError{ReadRV: "1", WroteRV: "2", GroupResource: podsResource}}
	f.ssc.consistency = store
	before, _ := testutil.GetCounterMetricValue(staleSyncSkips.WithLabelValues("", "pods"))
	if err := f.sync("web"); err == nil {
		t.Fatal("a stale cache must requeue")
	}
	after, _ := testutil.GetCounterMetricValue(staleSyncSkips.WithLabelValues("", "pods"))
	if after != before+1 {
		t.Errorf("stale_sync_skips_total went %v -> %v", before, after)
	}
	if len(f.store.opsSnapshot()) != 0 {
		t.Error("synced on a stale cache")
	}
}

type fakeConsistency struct{ err error }

func (c *fakeConsistency) WroteAt(types.NamespacedName, types.UID, schema.GroupResource, string) {}
func (c *fakeConsistency) Clear(types.NamespacedName, types.UID)                                 {}
func (c *fakeConsistency) EnsureReady(types.NamespacedName) error                                { return c.err }

func TestDeletedSetForgetsMetrics(t *testing.T) {
	f := newFixture(t, newSet("gone", 1))
	f.converge("gone")
	if v := gaugeValue(t, maxUnavailableGauge, testNS, "gone", "OrderedReady"); v != 1 {
		t.Fatalf("gauge %v", v)
	}
	if err := f.setIdx.Delete(f.getSet("gone")); err != nil {
		t.Fatal(err)
	}
	f.mustSync("gone")
	if maxUnavailableGauge.DeleteLabelValues(testNS, "gone", "OrderedReady") {
		t.Error("series of a deleted set kept")
	}
}

// The production object store writes through the API with the verbs the
// controller's RBAC role allows, and records what it wrote.
func TestAPIStore(t *testing.T) {
	set := withPolicy(newSet("web", 1), retainPolicy, deletePolicy)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := newRecordingConsistency()
	store := &apiStore{client: client, podLister: factory.Core().V1().Pods().Lister(), claimLister: factory.Core().V1().PersistentVolumeClaims().Lister(), consistency: recorder}
	pc := &podControl{store: store, recorder: nopRecorder{}}
	ctx := context.Background()
	pod := newStatefulSetPod(set, 0)
	if err := pc.createPod(ctx, set, pod); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if strings.Join(verbs, ",") != "create persistentvolumeclaims,create pods" {
		t.Errorf("API calls %v", verbs)
	}
	claim, err := client.CoreV1().PersistentVolumeClaims(testNS).Get(ctx, "datadir-web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Created bare, as upstream; the empty cache hides it from the owner
	// fix-up, which a later sync does.
	if ownerNames(claim) != "" {
		t.Errorf("claim owners %q, want none", ownerNames(claim))
	}
	if got := recorder.resources(); got != "persistentvolumeclaims,pods" {
		t.Errorf("recorded writes %s", got)
	}
	if err := store.UpdateClaim(ctx, claim, set); err != nil {
		t.Fatal(err)
	}
	if a := client.Actions()[len(client.Actions())-1]; a.GetVerb() != "update" {
		t.Errorf("claims must be updated, not %s", a.GetVerb())
	}
	if err := pc.deletePod(ctx, set, pod); err != nil {
		t.Fatal(err)
	}
	// Deleting a pod already gone succeeds.
	if err := pc.deletePod(ctx, set, pod); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

// Cached pods are trimmed (controller.TrimPodForCache): an identity fix
// must be written over a live read, or the update would carry the trimmed
// spec (which the apiserver refuses: a pod's spec is immutable there).
func TestAPIStoreUpdatesPodsOverALiveRead(t *testing.T) {
	set := newSet("web", 1)
	stored := newStatefulSetPod(set, 0)
	stored.UID = "pod-uid"
	stored.Spec.Containers[0].Command = []string{"/serve"}
	stored.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready"}}}
	stored.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/etc/web"}}
	stored.Spec.Volumes = append(stored.Spec.Volumes, v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}})
	client := fake.NewClientset(stored)
	factory := informers.NewSharedInformerFactory(client, 0)
	store := &apiStore{client: client, podLister: factory.Core().V1().Pods().Lister(), claimLister: factory.Core().V1().PersistentVolumeClaims().Lister(), consistency: newRecordingConsistency()}
	pc := &podControl{store: store, recorder: nopRecorder{}}
	ctx := context.Background()

	cached := stored.DeepCopy()
	controller.TrimPodForCache(cached)
	delete(cached.Labels, apps.StatefulSetPodNameLabel)
	cached.Annotations = map[string]string{"note": "kept"}
	if err := pc.updatePod(ctx, set, cached); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Pods(testNS).Get(ctx, stored.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[apps.StatefulSetPodNameLabel] != stored.Name || got.Annotations["note"] != "kept" {
		t.Errorf("metadata not written: labels %v, annotations %v", got.Labels, got.Annotations)
	}
	if !equality.Semantic.DeepEqual(got.Spec, stored.Spec) {
		t.Errorf("spec changed by the update:\n got %+v\nwant %+v", got.Spec, stored.Spec)
	}

	// A pod replaced since it was cached is a conflict, not overwritten.
	replaced := cached.DeepCopy()
	replaced.UID = "older"
	if err := store.UpdatePod(ctx, replaced, set); !apierrors.IsConflict(err) {
		t.Errorf("update of a replaced pod: %v, want a conflict", err)
	}
}

func TestAPIStatusWriterRetriesConflicts(t *testing.T) {
	set := newSet("web", 1)
	client := fake.NewClientset(set)
	factory := informers.NewSharedInformerFactory(client, 0)
	if err := factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(set); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	client.PrependReactor("update", "statefulsets", func(core.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(setsResource, "web", fmt.Errorf("conflict"))
		}
		return false, nil, nil
	})
	recorder := newRecordingConsistency()
	w := &apiStatusWriter{client: client, setLister: factory.Apps().V1().StatefulSets().Lister(), consistency: recorder}
	if err := w.UpdateStatus(context.Background(), set.DeepCopy(), &apps.StatefulSetStatus{Replicas: 1, ObservedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	got, _ := client.AppsV1().StatefulSets(testNS).Get(context.Background(), "web", metav1.GetOptions{})
	if got.Status.Replicas != 1 {
		t.Errorf("status %+v", got.Status)
	}
	if recorder.resources() != "statefulsets" {
		t.Errorf("recorded %s", recorder.resources())
	}
}

type recordingConsistency struct {
	mu   sync.Mutex
	seen []string
}

func newRecordingConsistency() *recordingConsistency { return &recordingConsistency{} }

func (c *recordingConsistency) WroteAt(_ types.NamespacedName, _ types.UID, gr schema.GroupResource, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, gr.Resource)
}
func (c *recordingConsistency) Clear(types.NamespacedName, types.UID)  {}
func (c *recordingConsistency) EnsureReady(types.NamespacedName) error { return nil }
func (c *recordingConsistency) resources() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.seen, ",")
}

type nopRecorder struct{}

func (nopRecorder) Event(runtime.Object, string, string, string)                  {}
func (nopRecorder) Eventf(runtime.Object, string, string, string, ...interface{}) {}
func (nopRecorder) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...interface{}) {
}

// TestRunConverges drives the real controller (informers, queue, workers,
// API writes) against a fake clientset: the set reaches its replicas.
func TestRunConverges(t *testing.T) {
	set := newSet("web", 3)
	set.Spec.PodManagementPolicy = apps.ParallelPodManagement
	client := fake.NewClientset()
	// Play the API server: new pods are Pending and ready at once.
	client.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.CreateAction).GetObject().(*v1.Pod)
		p.Status.Phase = v1.PodRunning
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	ssc := NewController(ctx, factory.Core().V1().Pods(), factory.Apps().V1().StatefulSets(),
		factory.Core().V1().PersistentVolumeClaims(), factory.Apps().V1().ControllerRevisions(), client, v137Features)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { ssc.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	if _, err := client.AppsV1().StatefulSets(testNS).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrltestutil.WaitUntil(t, "never converged", func(ctx context.Context) (bool, error) {
		got, err := client.AppsV1().StatefulSets(testNS).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ReadyReplicas == 3 && got.Status.CurrentRevision != "", nil
	})
	claims, _ := client.CoreV1().PersistentVolumeClaims(testNS).List(ctx, metav1.ListOptions{})
	revs, _ := client.AppsV1().ControllerRevisions(testNS).List(ctx, metav1.ListOptions{})
	if len(claims.Items) != 3 || len(revs.Items) != 1 {
		t.Errorf("%d claims, %d revisions", len(claims.Items), len(revs.Items))
	}
}
