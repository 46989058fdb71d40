package deletion

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API server deletes the items of a deletecollection one after the
// other (kube-apiserver's --delete-collection-workers defaults to 1), so a
// namespace's thousands of pods or events take seconds per thousand in one
// request. A pass splits such a collection into parts that together hold
// every item once and sends them side by side: pods by field selector on
// their nodes, events by pages of one listing. The same objects are
// deleted with the same options, only sooner.

// parallelRequests bounds the requests one pass has in flight at each
// level: resources deleted side by side, and the parts of one resource.
const parallelRequests = 8

// shardMinItems: fewer pods than this go in one request, as upstream sends
// them.
const shardMinItems = 200

// eventPageSize: a page of events is deleted by one request. Events have
// no field that splits the largest kind and reason (the scheduler's
// Scheduled events are a third of a namespace's), so they go by pages:
// a collection that fills more than one page goes in pages side by side,
// a smaller one in one request, as upstream sends it.
const eventPageSize = 250

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

// requestSource hands send the list options of each request that deletes
// a part of a collection, and fails if it cannot name them all. A nil
// source means one request for the whole collection.
type requestSource func(ctx context.Context, send func(metav1.ListOptions)) error

// noneOf selects the items whose field has none of values.
func noneOf(field string, values []string) string {
	terms := make([]string, 0, len(values))
	for _, v := range values {
		terms = append(terms, field+"!="+fields.EscapeValue(v))
	}
	return strings.Join(terms, ",")
}

// sendNothing is a collection no request would change: a pass skips it.
func sendNothing(context.Context, func(metav1.ListOptions)) error { return nil }

// selectorShards sends one request per field selector.
func selectorShards(selectors []string) requestSource {
	if len(selectors) == 0 {
		return nil
	}
	return func(ctx context.Context, send func(metav1.ListOptions)) error {
		for _, s := range selectors {
			if err := ctx.Err(); err != nil {
				return err
			}
			send(metav1.ListOptions{FieldSelector: s})
		}
		return nil
	}
}

// nodeShards partitions pods by the nodes holding most of them, given how
// many each node holds ("" for pods not yet scheduled), the largest shard
// first: the first shards start first. Only shards holding a pod that a
// delete would change (toDelete, counted by node) are returned.
func nodeShards(podsByNode, toDelete map[string]int) []string {
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
	others := total(podsByNode)
	othersToDelete := total(toDelete)
	for _, n := range named {
		others -= podsByNode[n]
		othersToDelete -= toDelete[n]
	}
	var shards []string
	// The shard of the other nodes goes where its size puts it.
	rest := noneOf("spec.nodeName", named)
	restPending := othersToDelete > 0
	for _, n := range named {
		if restPending && podsByNode[n] < others {
			shards = append(shards, rest)
			restPending = false
		}
		if toDelete[n] > 0 {
			shards = append(shards, "spec.nodeName="+fields.EscapeValue(n))
		}
	}
	if restPending {
		shards = append(shards, rest)
	}
	return shards
}

// eventPages deletes core events a page at a time. It lists them in pages
// of eventPageSize and sends, for each page, a deletecollection with the
// same limit and continue token: the server lists that very page again
// (the token pins the listing's snapshot) and deletes its items, so the
// pages hold every event of the snapshot once. The first page goes
// without a token, at the current state: a namespace being deleted gets no
// new events, so it can only hold fewer, and its page reaches at least as
// far. One page in all means one request without a limit, as upstream's.
func (d *namespacedResourcesDeleter) eventPages(gvr schema.GroupVersionResource, ns string) requestSource {
	if gvr != coreEvents || !d.unsupported.supported(verbKey{verbList, gvr}) {
		return nil
	}
	client := d.metadataClient.Resource(gvr).Namespace(ns)
	return func(ctx context.Context, send func(metav1.ListOptions)) error {
		page := metav1.ListOptions{Limit: eventPageSize}
		for {
			list, err := client.List(ctx, page)
			if err != nil {
				return err
			}
			if list.Continue == "" && page.Continue == "" {
				send(metav1.ListOptions{})
				return nil
			}
			send(page)
			if list.Continue == "" {
				return nil
			}
			page.Continue = list.Continue
		}
	}
}

// deleteShards deletes gvr's collection in ns, one request per part the
// source sends (one in all without a source), parallelRequests at a time,
// and returns the first error. A server refusing a part's selector or
// token (or a source that could not finish) gets one request for the
// whole collection instead.
func (d *namespacedResourcesDeleter) deleteShards(ctx context.Context, gvr schema.GroupVersionResource, ns string, parts requestSource) error {
	client := d.metadataClient.Resource(gvr).Namespace(ns)
	whole := func() error { return client.DeleteCollection(ctx, backgroundDelete(), metav1.ListOptions{}) }
	if parts == nil {
		return whole()
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	queue := make(chan metav1.ListOptions)
	for range parallelRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for opts := range queue {
				if err := client.DeleteCollection(ctx, backgroundDelete(), opts); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	sourceErr := parts(ctx, func(opts metav1.ListOptions) { queue <- opts })
	close(queue)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if sourceErr != nil || slices.ContainsFunc(errs, refusedPart) {
		return whole()
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// refusedPart: the server does not take the part's field selector (400),
// or its continue token has outlived the snapshot it pins (410).
func refusedPart(err error) bool {
	return apierrors.IsBadRequest(err) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
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
		// Core events first: only they go in pages.
		sort.SliceStable(events, func(i, j int) bool { return events[i].Group == "" && events[j].Group != "" })
		tasks = append([][]schema.GroupVersionResource{events}, tasks...)
	}
	return tasks
}
