package deletion

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// matchingShards counts the selectors among shards that match set.
func matchingShards(t *testing.T, shards []string, set fields.Set) int {
	t.Helper()
	n := 0
	for _, s := range shards {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatalf("shard %q does not parse: %v", s, err)
		}
		if sel.Matches(set) {
			n++
		}
	}
	return n
}

func TestNodeShardsMatchEveryPodOnceLargestFirst(t *testing.T) {
	byNode := map[string]int{"": 3}
	for i := range maxNodeShards + 30 {
		byNode[fmt.Sprintf("node-%03d", i)] = 10 + i
	}
	shards := nodeShards(byNode, byNode)
	if len(shards) != maxNodeShards+1 {
		t.Fatalf("%d shards, want %d named nodes and the rest", len(shards), maxNodeShards+1)
	}
	for node := range byNode {
		if n := matchingShards(t, shards, fields.Set{"spec.nodeName": node}); n != 1 {
			t.Errorf("pods on %q match %d shards, want 1", node, n)
		}
	}
	// The 30 nodes with the fewest pods and the unscheduled pods share a
	// shard, the largest (over 700 pods): it starts first.
	if n := matchingShards(t, shards[:1], fields.Set{"spec.nodeName": "node-000"}); n != 1 {
		t.Errorf("first shard %q, want the one of the nodes not named", shards[0])
	}
	// Otherwise the nodes with the most pods go first.
	small := map[string]int{"a": 25, "b": 300, "c": 40}
	if got, want := nodeShards(small, small)[:3], []string{"spec.nodeName=b", "spec.nodeName=c", "spec.nodeName=a"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("shards start %q, want %q", got, want)
	}
	if s := nodeShards(map[string]int{"node-a": 500, "": 20}, map[string]int{"node-a": 500, "": 20}); s != nil {
		t.Errorf("pods on one node split into %v, want one request", s)
	}
}

// Every node holding enough pods gets its own shard, beyond the first
// 64 of a large cluster; nodes with a few pods share the last one.
func TestNodeShardsNameEveryNodeWithEnoughPods(t *testing.T) {
	byNode := map[string]int{"": 7}
	for i := range 201 {
		byNode[fmt.Sprintf("kwok-node-%d", i)] = 100
	}
	for i := range 40 {
		byNode[fmt.Sprintf("sparse-node-%d", i)] = minNodeShardPods - 1
	}
	shards := nodeShards(byNode, byNode)
	if len(shards) != 202 {
		t.Fatalf("%d shards, want 201 named nodes and the rest", len(shards))
	}
	for node, pods := range byNode {
		alone := matchingShards(t, shards, fields.Set{"spec.nodeName": node}) == 1 &&
			slices.Contains(shards, "spec.nodeName="+node)
		if want := pods >= minNodeShardPods; alone != want {
			t.Errorf("pods on %q (%d) in a shard of their own: %v, want %v", node, pods, alone, want)
		}
	}
	few := map[string]int{"a": minNodeShardPods - 1, "b": 3, "": 250}
	if s := nodeShards(few, few); s != nil {
		t.Errorf("no node with %d pods, yet shards %q", minNodeShardPods, s)
	}
}

// Shards are sent only where a pod would change: pods whose graceful
// deletion is under way are left as they are by another delete.
func TestNodeShardsOnlyWherePodsWouldChange(t *testing.T) {
	byNode := map[string]int{"a": 300, "b": 200, "c": 100, "d": 5, "e": 5, "": 3}
	rest := "spec.nodeName!=a,spec.nodeName!=b,spec.nodeName!=c"
	cases := []struct {
		toDelete map[string]int
		want     []string
	}{
		{byNode, []string{"spec.nodeName=a", "spec.nodeName=b", "spec.nodeName=c", rest}},
		{map[string]int{"b": 2}, []string{"spec.nodeName=b"}},
		{map[string]int{"d": 1}, []string{rest}},
		{map[string]int{"": 1, "c": 4, "a": 1}, []string{"spec.nodeName=a", "spec.nodeName=c", rest}},
	}
	for _, tc := range cases {
		if got := nodeShards(byNode, tc.toDelete); !slices.Equal(got, tc.want) {
			t.Errorf("pods to delete %v: shards %q, want %q", tc.toDelete, got, tc.want)
		}
	}
}

// shardedBed is a namespace whose pods and events the fake metadata
// client deletes by field selector, as the API server does.
type shardedBed struct {
	kube *fake.Clientset
	md   *metadatafake.FakeMetadataClient
	d    *namespacedResourcesDeleter

	fields map[string]fields.Set // by resource/name; read-only once built
}

func eventsResources() []*metav1.APIResourceList {
	all := []string{"get", "list", "watch", "create", "update", "delete", "deletecollection"}
	lists := resources()
	lists[0].APIResources = append(lists[0].APIResources, metav1.APIResource{Name: "events", Namespaced: true, Kind: "Event", Verbs: all})
	return append(lists, &metav1.APIResourceList{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Namespaced: true, Kind: "Event", Verbs: all},
	}})
}

