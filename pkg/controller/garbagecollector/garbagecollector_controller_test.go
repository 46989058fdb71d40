package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// actions returns the client's verbs on resources as "verb resource name".
func (g *testGC) actions() []string {
	var out []string
	for _, a := range g.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if n, ok := a.(interface{ GetName() string }); ok {
			s += " " + n.GetName()
		}
		out = append(out, s)
	}
	return out
}

func (g *testGC) deleteActions() []clienttesting.DeleteActionImpl {
	var out []clienttesting.DeleteActionImpl
	for _, a := range g.client.Actions() {
		if d, ok := a.(clienttesting.DeleteActionImpl); ok {
			out = append(out, d)
		}
	}
	return out
}

func (g *testGC) patchActions() []clienttesting.PatchActionImpl {
	var out []clienttesting.PatchActionImpl
	for _, a := range g.client.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			out = append(out, p)
		}
	}
	return out
}

func TestDependentOfAbsentOwnerIsDeletedInBackground(t *testing.T) {
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t, dep)
	g.observe(addEvent, dep, nil)

	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	dels := g.deleteActions()
	if len(dels) != 1 || dels[0].Name != "dep" {
		t.Fatalf("deletes = %v, actions %v", dels, g.actions())
	}
	opts := dels[0].DeleteOptions
	if *opts.PropagationPolicy != metav1.DeletePropagationBackground {
		t.Errorf("policy = %v, want Background", *opts.PropagationPolicy)
	}
	if *opts.Preconditions.UID != "dep-uid" || *opts.Preconditions.ResourceVersion != "1" {
		t.Errorf("preconditions = %+v", opts.Preconditions)
	}
	// The owner lookup result is cached for the next dependent.
	if !g.absentOwnerCache.Has(objectReference{OwnerReference: ref("ConfigMap", "owner", "owner-uid"), Namespace: "ns"}) {
		t.Error("absent owner not cached")
	}
}

func TestOwnerWithOtherUIDIsDangling(t *testing.T) {
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "old-uid"))
	g := newTestGC(t, dep, cm("ns", "owner", "new-uid"))
	g.observe(addEvent, dep, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	if len(g.deleteActions()) != 1 {
		t.Errorf("actions = %v, want the dependent deleted", g.actions())
	}
}

func TestPropagationFollowsDependentFinalizers(t *testing.T) {
	for _, tc := range []struct {
		finalizer string
		want      metav1.DeletionPropagation
	}{
		{metav1.FinalizerOrphanDependents, metav1.DeletePropagationOrphan},
		{metav1.FinalizerDeleteDependents, metav1.DeletePropagationForeground},
	} {
		t.Run(tc.finalizer, func(t *testing.T) {
			dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
			dep.Finalizers = []string{tc.finalizer}
			g := newTestGC(t, dep)
			g.observe(addEvent, dep, nil)
			if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
				t.Fatal(err)
			}
			dels := g.deleteActions()
			if len(dels) != 1 || *dels[0].DeleteOptions.PropagationPolicy != tc.want {
				t.Errorf("deletes = %+v, want policy %v", dels, tc.want)
			}
		})
	}
}

func TestSolidOwnerKeepsDependentAndDropsDanglingRef(t *testing.T) {
	owner := cm("ns", "owner", "owner-uid")
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"), ref("ConfigMap", "gone", "gone-uid"))
	g := newTestGC(t, owner, dep)
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, dep, nil)

	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	if len(g.deleteActions()) != 0 {
		t.Errorf("dependent with a live owner was deleted: %v", g.actions())
	}
	patches := g.patchActions()
	if len(patches) != 1 || patches[0].PatchType != types.StrategicMergePatchType {
		t.Fatalf("patches = %v", g.actions())
	}
	want := `{"metadata":{"uid":"dep-uid","ownerReferences":[{"$patch":"delete","uid":"gone-uid"}]}}`
	if string(patches[0].Patch) != want {
		t.Errorf("patch = %s, want %s", patches[0].Patch, want)
	}
}

