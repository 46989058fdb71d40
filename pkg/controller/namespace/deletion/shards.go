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

// maxNodeShards bounds the nodes named in pod shards; pods on other nodes
// (or none) share the last shard.
const maxNodeShards = 16

var (
	coreEvents = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	// eventsAPIEvents is stored with coreEvents: deleted after them, it
	// normally finds nothing left.
	eventsAPIEvents = schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}
)

// eventShardKeys are the kinds, and within them the reasons, most of a
// namespace's events have: the scheduler's and kubelet's about pods and
// the workload controllers' about what they create.
var eventShardKeys = []struct {
	kind    string
	reasons []string
}{
	{"Pod", []string{"Scheduled", "FailedScheduling", "Pulling", "Pulled", "Created", "Started", "Killing"}},
	{"ReplicaSet", []string{"SuccessfulCreate", "SuccessfulDelete"}},
	{"Deployment", nil},
	{"Job", []string{"SuccessfulCreate"}},
	{"StatefulSet", nil},
	{"DaemonSet", nil},
}

// partition splits the items matching within on field: one selector for
// each value, and one for every value not listed.
func partition(within []string, field string, values []string) []string {
	var out, others []string
	for _, v := range values {
		out = append(out, joinSelector(within, field+"="+fields.EscapeValue(v)))
		others = append(others, field+"!="+fields.EscapeValue(v))
	}
	return append(out, joinSelector(within, others...))
}

func joinSelector(within []string, terms ...string) string {
	all := append(append([]string{}, within...), terms...)
	return strings.Join(all, ",")
}

// eventShards partitions core events by eventShardKeys.
func eventShards() []string {
	kinds := make([]string, 0, len(eventShardKeys))
	var shards []string
	for _, k := range eventShardKeys {
		kinds = append(kinds, k.kind)
		of := []string{"involvedObject.kind=" + fields.EscapeValue(k.kind)}
		if len(k.reasons) == 0 {
			shards = append(shards, joinSelector(of))
			continue
		}
		shards = append(shards, partition(of, "reason", k.reasons)...)
	}
	rest := partition(nil, "involvedObject.kind", kinds)
	return append(shards, rest[len(rest)-1])
}

// nodeShards partitions pods by the nodes holding most of them, given how
// many each node holds ("" for pods not yet scheduled).
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
	if len(nodes) > maxNodeShards {
		nodes = nodes[:maxNodeShards]
	}
	return partition(nil, "spec.nodeName", nodes)
}

// eventShardsIfLarge returns eventShards when the namespace holds at least
// shardMinItems events; one page of names tells.
func (d *namespacedResourcesDeleter) eventShardsIfLarge(ctx context.Context, gvr schema.GroupVersionResource, ns string) []string {
	if gvr != coreEvents || !d.unsupported.supported(verbKey{verbList, gvr}) {
		return nil
	}
	page, err := d.metadataClient.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: shardMinItems})
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