func newShardedBed(t *testing.T, pods, events int, nodes int) *shardedBed {
	t.Helper()
	b := &shardedBed{fields: map[string]fields.Set{}}
	kubeObjs := []runtime.Object{deletingNamespace(time.Now().Add(-time.Hour))}
	var objs []runtime.Object
	for i := range pods {
		name := fmt.Sprintf("pod-%04d", i)
		node := fmt.Sprintf("node-%d", i%nodes)
		kubeObjs = append(kubeObjs, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: name}, Spec: v1.PodSpec{NodeName: node}})
		objs = append(objs, partial("v1", "Pod", name))
		b.fields["pods/"+name] = fields.Set{"spec.nodeName": node}
	}
	kinds := []string{"Pod", "Pod", "ReplicaSet", "Deployment", "Service"}
	reasons := []string{"Scheduled", "Pulled", "SuccessfulCreate", "ScalingReplicaSet", "Unusual"}
	for i := range events {
		name := fmt.Sprintf("ev-%04d", i)
		objs = append(objs, partial("v1", "Event", name))
		b.fields["events/"+name] = fields.Set{"involvedObject.kind": kinds[i%len(kinds)], "reason": reasons[(i/len(kinds))%len(reasons)]}
	}
	b.kube = fake.NewClientset(kubeObjs...)
	b.md = newMetadataClientWithFields(func(resource, name string) fields.Set { return b.fields[resource+"/"+name] }, objs...)
	b.d = newDeleter(t, b.kube, b.md, func() ([]*metav1.APIResourceList, error) { return eventsResources(), nil })
	b.d.metadataClient = pagedMetadata{Interface: b.md, limits: &limitRecorder{}}
	return b
}

// deleteCollections returns the list options of gvr's deletecollection
// calls, in order.
func (b *shardedBed) deleteCollections(gvr schema.GroupVersionResource) []metav1.ListOptions {
	var out []metav1.ListOptions
	for _, a := range b.md.Actions() {
		if a.GetVerb() == "delete-collection" && a.GetResource() == gvr {
			out = append(out, a.(clienttesting.DeleteCollectionActionImpl).GetListOptions())
		}
	}
	return out
}

func selectorsOf(calls []metav1.ListOptions) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		out = append(out, c.FieldSelector)
	}
	return out
}

// wantPages checks that events went in pages of eventPageSize: the first
// without a token, each next one after the last name of the one before
// (the fake's token), so no event is in two pages and none is left out.
func wantPages(t *testing.T, calls []metav1.ListOptions, events int) {
	t.Helper()
	pages := (events + eventPageSize - 1) / eventPageSize
	if len(calls) != pages {
		t.Fatalf("%d events deleted in %d requests %+v, want %d pages", events, len(calls), calls, pages)
	}
	// Sent side by side: the order they reached the server says nothing.
	calls = slices.Clone(calls)
	slices.SortFunc(calls, func(a, b metav1.ListOptions) int { return strings.Compare(a.Continue, b.Continue) })
	for i, c := range calls {
		want := metav1.ListOptions{Limit: eventPageSize}
		if i > 0 {
			want.Continue = fmt.Sprintf("ev-%04d", i*eventPageSize-1)
		}
		if c.Limit != want.Limit || c.Continue != want.Continue || c.FieldSelector != "" {
			t.Errorf("page %d deleted with %+v, want limit %d, token %q", i, c, want.Limit, want.Continue)
		}
	}
}

func (b *shardedBed) wantEmpty(t *testing.T, gvrs ...schema.GroupVersionResource) {
	t.Helper()
	for _, gvr := range gvrs {
		l, err := b.md.Resource(gvr).Namespace(nsName).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 0 {
			t.Errorf("%v: %d left", gvr, len(l.Items))
		}
	}
}

// Pods must be gone before the rest goes: the test's pods go at once.
func (b *shardedBed) deleteTwice(t *testing.T) {
	t.Helper()
	for range 2 {
		if err := b.d.Delete(context.Background(), nsName); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
}

func TestLargeCollectionsAreDeletedInParts(t *testing.T) {
	const events = 4*eventPageSize + 100
	b := newShardedBed(t, 300, events, 3)
	b.deleteTwice(t)

	pods := b.deleteCollections(podsResource)
	if len(pods) != 3 {
		t.Errorf("pods deleted in %d requests %q, want one per node (none for the other nodes: they hold none)", len(pods), selectorsOf(pods))
	}
	wantPages(t, b.deleteCollections(coreEvents), events)
	b.wantEmpty(t, podsResource, coreEvents, configMaps)
	if len(actionsOf(b.kube.Actions(), "create", "namespaces", "finalize")) != 1 {
		t.Error("namespace not finalized after its content went")
	}
}

// A pass that finds most pods terminating sends only the shard of the
// node holding a pod a delete would change.
func TestOnlyShardsWithPodsToDeleteAreSent(t *testing.T) {
	b := newShardedBed(t, 300, 0, 3)
	deleted := metav1.NewTime(time.Now())
	grace := int64(30)
	pods, err := b.kube.CoreV1().Pods(nsName).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Name == "pod-0002" { // on node-2
			continue
		}
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &deleted, &grace
		if err := b.kube.Tracker().Update(podsResource, p, nsName); err != nil {
			t.Fatal(err)
		}
	}
	// The terminating pods outlived the namespace's grace period: an error.
	_ = b.d.Delete(context.Background(), nsName)
	if got := selectorsOf(b.deleteCollections(podsResource)); !slices.Equal(got, []string{"spec.nodeName=node-2"}) {
		t.Errorf("pods deleted with %q, want only node-2's shard", got)
	}
}