func TestJSONMergePatchFallbackWhenStrategicUnsupported(t *testing.T) {
	owner := cm("ns", "owner", "owner-uid")
	w := obj("example.com/v1", "Widget", "ns", "w", "w-uid", ref("ConfigMap", "owner", "owner-uid"), ref("ConfigMap", "gone", "gone-uid"))
	g := newTestGC(t, owner, w)
	g.client.PrependReactor("patch", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.PatchActionImpl).PatchType == types.StrategicMergePatchType {
			return true, nil, apierrors.NewGenericServerResponse(415, "patch", schema.GroupResource{}, "", "unsupported", 0, false)
		}
		return false, nil, nil
	})
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, w, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node("w-uid")); err != nil {
		t.Fatal(err)
	}
	patches := g.patchActions()
	if len(patches) != 2 || patches[1].PatchType != types.MergePatchType {
		t.Fatalf("patches = %v", g.actions())
	}
	var got ownerRefsPatch
	if err := json.Unmarshal(patches[1].Patch, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != "1" || len(got.Metadata.OwnerReferences) != 1 || got.Metadata.OwnerReferences[0].UID != "owner-uid" {
		t.Errorf("merge patch = %s", patches[1].Patch)
	}
}

func TestMissingItemBecomesVirtualDelete(t *testing.T) {
	g := newTestGC(t)
	// A virtual owner that does not exist.
	g.observe(addEvent, cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	queued(g.attemptToDelete)
	owner := g.node("owner-uid")

	if action, _ := g.attemptToDeleteWorker(g.ctx, owner); action != forgetItem {
		t.Errorf("action = %v, want forget", action)
	}
	g.drainGraph()
	if g.node("owner-uid") != nil {
		t.Error("virtual owner should be removed once verified absent")
	}
	if got := queued(g.attemptToDelete); !got["dep-uid"] {
		t.Errorf("attemptToDelete = %v, want the orphaned dependent", got)
	}
}

func TestExistingVirtualOwnerIsRequeuedUntilObserved(t *testing.T) {
	owner := cm("ns", "owner", "owner-uid")
	g := newTestGC(t, owner)
	g.observe(addEvent, cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("owner-uid")); action != requeueItem {
		t.Errorf("action = %v, want requeue of an unobserved but existing owner", action)
	}
}

func TestUnknownKindIsRetried(t *testing.T) {
	g := newTestGC(t)
	n := newNode(objectReference{OwnerReference: metav1.OwnerReference{APIVersion: "nope/v1", Kind: "Thing", Name: "x", UID: "x"}, Namespace: "ns"}, nil)
	g.dependencyGraphBuilder.uidToNode.Write(n)
	var rme *restMappingError
	if err := g.attemptToDeleteItem(g.ctx, n); !errors.As(err, &rme) {
		t.Fatalf("err = %v, want a REST mapping error", err)
	}
	if action, _ := g.attemptToDeleteWorker(g.ctx, n); action != requeueItem {
		t.Errorf("action = %v, want requeue", action)
	}
}

func TestClusterScopedDependentOfNamespacedOwner(t *testing.T) {
	n := obj("v1", "Node", "", "node", "node-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t, n)
	g.observe(addEvent, n, nil)
	err := g.attemptToDeleteItem(g.ctx, g.node("node-uid"))
	if !errors.Is(err, errNamespacedOwnerOfClusterScopedObject) {
		t.Fatalf("err = %v", err)
	}
	if action, _ := g.attemptToDeleteWorker(g.ctx, g.node("node-uid")); action != forgetItem {
		t.Errorf("action = %v, want forget (never resolves)", action)
	}
	if len(g.deleteActions()) != 0 {
		t.Errorf("nothing should be deleted: %v", g.actions())
	}
}

func deletingWith(o *metav1.PartialObjectMetadata, finalizers ...string) *metav1.PartialObjectMetadata {
	o = o.DeepCopy()
	now := metav1.Now()
	o.DeletionTimestamp = &now
	o.Finalizers = finalizers
	return o
}

func TestForegroundOwnerWaitsThenDropsFinalizer(t *testing.T) {
	owner := deletingWith(cm("ns", "owner", "owner-uid"), metav1.FinalizerDeleteDependents)
	dep := cm("ns", "dep", "dep-uid", blocking(ref("ConfigMap", "owner", "owner-uid")))
	g := newTestGC(t, owner, dep)
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, dep, nil)
	queued(g.attemptToDelete)

	// A blocking dependent exists: the owner queues it, keeps its finalizer.
	if err := g.attemptToDeleteItem(g.ctx, g.node("owner-uid")); err != nil {
		t.Fatal(err)
	}
	if got := queued(g.attemptToDelete); !got["dep-uid"] {
		t.Errorf("attemptToDelete = %v, want the blocking dependent", got)
	}
	if len(g.patchActions()) != 0 {
		t.Errorf("finalizer removed too early: %v", g.actions())
	}

	// The dependent, whose only owner waits for it, is deleted (background:
	// it has no dependents of its own).
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	if dels := g.deleteActions(); len(dels) != 1 || dels[0].Name != "dep" {
		t.Fatalf("deletes = %v", g.actions())
	}

	// Its delete event frees the owner.
	g.observe(deleteEvent, dep, nil)
	if got := queued(g.attemptToDelete); !got["owner-uid"] {
		t.Errorf("attemptToDelete = %v, want the waiting owner", got)
	}
	g.client.ClearActions()
	if err := g.attemptToDeleteItem(g.ctx, g.node("owner-uid")); err != nil {
		t.Fatal(err)
	}
	// One read: the finalizer patch is pinned to the version just read.
	if got, want := g.actions(), []string{"get configmaps owner", "patch configmaps owner"}; !slices.Equal(got, want) {
		t.Errorf("actions = %v, want %v", got, want)
	}
	patches := g.patchActions()
	if len(patches) != 1 || patches[0].PatchType != types.MergePatchType {
		t.Fatalf("actions = %v", g.actions())
	}
	var p finalizersPatch
	if err := json.Unmarshal(patches[0].Patch, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Metadata.Finalizers) != 0 || p.Metadata.ResourceVersion != "1" {
		t.Errorf("finalizer patch = %s", patches[0].Patch)
	}
	if !strings.Contains(string(patches[0].Patch), `"finalizers":null`) {
		t.Errorf("finalizers must be cleared explicitly: %s", patches[0].Patch)
	}
}

func TestDependentWithDependentsOfForegroundOwnerGoesForeground(t *testing.T) {
	owner := deletingWith(cm("ns", "owner", "owner-uid"), metav1.FinalizerDeleteDependents)
	mid := cm("ns", "mid", "mid-uid", blocking(ref("ConfigMap", "owner", "owner-uid")))
	leaf := cm("ns", "leaf", "leaf-uid", blocking(ref("ConfigMap", "mid", "mid-uid")))
	g := newTestGC(t, owner, mid, leaf)
	for _, o := range []*metav1.PartialObjectMetadata{owner, mid, leaf} {
		g.observe(addEvent, o, nil)
	}
	if err := g.attemptToDeleteItem(g.ctx, g.node("mid-uid")); err != nil {
		t.Fatal(err)
	}
	dels := g.deleteActions()
	if len(dels) != 1 || dels[0].Name != "mid" || *dels[0].DeleteOptions.PropagationPolicy != metav1.DeletePropagationForeground {
		t.Errorf("deletes = %+v", dels)
	}
}

// In a cycle a→c→b→a with a deleting in foreground, c (owner b waiting,
// dependent a deleting) first stops blocking b, then goes foreground too.
// Retried once its reference is already non-blocking, it must not patch
// again: a null ownerReferences list would strip every owner from c.
func TestCycleMemberUnblocksOwnersOnceThenDeletes(t *testing.T) {
	a := deletingWith(cm("ns", "a", "a-uid", blocking(ref("ConfigMap", "c", "c-uid"))), metav1.FinalizerDeleteDependents)
	b := deletingWith(cm("ns", "b", "b-uid", blocking(ref("ConfigMap", "a", "a-uid"))), metav1.FinalizerDeleteDependents)
	c := cm("ns", "c", "c-uid", blocking(ref("ConfigMap", "b", "b-uid")))
	g := newTestGC(t, a, b, c)
	for _, o := range []*metav1.PartialObjectMetadata{a, b, c} {
		g.observe(addEvent, o, nil)
	}
	if err := g.attemptToDeleteItem(g.ctx, g.node("c-uid")); err != nil {
		t.Fatal(err)
	}
	patches := g.patchActions()
	if len(patches) != 1 || !strings.Contains(string(patches[0].Patch), `"blockOwnerDeletion":false`) {
		t.Fatalf("want one unblocking patch, got %v", g.actions())
	}
	dels := g.deleteActions()
	if len(dels) != 1 || *dels[0].DeleteOptions.PropagationPolicy != metav1.DeletePropagationForeground {
		t.Fatalf("want a foreground delete of c, got %v", g.actions())
	}

	// A retry finds c's reference already non-blocking: no patch this time.
	unblocked := cm("ns", "c", "c-uid", ref("ConfigMap", "b", "b-uid"))
	unblocked.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false)
	g = newTestGC(t, a, b, unblocked)
	for _, o := range []*metav1.PartialObjectMetadata{a, b, unblocked} {
		g.observe(addEvent, o, nil)
	}
	if err := g.attemptToDeleteItem(g.ctx, g.node("c-uid")); err != nil {
		t.Fatal(err)
	}
	if len(g.patchActions()) != 0 || len(g.deleteActions()) != 1 {
		t.Errorf("want only a foreground delete, got %v", g.actions())
	}
}

