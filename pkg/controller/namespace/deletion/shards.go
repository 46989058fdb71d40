package deletion

import (
	"context"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
)

// The API server deletes the items of a deletecollection one after the
// other (kube-apiserver's --delete-collection-workers defaults to 1), so a
// namespace's thousands of pods or events take seconds per thousand in one
// request. A pass splits such a collection into field-selector shards that
// together match every item exactly once and sends them side by side; the
// same objects are deleted with the same options, only sooner.

// parallelRequests bounds the requests one pass has in flight at each
// level: resources deleted side by side, and the shards of one resource.
const parallelRequests = 8

// shardMinItems: a collection smaller than this goes in one request, as
// upstream sends it.
const shardMinItems = 200

// Pod shards name the nodes holding at least minNodeShardPods of the
// namespace's pods, the most first, up to maxNodeShards (which bounds the
// terms of the one more shard that takes the pods on all other nodes, or
// none): on a large cluster that shard would otherwise hold most pods.
const (
	maxNodeShards    = 512
	minNodeShardPods = 20
)

var (
	coreEvents = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	// eventsAPIEvents is stored with coreEvents: deleted after them, it
	// normally finds nothing left.
	eventsAPIEvents = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// eventShardKeys are the kinds, and within them the reasons, most of a
// namespace's events have: the scheduler's and kubelet's about pods and
// the workload controllers' about what they create and scale. The likely
// largest come first, as the first shards start first; an empty reason
// makes the whole kind one shard.
var eventShardKeys = []struct{ kind, reason string }{
	{"Pod", "Scheduled"},
	{"ReplicaSet", "SuccessfulCreate"},
	{"Deployment", ""},
	{"Pod", "Pulled"},
	{"Pod", "Created"},
	{"Pod", "Started"},
	{"Pod", "Killing"},
	{"ReplicaSet", "SuccessfulDelete"},
	{"Pod", "FailedScheduling"},
	{"Pod", "Pulling"},
	{"Job", "SuccessfulCreate"},
	{"StatefulSet", ""},
	{"DaemonSet", ""},
}

// partition splits the items matching within on field: one selector for
// each value, and one for every value not listed.
func partition(within []string, field string, values []string) []string {
	var out []string
	for _, v := range values {
		out = append(out, joinSelector(within, field+"="+fields.EscapeValue(v)))
	}
	return append(out, noneOf(within, field, values))
}

// noneOf selects the items matching within whose field has none of values.
func noneOf(within []string, field string, values []string) string {
	terms := make([]string, 0, len(values))
	for _, v := range values {
		terms = append(terms, field+"!="+fields.EscapeValue(v))
	}
	return joinSelector(within, terms...)
}

func joinSelector(within []string, terms ...string) string {
	all := append(append([]string{}, within...), terms...)
	return strings.Join(all, ",")
}

// eventShards partitions core events by eventShardKeys: one shard per key,
// one per kind for its other reasons, and one for the other kinds.
func eventShards() []string {
	const kindField, reasonField = "involvedObject.kind", "reason"
	var kinds []string
	reasons := map[string][]string{}
	var shards []string
	for _, k := range eventShardKeys {
		if _, seen := reasons[k.kind]; !seen {
			kinds = append(kinds, k.kind)
			reasons[k.kind] = nil
		}
		of := kindField + "=" + fields.EscapeValue(k.kind)
		if k.reason == "" {
			shards = append(shards, of)
			continue
		}
		reasons[k.kind] = append(reasons[k.kind], k.reason)
		shards = append(shards, of+","+reasonField+"="+fields.EscapeValue(k.reason))
	}
	for _, kind := range kinds {
		if len(reasons[kind]) > 0 {
			shards = append(shards, noneOf([]string{kindField + "=" + fields.EscapeValue(kind)}, reasonField, reasons[kind]))
		}
	}
	return append(shards, noneOf(nil, kindField, kinds))
}

// nodeShards partitions pods by the nodes holding most of them, given how
// many each node holds ("" for pods not yet scheduled), the largest shard
// first: the first shards start first.
func nodeShards(podsByNode map[string]int) []string {
	nodes := make([]string, 0, len(podsByNode))
	for n := range podsByNode {
		if n != "" {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) < 2 {
		return nil
	}
	sort.Slice(nodes, func(i, j int) bool {
		if podsByNode[nodes[i]] != podsByNode[nodes[j]] {
			return podsByNode[nodes[i]] > podsByNode[nodes[j]]
		}
		return nodes[i] < nodes[j]
	})
	named := nodes[:min(len(nodes), maxNodeShards)]
	for len(named) > 0 && podsByNode[named[len(named)-1]] < minNodeShardPods {
		named = named[:len(named)-1]
	}
	if len(named) == 0 {
		return nil
	}
	shards := partition(nil, "spec.nodeName", named)
	others := total(podsByNode)
	for _, n := range named {
		others -= podsByNode[n]
	}
	// The shard of the other nodes goes where its size puts it.
	at := sort.Search(len(named), func(i int) bool { return podsByNode[named[i]] < others })
	rest := shards[len(shards)-1]
	copy(shards[at+1:], shards[at:len(shards)-1])
	shards[at] = rest
	return shards
}

// eventShardsIfLarge returns eventShards when the namespace holds at least
// shardMinItems events: a page one short of that with more to come tells.
func (d *namespacedResourcesDeleter) eventShardsIfLarge(ctx context.Context, gvr schema.GroupVersionResource, ns string) []string {
	if gvr != coreEvents || !d.unsupported.supported(verbKey{verbList, gvr}) {
		return nil
	}
	page, err := d.metadataClient.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: shardMinItems - 1})
	if err != nil || page.Continue == "" {
		// On error the collection goes in one request, which reports it.
		return nil
	}
	return eventShards()
}

// deleteShards deletes gvr's collection in ns, one request per shard (one
// in all without shards), and returns the first error. A server refusing
// the selectors gets the one request instead.
func (d *namespacedResourcesDeleter) deleteShards(ctx context.Context, gvr schema.GroupVersionResource, ns string, shards []string) error {
	client := d.metadataClient.Resource(gvr).Namespace(ns)
	if len(shards) == 0 {
		return client.DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{})
	}
	errs := make([]error, len(shards))
	workqueue.ParallelizeUntil(ctx, parallelRequests, len(shards), func(i int) {
		errs[i] = client.DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{FieldSelector: shards[i]})
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if apierrors.IsBadRequest(err) {
			return client.DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{})
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// passTasks groups the resources a pass deletes side by side: each alone,
// except the two event resources, which share storage and go in order.
func passTasks(gvrs []schema.GroupVersionResource) [][]schema.GroupVersionResource {
	var tasks [][]schema.GroupVersionResource
	var events []schema.GroupVersionResource
	for _, gvr := range gvrs {
		if gvr.Resource == coreEvents.Resource && (gvr.Group == coreEvents.Group || gvr.Group == eventsAPIEvents.Group) {
			events = append(events, gvr)
			continue
		}
		tasks = append(tasks, []schema.GroupVersionResource{gvr})
	}
	if len(events) > 0 {
		// Core events first: only they are sharded.
		sort.SliceStable(events, func(i, j int) bool { return events[i].Group == "" && events[j].Group != "" })
		tasks = append([][]schema.GroupVersionResource{events}, tasks...)
	}
	return tasks
}