// One page of events goes in one request without a limit; one more event
// makes two pages.
func TestEventsBeyondOnePageGoInPages(t *testing.T) {
	for _, events := range []int{eventPageSize, eventPageSize + 1} {
		b := newShardedBed(t, 0, events, 1)
		if err := b.d.Delete(context.Background(), nsName); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		calls := b.deleteCollections(coreEvents)
		if events <= eventPageSize {
			if len(calls) != 1 || calls[0] != (metav1.ListOptions{}) {
				t.Errorf("%d events deleted with %+v, want one request for all", events, calls)
			}
		} else {
			wantPages(t, calls, events)
		}
		b.wantEmpty(t, coreEvents)
	}
}

// Small collections go in one request without a selector, as upstream's.
func TestSmallCollectionsAreDeletedInOneRequest(t *testing.T) {
	b := newShardedBed(t, shardMinItems-1, eventPageSize, 3)
	b.deleteTwice(t)

	for _, gvr := range []schema.GroupVersionResource{podsResource, coreEvents, eventsAPIEvents, configMaps} {
		calls := b.deleteCollections(gvr)
		if len(calls) == 0 {
			t.Errorf("%v: never deleted", gvr)
		}
		for _, c := range calls {
			if c != (metav1.ListOptions{}) {
				t.Errorf("%v: deleted with %+v, want one request for all", gvr, c)
			}
		}
	}
	b.wantEmpty(t, podsResource, coreEvents)
}

// A server that refuses a part (a field selector it does not know, a
// continue token past its snapshot), or a listing of pages that fails
// midway, ends with the one request upstream sends.
func TestRefusedPartsFallBackToOneRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pods   int
		events int
		refuse func(b *shardedBed)
	}{
		{name: "pod selector refused", pods: 300, refuse: func(b *shardedBed) {
			b.md.PrependReactor("delete-collection", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields.Empty() {
					return false, nil, nil
				}
				return true, nil, apierrors.NewBadRequest(`field label not supported: spec.nodeName`)
			})
		}},
		{name: "event page token expired", events: 3 * eventPageSize, refuse: func(b *shardedBed) {
			b.md.PrependReactor("delete-collection", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.(clienttesting.DeleteCollectionActionImpl).GetListOptions().Continue == "" {
					return false, nil, nil
				}
				return true, nil, apierrors.NewResourceExpired("the provided continue parameter is too old")
			})
		}},
		{name: "listing pages fails", events: 3 * eventPageSize, refuse: func(b *shardedBed) {
			b.d.metadataClient = failingLists{Interface: b.d.metadataClient, after: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newShardedBed(t, tc.pods, tc.events, 3)
			tc.refuse(b)
			b.deleteTwice(t)
			gvr := coreEvents
			if tc.pods > 0 {
				gvr = podsResource
			}
			calls := b.deleteCollections(gvr)
			if len(calls) < 2 || calls[len(calls)-1] != (metav1.ListOptions{}) {
				t.Errorf("%v: deletecollection calls %+v, want parts, then one request for all", gvr, calls)
			}
			b.wantEmpty(t, gvr)
		})
	}
}

// failingLists answers the first after lists made through one client of a
// resource, then fails.
type failingLists struct {
	metadata.Interface
	after int
}

func (f failingLists) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return failingGetter{Getter: f.Interface.Resource(gvr), calls: &atomic.Int32{}, after: f.after}
}

type failingGetter struct {
	metadata.Getter
	calls *atomic.Int32
	after int
}

func (g failingGetter) Namespace(ns string) metadata.ResourceInterface {
	return failingResource{ResourceInterface: g.Getter.Namespace(ns), calls: g.calls, after: g.after}
}

type failingResource struct {
	metadata.ResourceInterface
	calls *atomic.Int32
	after int
}

func (r failingResource) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if int(r.calls.Add(1)) > r.after {
		return nil, apierrors.NewInternalError(fmt.Errorf("list failed"))
	}
	return r.ResourceInterface.List(ctx, opts)
}

// The two event resources are one store: events.k8s.io's goes after the
// core pages, not beside them deleting the same items.
func TestEventsAPIFollowsCoreEvents(t *testing.T) {
	b := newShardedBed(t, 0, 3*eventPageSize, 1)
	if err := b.d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	sawEventsAPI := false
	for _, a := range b.md.Actions() {
		switch a.GetResource() {
		case eventsAPIEvents:
			sawEventsAPI = true
		case coreEvents:
			if sawEventsAPI {
				t.Fatalf("core events touched after events.k8s.io's: %v", a)
			}
		}
	}
	if !sawEventsAPI {
		t.Error("events.k8s.io events never deleted")
	}
}