func TestUnblockPatchNeverClearsOwnerReferences(t *testing.T) {
	n := &node{identity: objectReference{OwnerReference: metav1.OwnerReference{UID: "u"}}}
	p, err := n.unblockOwnerReferencesStrategicMergePatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p), "ownerReferences") {
		t.Errorf("patch %s would replace the owner references", p)
	}
}

func TestBeingDeletedItemIsSkipped(t *testing.T) {
	dep := deletingWith(cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), "example.com/x")
	g := newTestGC(t, dep)
	g.observe(addEvent, dep, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	if len(g.client.Actions()) != 0 {
		t.Errorf("actions = %v, want none", g.actions())
	}
}

func TestOrphanRemovesOwnerRefsThenFinalizer(t *testing.T) {
	owner := deletingWith(cm("ns", "owner", "owner-uid"), metav1.FinalizerOrphanDependents, "example.com/keep")
	d1 := cm("ns", "d1", "d1-uid", blocking(ref("ConfigMap", "owner", "owner-uid")))
	d2 := cm("ns", "d2", "d2-uid", ref("ConfigMap", "owner", "owner-uid"), ref("ConfigMap", "other", "other-uid"))
	g := newTestGC(t, owner, d1, d2)
	for _, o := range []*metav1.PartialObjectMetadata{owner, d1, d2} {
		g.observe(addEvent, o, nil)
	}
	if got := queued(g.attemptToOrphan); !got["owner-uid"] {
		t.Fatalf("attemptToOrphan = %v", got)
	}
	if action := g.attemptToOrphanWorker(g.ctx, g.node("owner-uid")); action != forgetItem {
		t.Fatalf("action = %v, actions %v", action, g.actions())
	}

	patched := map[string]string{}
	var finalizer *clienttesting.PatchActionImpl
	for _, p := range g.patchActions() {
		if p.Name == "owner" {
			finalizer = &p
			continue
		}
		patched[p.Name] = string(p.Patch)
	}
	for _, d := range []string{"d1", "d2"} {
		want := `{"metadata":{"uid":"` + d + `-uid","ownerReferences":[{"$patch":"delete","uid":"owner-uid"}]}}`
		if patched[d] != want {
			t.Errorf("%s patch = %s, want %s", d, patched[d], want)
		}
	}
	if finalizer == nil {
		t.Fatal("orphan finalizer not removed")
	}
	var p finalizersPatch
	if err := json.Unmarshal(finalizer.Patch, &p); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Metadata.Finalizers, []string{"example.com/keep"}) {
		t.Errorf("finalizers after orphaning = %v", p.Metadata.Finalizers)
	}
	if len(g.deleteActions()) != 0 {
		t.Errorf("orphaning must not delete: %v", g.actions())
	}
}

