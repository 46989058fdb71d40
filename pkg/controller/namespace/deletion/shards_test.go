package deletion

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
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

func TestEventShardsMatchEveryEventOnce(t *testing.T) {
	shards := eventShards()
	kinds := map[string]bool{"Service": true, "Widget": true, "": true, "Pod,x": true}
	reasons := map[string]bool{"SomethingElse": true, "": true}
	for _, k := range eventShardKeys {
		kinds[k.kind] = true
		reasons[k.reason] = true
	}
	for kind := range kinds {
		for reason := range reasons {
			set := fields.Set{"involvedObject.kind": kind, "reason": reason}
			if n := matchingShards(t, shards, set); n != 1 {
				t.Errorf("%v matches %d shards, want 1", set, n)
			}
		}
	}
	// The likely largest shard starts first.
	first := fields.Set{"involvedObject.kind": "Pod", "reason": "Scheduled"}
	if matchingShards(t, shards[:1], first) != 1 {
		t.Errorf("first shard %q, want the pods' Scheduled events", shards[0])
	}
}

func TestNodeShardsMatchEveryPodOnceLargestFirst(t *testing.T) {
	byNode := map[string]int{"": 3}
	for i := range maxNodeShards + 30 {
		byNode[fmt.Sprintf("node-%03d", i)] = 10 + i
	}
	shards := nodeShards(byNode)
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
	if got, want := nodeShards(small)[:3], []string{"spec.nodeName=b", "spec.nodeName=c", "spec.nodeName=a"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("shards start %q, want %q", got, want)
	}
	if s := nodeShards(map[string]int{"node-a": 500, "": 20}); s != nil {
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
	shards := nodeShards(byNode)
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
	if s := nodeShards(map[string]int{"a": minNodeShardPods - 1, "b": 3, "": 250}); s != nil {
		t.Errorf("no node with %d pods, yet shards %q", minNodeShardPods, s)
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

// deleteCollections returns the field selectors gvr's deletecollection
// calls carried, in order.
func (b *shardedBed) deleteCollections(gvr schema.GroupVersionResource) []string {
	var out []string
	for _, a := range b.md.Actions() {
		if a.GetVerb() == "delete-collection" && a.GetResource() == gvr {
			out = append(out, a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields.String())
		}
	}
	return out
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

func TestLargeCollectionsAreDeletedInShards(t *testing.T) {
	b := newShardedBed(t, 300, 400, 3)
	b.deleteTwice(t)

	pods := b.deleteCollections(podsResource)
	if len(pods) != 4 {
		t.Errorf("pods deleted in %d requests %q, want one per node and one for the rest", len(pods), pods)
	}
	events := b.deleteCollections(coreEvents)
	if len(events) != len(eventShards()) {
		t.Errorf("events deleted in %d requests, want %d shards", len(events), len(eventShards()))
	}
	b.wantEmpty(t, podsResource, coreEvents, configMaps)
	if len(actionsOf(b.kube.Actions(), "create", "namespaces", "finalize")) != 1 {
		t.Error("namespace not finalized after its content went")
	}
}

// The threshold counts: exactly shardMinItems events are sharded.
func TestEventsAtTheThresholdAreSharded(t *testing.T) {
	b := newShardedBed(t, 0, shardMinItems, 1)
	if err := b.d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n := len(b.deleteCollections(coreEvents)); n != len(eventShards()) {
		t.Errorf("%d events deleted in %d requests, want %d shards", shardMinItems, n, len(eventShards()))
	}
	b.wantEmpty(t, coreEvents)
}

// Small collections go in one request without a selector, as upstream's.
func TestSmallCollectionsAreDeletedInOneRequest(t *testing.T) {
	b := newShardedBed(t, shardMinItems-1, shardMinItems-1, 3)
	b.deleteTwice(t)

	for _, gvr := range []schema.GroupVersionResource{podsResource, coreEvents, eventsAPIEvents, configMaps} {
		calls := b.deleteCollections(gvr)
		if len(calls) == 0 || calls[0] != "" {
			t.Errorf("%v: deletecollection calls %q, want one without a selector", gvr, calls)
		}
		for _, sel := range calls {
			if sel != "" {
				t.Errorf("%v: deleted with selector %q", gvr, sel)
			}
		}
	}
	b.wantEmpty(t, podsResource, coreEvents)
}

// A server that refuses the selectors gets the one request upstream sends.
func TestRefusedShardsFallBackToOneRequest(t *testing.T) {
	b := newShardedBed(t, 0, 400, 1)
	b.md.PrependReactor("delete-collection", "events", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.DeleteCollectionAction).GetListRestrictions().Fields.Empty() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewBadRequest(`field label not supported: involvedObject.kind`)
	})
	if err := b.d.Delete(context.Background(), nsName); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	calls := b.deleteCollections(coreEvents)
	if len(calls) == 0 || calls[len(calls)-1] != "" {
		t.Errorf("events: deletecollection calls end with %q, want one without a selector", calls)
	}
	b.wantEmpty(t, coreEvents)
}

// The two event resources are one store: events.k8s.io's goes after the
// core shards, not beside them deleting the same items.
func TestEventsAPIFollowsCoreEvents(t *testing.T) {
	b := newShardedBed(t, 0, 400, 1)
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
