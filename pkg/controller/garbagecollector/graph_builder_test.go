package garbagecollector

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func TestVirtualOwnerIsCreatedThenObserved(t *testing.T) {
	g := newTestGC(t)
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g.observe(addEvent, dep, nil)

	owner := g.node("owner-uid")
	if owner == nil || owner.isObserved() {
		t.Fatalf("want a virtual owner node, got %v", owner)
	}
	if owner.identity.Namespace != "ns" {
		t.Errorf("virtual owner namespace = %q, want the dependent's", owner.identity.Namespace)
	}
	if got := queued(g.attemptToDelete); !got["owner-uid"] || len(got) != 1 {
		t.Errorf("attemptToDelete = %v, want the virtual owner only", got)
	}

	g.observe(addEvent, cm("ns", "owner", "owner-uid"), nil)
	owner = g.node("owner-uid")
	if !owner.isObserved() {
		t.Error("owner should be observed after its add event")
	}
	if deps := owner.getDependents(); len(deps) != 1 || deps[0].identity.UID != "dep-uid" {
		t.Errorf("owner dependents = %v", deps)
	}
	if got := queued(g.attemptToDelete); len(got) != 0 {
		t.Errorf("matching owner should queue nothing, got %v", got)
	}
}

func TestOwnerDeleteQueuesDependents(t *testing.T) {
	g := newTestGC(t)
	owner := cm("ns", "owner", "owner-uid")
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, cm("ns", "a", "a-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	g.observe(addEvent, cm("ns", "b", "b-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	queued(g.attemptToDelete)

	g.observe(deleteEvent, owner, nil)
	if g.node("owner-uid") != nil {
		t.Error("owner should leave the graph")
	}
	if got := queued(g.attemptToDelete); !got["a-uid"] || !got["b-uid"] || len(got) != 2 {
		t.Errorf("attemptToDelete = %v, want both dependents", got)
	}
	key := objectReference{OwnerReference: ref("ConfigMap", "owner", "owner-uid"), Namespace: "ns"}
	if !g.absentOwnerCache.Has(key) {
		t.Error("deleted owner should be cached as absent")
	}
}

func TestForegroundTransitionQueuesDependentsAndOwner(t *testing.T) {
	g := newTestGC(t)
	owner := cm("ns", "owner", "owner-uid")
	g.observe(addEvent, owner, nil)
	g.observe(addEvent, cm("ns", "dep", "dep-uid", blocking(ref("ConfigMap", "owner", "owner-uid"))), nil)
	queued(g.attemptToDelete)

	deleting := owner.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{metav1.FinalizerDeleteDependents}
	g.observe(updateEvent, deleting, owner)

	n := g.node("owner-uid")
	if !n.isDeletingDependents() || !n.isBeingDeleted() {
		t.Errorf("owner node: deletingDependents=%v beingDeleted=%v", n.isDeletingDependents(), n.isBeingDeleted())
	}
	if got := queued(g.attemptToDelete); !got["owner-uid"] || !got["dep-uid"] {
		t.Errorf("attemptToDelete = %v, want owner and dependent", got)
	}
	// The same state again is not a transition.
	g.observe(updateEvent, deleting, deleting)
	if got := queued(g.attemptToDelete); len(got) != 0 {
		t.Errorf("repeated update queued %v", got)
	}
}

func TestOrphanTransitionQueuesOwner(t *testing.T) {
	g := newTestGC(t)
	owner := cm("ns", "owner", "owner-uid")
	g.observe(addEvent, owner, nil)
	deleting := owner.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{metav1.FinalizerOrphanDependents}
	g.observe(updateEvent, deleting, owner)
	if got := queued(g.attemptToOrphan); !got["owner-uid"] {
		t.Errorf("attemptToOrphan = %v, want owner", got)
	}
}

func TestUnblockingDependentRequeuesOwner(t *testing.T) {
	g := newTestGC(t)
	g.observe(addEvent, cm("ns", "owner", "owner-uid"), nil)
	old := cm("ns", "dep", "dep-uid", blocking(ref("ConfigMap", "owner", "owner-uid")))
	g.observe(addEvent, old, nil)
	queued(g.attemptToDelete)

	updated := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g.observe(updateEvent, updated, old)
	if got := queued(g.attemptToDelete); !got["owner-uid"] {
		t.Errorf("attemptToDelete = %v, want the unblocked owner", got)
	}
	if blockers := g.node("owner-uid").blockingDependents(); len(blockers) != 0 {
		t.Errorf("blocking dependents = %v, want none", blockers)
	}

	// Removing the reference unlinks the dependent.
	g.observe(updateEvent, cm("ns", "dep", "dep-uid"), updated)
	if n := g.node("owner-uid").dependentsLength(); n != 0 {
		t.Errorf("owner has %d dependents after the reference was removed", n)
	}
}

func TestCrossNamespaceOwnerReportsEvent(t *testing.T) {
	g := newTestGC(t)
	g.observe(addEvent, cm("ns-a", "owner", "owner-uid"), nil)
	g.observe(addEvent, cm("ns-b", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), nil)

	select {
	case e := <-g.recorder.Events:
		if !strings.HasPrefix(e, "Warning OwnerRefInvalidNamespace ownerRef [v1/ConfigMap, namespace: ns-b, name: owner, uid: owner-uid] does not exist in namespace \"ns-b\"") {
			t.Errorf("event = %q", e)
		}
	default:
		t.Fatal("no OwnerRefInvalidNamespace event")
	}
	if got := queued(g.attemptToDelete); !got["dep-uid"] {
		t.Errorf("attemptToDelete = %v, want the dependent to be verified", got)
	}
}

func TestVirtualNodeSeenWithOtherNamespaceReportsDependents(t *testing.T) {
	g := newTestGC(t)
	// The dependent arrives first; its owner is really in another namespace.
	g.observe(addEvent, cm("ns-b", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	queued(g.attemptToDelete)
	g.observe(addEvent, cm("ns-a", "owner", "owner-uid"), nil)

	if n := g.node("owner-uid"); n.identity.Namespace != "ns-a" || !n.isObserved() {
		t.Errorf("owner node = %v, want observed in ns-a", n)
	}
	select {
	case e := <-g.recorder.Events:
		if !strings.Contains(e, "OwnerRefInvalidNamespace") {
			t.Errorf("event = %q", e)
		}
	default:
		t.Fatal("no OwnerRefInvalidNamespace event")
	}
	if got := queued(g.attemptToDelete); !got["dep-uid"] {
		t.Errorf("attemptToDelete = %v, want the dependent", got)
	}
}

func TestVirtualDeleteWithConflictingIdentities(t *testing.T) {
	g := newTestGC(t)
	// Two dependents name one UID with different kinds.
	g.observe(addEvent, cm("ns", "d1", "d1", ref("ConfigMap", "owner", "owner-uid")), nil)
	g.observe(addEvent, cm("ns", "d2", "d2", ref("Pod", "owner", "owner-uid")), nil)
	queued(g.attemptToDelete)

	virtual := g.node("owner-uid")
	g.dependencyGraphBuilder.enqueueVirtualDeleteEvent(virtual.identity)
	g.drainGraph()

	n := g.node("owner-uid")
	if n == nil {
		t.Fatal("node must stay while another identity is unverified")
	}
	if n.identity.Kind == virtual.identity.Kind {
		t.Errorf("identity should switch to the alternate, still %v", n.identity)
	}
	if !g.absentOwnerCache.Has(virtual.identity) {
		t.Error("verified-absent identity should be cached")
	}
}

func TestReferencesDiffs(t *testing.T) {
	yes, no := true, false
	a := metav1.OwnerReference{UID: "a", Name: "a"}
	b := metav1.OwnerReference{UID: "b", Name: "b", BlockOwnerDeletion: &yes}
	b2 := metav1.OwnerReference{UID: "b", Name: "b", BlockOwnerDeletion: &no}
	c := metav1.OwnerReference{UID: "c", Name: "c"}
	added, removed, changed := referencesDiffs([]metav1.OwnerReference{a, b}, []metav1.OwnerReference{b2, c})
	if !reflect.DeepEqual(added, []metav1.OwnerReference{c}) {
		t.Errorf("added = %v", added)
	}
	if !reflect.DeepEqual(removed, []metav1.OwnerReference{a}) {
		t.Errorf("removed = %v", removed)
	}
	if len(changed) != 1 || changed[0].oldRef.UID != "b" || *changed[0].newRef.BlockOwnerDeletion {
		t.Errorf("changed = %v", changed)
	}
}

func TestGetAlternateOwnerIdentity(t *testing.T) {
	mk := func(ns, kind string) *node {
		n := newNode(objectReference{OwnerReference: ref("ConfigMap", "d-"+kind, types.UID("d-"+ns+kind)), Namespace: ns},
			[]metav1.OwnerReference{ref(kind, "owner", "o")})
		return n
	}
	absent := objectReference{OwnerReference: ref("B", "owner", "o"), Namespace: "ns"}
	deps := []*node{mk("ns", "A"), mk("ns", "B"), mk("ns", "C")}
	if got := getAlternateOwnerIdentity(deps, absent); got == nil || got.Kind != "C" {
		t.Errorf("next after B = %v, want C", got)
	}
	absent.Kind = "C"
	absent.OwnerReference = ref("C", "owner", "o")
	if got := getAlternateOwnerIdentity(deps, absent); got == nil || got.Kind != "A" {
		t.Errorf("wrap-around after C = %v, want A", got)
	}
}

func TestSyncMonitorsSkipsIgnoredAndDropsVanished(t *testing.T) {
	g := newTestGC(t)
	gb := g.dependencyGraphBuilder
	events := schema.GroupVersionResource{Version: "v1", Resource: "events"}
	if err := gb.syncMonitors(g.logger, map[schema.GroupVersionResource]struct{}{configMapGVR: {}, podGVR: {}, events: {}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := gb.monitors[events]; ok {
		t.Error("events are ignored by default")
	}
	if len(gb.monitors) != 2 {
		t.Errorf("monitors = %v", gb.monitors)
	}
	// A resource the mapper does not know is an error, the rest is kept.
	unknown := schema.GroupVersionResource{Group: "x", Version: "v1", Resource: "things"}
	if err := gb.syncMonitors(g.logger, map[schema.GroupVersionResource]struct{}{configMapGVR: {}, unknown: {}}); err == nil {
		t.Error("want an error for an unmappable resource")
	}
	if _, ok := gb.monitors[configMapGVR]; !ok || len(gb.monitors) != 1 {
		t.Errorf("monitors = %v, want configmaps only", gb.monitors)
	}
}

func namespaceObj(name string, terminating bool) *metav1.PartialObjectMetadata {
	ns := obj("v1", "Namespace", "", name, types.UID(name+"-uid"))
	if terminating {
		now := metav1.Now()
		ns.DeletionTimestamp = &now
	}
	return ns
}

// In a namespace being deleted, the namespace controller deletes the
// dependents itself: the collector waits before acting on them.
func TestDependentsInTerminatingNamespaceWait(t *testing.T) {
	g := newTestGC(t)
	g.observe(addEvent, namespaceObj("doomed", false), nil)
	g.observe(updateEvent, namespaceObj("doomed", true), namespaceObj("doomed", false))
	g.observe(addEvent, namespaceObj("live", false), nil)
	for _, ns := range []string{"doomed", "live"} {
		g.observe(addEvent, cm(ns, "owner", types.UID(ns+"-owner")), nil)
		g.observe(addEvent, cm(ns, "dep", types.UID(ns+"-dep"), ref("ConfigMap", "owner", types.UID(ns+"-owner"))), nil)
	}
	queued(g.attemptToDelete)

	g.observe(deleteEvent, cm("doomed", "owner", "doomed-owner"), nil)
	g.observe(deleteEvent, cm("live", "owner", "live-owner"), nil)
	if got := queued(g.attemptToDelete); !got["live-dep"] || got["doomed-dep"] {
		t.Fatalf("attemptToDelete = %v, want only live-dep at once", got)
	}
	testutil.WaitFor(t, "the postponed dependent", func() bool { return g.attemptToDelete.Len() == 1 })
	if got := queued(g.attemptToDelete); !got["doomed-dep"] {
		t.Fatalf("attemptToDelete = %v, want doomed-dep after the delay", got)
	}

	// Once the namespace is gone it no longer counts as terminating.
	g.observe(deleteEvent, namespaceObj("doomed", true), nil)
	if _, ok := g.dependencyGraphBuilder.teardowns.byNS["doomed"]; ok {
		t.Error("deleted namespace still tracked")
	}
}

// A dependent whose deletion the graph saw while it was queued needs no
// lookup.
func TestQueuedItemDeletedMeanwhileNeedsNoLookup(t *testing.T) {
	g := newTestGC(t)
	g.observe(addEvent, cm("ns", "owner", "owner-uid"), nil)
	dep := cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid"))
	g.observe(addEvent, dep, nil)
	n := g.node("dep-uid")
	g.observe(deleteEvent, dep, nil)
	g.client.ClearActions()

	if action, _ := g.attemptToDeleteWorker(g.ctx, n); action != forgetItem {
		t.Fatalf("action = %v, want forget", action)
	}
	if actions := g.client.Actions(); len(actions) != 0 {
		t.Fatalf("API calls %v, want none", actions)
	}
}

func TestAbsentOwnersOfATeardownBurstAreRemembered(t *testing.T) {
	g := newTestGC(t)
	// A namespace of 2,000 Deployments (or ReplicaSets) deleted at once.
	const owners = 2000
	for i := range owners {
		name, uid := fmt.Sprintf("owner-%d", i), types.UID(fmt.Sprintf("owner-%d-uid", i))
		g.observe(addEvent, cm("ns", name, uid), nil)
		g.observe(addEvent, cm("ns", name+"-dep", uid+"-dep", ref("ConfigMap", name, uid)), nil)
	}
	for i := range owners {
		g.observe(deleteEvent, cm("ns", fmt.Sprintf("owner-%d", i), types.UID(fmt.Sprintf("owner-%d-uid", i))), nil)
	}
	first := objectReference{OwnerReference: ref("ConfigMap", "owner-0", "owner-0-uid"), Namespace: "ns"}
	if !g.absentOwnerCache.Has(first) {
		t.Errorf("the first of %d owners deleted together was forgotten: its dependents would each look it up again", owners)
	}
}