func TestOrphanFailureRequeues(t *testing.T) {
	owner := deletingWith(cm("ns", "owner", "owner-uid"), metav1.FinalizerOrphanDependents)
	d1 := cm("ns", "d1", "d1-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t, owner, d1)
	g.client.PrependReactor("patch", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("boom"))
	})
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, d1, nil)
	if action := g.attemptToOrphanWorker(g.ctx, g.node("owner-uid")); action != requeueItem {
		t.Errorf("action = %v, want requeue", action)
	}
}

// fakeDiscovery serves a fixed preferred-resources list.
type fakeDiscovery struct {
	lists []*metav1.APIResourceList
	err   error
}

func (f *fakeDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, nil
}
func (f *fakeDiscovery) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	return nil, f.lists, f.err
}
func (f *fakeDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	return f.lists, f.err
}
func (f *fakeDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	return f.lists, f.err
}
func (f *fakeDiscovery) OpenAPISchema() (*openapi_v2.Document, error) { return nil, nil }

var allVerbs = metav1.Verbs{"create", "delete", "get", "list", "watch"}

func TestGetDeletableResources(t *testing.T) {
	d := &fakeDiscovery{lists: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: allVerbs},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
			{Name: "nodes", Kind: "Node", Verbs: allVerbs},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: metav1.Verbs{"delete", "list"}},
		}},
	}}
	got, err := GetDeletableResources(logger(t), d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[schema.GroupVersionResource]struct{}{configMapGVR: {}, nodeGVR: {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deletable = %v, want %v", got, want)
	}

	// Partial failures still return what was found.
	d.err = &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "broken", Version: "v1"}: errors.New("x")}}
	got, err = GetDeletableResources(logger(t), d)
	if err == nil || len(got) != 2 {
		t.Errorf("partial: got %v, err %v", got, err)
	}
}

// TestSyncAddsAndDropsMonitors drives rediscovery: a resource appearing
// gets a monitor without a restart, and one disappearing loses it.
func TestSyncAddsAndDropsMonitors(t *testing.T) {
	g := newTestGC(t, cm("ns", "a", "a-uid"))
	ctx, cancel := context.WithCancel(g.ctx)
	defer cancel()
	gb := g.dependencyGraphBuilder
	go gb.Run(ctx)

	d := &switchableDiscovery{}
	d.set([]*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: allVerbs},
	}}})
	go g.Sync(ctx, d, 100*time.Millisecond)

	testutil.WaitFor(t, "configmaps monitor synced", func() bool { return gb.IsResourceSynced(configMapGVR) })
	testutil.WaitFor(t, "configmap in graph", func() bool { return g.GraphHasUID("a-uid") })

	d.set([]*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: allVerbs},
	}}})
	testutil.WaitFor(t, "pods monitor synced", func() bool { return gb.IsResourceSynced(podGVR) })
	testutil.WaitFor(t, "configmaps monitor dropped", func() bool {
		gb.monitorLock.RLock()
		defer gb.monitorLock.RUnlock()
		_, ok := gb.monitors[configMapGVR]
		return !ok
	})
}

func TestSyncErrorMetric(t *testing.T) {
	g := newTestGC(t)
	before, _ := metricstestutil.GetCounterMetricValue(resourcesSyncError)
	ctx, cancel := context.WithCancel(g.ctx)
	d := &fakeDiscovery{} // no resources: counted as a sync error
	done := make(chan struct{})
	go func() { g.Sync(ctx, d, time.Hour); close(done) }()
	testutil.WaitFor(t, "sync error counted", func() bool {
		v, _ := metricstestutil.GetCounterMetricValue(resourcesSyncError)
		return v > before
	})
	cancel()
	<-done

	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "garbagecollector_controller_resources_sync_error_total" {
			found = true
		}
	}
	if !found {
		t.Error("metric not registered in legacyregistry")
	}
}

// An item the monitor cache holds is not read again: only its owner is
// looked up live, and the delete is pinned to the cached resourceVersion.
func TestCachedItemIsDeletedWithoutALiveRead(t *testing.T) {
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t, dep)
	attemptCached(t, g, dep)
	if got, want := g.actions(), []string{"get configmaps owner", "delete configmaps dep"}; !slices.Equal(got, want) {
		t.Fatalf("actions = %v, want %v", got, want)
	}
	pre := g.deleteActions()[0].DeleteOptions.Preconditions
	if pre == nil || pre.ResourceVersion == nil || *pre.ResourceVersion != dep.ResourceVersion {
		t.Errorf("delete preconditions = %+v, want the cached resourceVersion", pre)
	}
}

// A cached item that is behind the live one is not deleted on its stale
// owner references: the pinned delete is refused, and the live item,
// which has gained an existing owner, stays.
func TestStaleCachedItemIsNotDeleted(t *testing.T) {
	stale := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	live := stale.DeepCopy()
	live.ResourceVersion = "2"
	live.OwnerReferences = append(live.OwnerReferences, ref("ConfigMap", "keeper", "keeper-uid"))
	keeper := cm("ns", "keeper", "keeper-uid")
	g := newTestGC(t, live, keeper)
	g.refuseStaleDeletes()
	g.cache(configMapGVR, stale)
	g.observe(addEvent, stale, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a conflict (retried later)", err)
	}
	if _, err := g.client.Tracker().Get(configMapGVR, "ns", "dep"); err != nil {
		t.Fatalf("dependent deleted on a stale copy: %v", err)
	}

	// Once the cache catches up, the existing owner keeps it and only the
	// dangling reference goes.
	g.cache(configMapGVR, live)
	g.client.ClearActions()
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
		t.Fatal(err)
	}
	if len(g.deleteActions()) != 0 || len(g.patchActions()) != 1 {
		t.Errorf("actions = %v, want one patch dropping the dangling reference", g.actions())
	}
}

// attemptCached puts dep in the monitor cache and the graph and attempts
// to delete it once.
func attemptCached(t *testing.T, g *testGC, dep *metav1.PartialObjectMetadata) {
	t.Helper()
	g.cache(configMapGVR, dep)
	g.observe(addEvent, dep, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node(dep.UID)); err != nil {
		t.Fatal(err)
	}
}

// deleteTwice deletes dep (absent owner) from the cache, lets the cache
// show cachedAfter (nil: unchanged) and attempts the item again.
func deleteTwice(t *testing.T, g *testGC, dep, cachedAfter *metav1.PartialObjectMetadata) error {
	t.Helper()
	attemptCached(t, g, dep)
	if n := len(g.deleteActions()); n != 1 {
		t.Fatalf("actions = %v, want one delete", g.actions())
	}
	if cachedAfter != nil {
		g.cache(configMapGVR, cachedAfter)
	}
	return g.attemptToDeleteItem(g.ctx, g.node(dep.UID))
}

// An item queued again before the informer reports its deletion still
// looks undeleted in the cache; deleting it again would only 404.
func TestItemDeletedAtCachedVersionIsNotDeletedAgain(t *testing.T) {
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t, dep)
	err := deleteTwice(t, g, dep, nil)
	if n := len(g.deleteActions()); n != 1 {
		t.Errorf("actions = %v, want no second delete", g.actions())
	}
	if err != nil {
		t.Errorf("second attempt: %v", err)
	}
}

func TestItemIsDeletedAgainWhenNotKnownDeletedAtItsVersion(t *testing.T) {
	// acknowledgeDeletes keeps the object, as for one with finalizers, so
	// a repeated delete reaches a live object.
	acknowledgeDeletes := func(g *testGC) {
		g.client.PrependReactor("delete", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, nil
		})
	}
	t.Run("cache moved to another resourceVersion", func(t *testing.T) {
		dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
		g := newTestGC(t, dep)
		acknowledgeDeletes(g)
		updated := dep.DeepCopy()
		updated.ResourceVersion = "2"
		if err := deleteTwice(t, g, dep, updated); err != nil {
			t.Fatal(err)
		}
		dels := g.deleteActions()
		if len(dels) != 2 || *dels[1].DeleteOptions.Preconditions.ResourceVersion != "2" {
			t.Errorf("actions = %v, want a second delete at resourceVersion 2", g.actions())
		}
	})
	t.Run("live read", func(t *testing.T) {
		dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
		g := newTestGC(t, dep)
		acknowledgeDeletes(g)
		g.observe(addEvent, dep, nil)
		for range 2 {
			if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(g.deleteActions()); n != 2 {
			t.Errorf("actions = %v, want a live read never skipped", g.actions())
		}
	})
	t.Run("already being deleted", func(t *testing.T) {
		// Deleting it again may change nothing, so no event would follow.
		dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
		terminating := dep.DeepCopy()
		terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		terminating.Finalizers = []string{"example.com/keep"}
		g := newTestGC(t, terminating)
		acknowledgeDeletes(g)
		g.cache(configMapGVR, terminating)
		g.observe(addEvent, dep, nil) // the graph has not seen the deletion yet
		for range 2 {
			if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(g.deleteActions()); n != 2 {
			t.Errorf("actions = %v, want a second delete", g.actions())
		}
	})
}

func TestSeenDeletionForgetsRecentDelete(t *testing.T) {
	deletedAtTerminating := func(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
		o = o.DeepCopy()
		o.ResourceVersion = "2"
		o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		o.Finalizers = []string{metav1.FinalizerDeleteDependents}
		return o
	}
	for name, see := range map[string]func(g *testGC, dep *metav1.PartialObjectMetadata){
		"delete event": func(g *testGC, dep *metav1.PartialObjectMetadata) {
			g.observe(deleteEvent, dep, nil)
		},
		"virtual delete event": func(g *testGC, dep *metav1.PartialObjectMetadata) {
			g.dependencyGraphBuilder.enqueueVirtualDeleteEvent(g.node("dep-uid").identity)
			g.drainGraph()
		},
		"update showing the deletion": func(g *testGC, dep *metav1.PartialObjectMetadata) {
			g.observe(updateEvent, deletedAtTerminating(dep), dep)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
			g := newTestGC(t, dep)
			attemptCached(t, g, dep)
			if _, ok := g.recentDeletes.versionByUID["dep-uid"]; !ok {
				t.Fatal("successful delete not remembered")
			}
			see(g, dep)
			if n := len(g.recentDeletes.versionByUID); n != 0 {
				t.Errorf("%d recent deletes left after the deletion was seen", n)
			}
		})
	}
}

func TestFailedDeleteIsNotRemembered(t *testing.T) {
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g := newTestGC(t) // dep is absent live: the delete gets a 404
	g.cache(configMapGVR, dep)
	g.observe(addEvent, dep, nil)
	if err := g.attemptToDeleteItem(g.ctx, g.node("dep-uid")); !errors.Is(err, errEnqueuedVirtualDeleteEvent) {
		t.Fatalf("err = %v, want a virtual delete", err)
	}
	if n := len(g.recentDeletes.versionByUID); n != 0 {
		t.Errorf("%d recent deletes remembered after a failed delete", n)
	}
}

func TestRecentDeletesAreBounded(t *testing.T) {
	r := newRecentDeletes()
	for i := range maxRecentDeletes + 1 {
		r.remember(types.UID(strconv.Itoa(i)), "1")
	}
	if n := len(r.versionByUID); n > maxRecentDeletes {
		t.Errorf("%d entries, want at most %d", n, maxRecentDeletes)
	}
}
