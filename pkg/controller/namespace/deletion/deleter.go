// Package deletion empties a terminating namespace: it deletes every
// namespaced resource the server can list and delete, pods first, reports
// progress as namespace conditions and finally removes the controller's
// finalizer through the namespace's finalize subresource.
package deletion

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// finalizerWaitSeconds is the estimate used when what remains is only
// waiting on finalizers (e.g. the garbage collector's).
const finalizerWaitSeconds = int64(15)

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// exitOnNoResources ends the process when discovery yields nothing at
// start-up, as upstream does; tests replace it.
var exitOnNoResources = func() { klog.FlushAndExit(klog.ExitFlushTimeout, 1) }

// NamespacedResourcesDeleterInterface empties and finalizes one namespace.
type NamespacedResourcesDeleterInterface interface {
	Delete(ctx context.Context, nsName string) error
}

// ResourcesRemainingError means deletion is under way but content is still
// terminating; Estimate is how many seconds that may take.
type ResourcesRemainingError struct {
	Estimate int64
}

func (e *ResourcesRemainingError) Error() string {
	return fmt.Sprintf("some content remains in the namespace, estimate %d seconds before it is removed", e.Estimate)
}

type verb string

const (
	verbList             verb = "list"
	verbDeleteCollection verb = "deletecollection"
)

type verbKey struct {
	verb verb
	gvr  schema.GroupVersionResource
}

// unsupportedVerbs remembers which verbs a resource lacks, seeded from
// discovery and extended when the server answers 405/404.
type unsupportedVerbs struct {
	mu sync.RWMutex
	m  map[verbKey]bool
}

func (u *unsupportedVerbs) supported(k verbKey) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return !u.m[k]
}

func (u *unsupportedVerbs) markUnsupported(k verbKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[k] = true
}

type namespacedResourcesDeleter struct {
	nsClient       corev1client.NamespaceInterface
	metadataClient metadata.Interface
	podsGetter     corev1client.PodsGetter
	unsupported    *unsupportedVerbs
	discover       func() ([]*metav1.APIResourceList, error)
	finalizerToken v1.FinalizerName
	now            func() time.Time
}

// NewNamespacedResourcesDeleter builds a deleter. It runs discovery once to
// learn which resources lack list or deletecollection; if discovery returns
// nothing at all the process exits, as upstream's does.
func NewNamespacedResourcesDeleter(ctx context.Context, nsClient corev1client.NamespaceInterface,
	metadataClient metadata.Interface, podsGetter corev1client.PodsGetter,
	discoverResourcesFn func() ([]*metav1.APIResourceList, error),
	finalizerToken v1.FinalizerName) NamespacedResourcesDeleterInterface {
	d := &namespacedResourcesDeleter{
		nsClient:       nsClient,
		metadataClient: metadataClient,
		podsGetter:     podsGetter,
		unsupported:    &unsupportedVerbs{m: map[verbKey]bool{}},
		discover:       discoverResourcesFn,
		finalizerToken: finalizerToken,
		now:            time.Now,
	}
	d.seedUnsupportedVerbs(ctx)
	return d
}

func (d *namespacedResourcesDeleter) seedUnsupportedVerbs(ctx context.Context) {
	logger := klog.FromContext(ctx)
	lists, err := d.discover()
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Unable to get all supported resources from server")
	}
	if len(lists) == 0 {
		logger.Error(err, "Unable to get any supported resources from server")
		exitOnNoResources()
		return
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			logger.Error(err, "Failed to parse GroupVersion, skipping", "groupVersion", list.GroupVersion)
			continue
		}
		for _, r := range list.APIResources {
			gvr := gv.WithResource(r.Name)
			verbs := sets.New[string](r.Verbs...)
			for _, v := range []verb{verbList, verbDeleteCollection} {
				if !verbs.Has(string(v)) {
					d.unsupported.markUnsupported(verbKey{v, gvr})
				}
			}
		}
	}
}

// Delete makes one pass at emptying nsName. It returns nil when the
// namespace is gone, not being deleted, or finalized by us; a
// *ResourcesRemainingError when content is still terminating; any other
// error when something failed. Callers retry until nil.
func (d *namespacedResourcesDeleter) Delete(ctx context.Context, nsName string) error {
	// Read the live object: other controllers edit terminating namespaces too.
	ns, err := d.nsClient.Get(ctx, nsName, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if ns.DeletionTimestamp == nil {
		return nil
	}
	klog.FromContext(ctx).V(5).Info("Namespace controller - syncNamespace", "namespace", ns.Name, "finalizerToken", d.finalizerToken)

	ns, err = d.retryOnConflict(ctx, ns, d.markTerminating)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if ns.DeletionTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 {
		return nil
	}

	estimate, err := d.deleteAllContent(ctx, ns)
	if err != nil {
		return err
	}
	if estimate > 0 {
		return &ResourcesRemainingError{Estimate: estimate}
	}

	if _, err := d.retryOnConflict(ctx, ns, d.finalize); err != nil && !apierrors.IsNotFound(err) {
		// NotFound: another controller sharing our token finished first.
		return err
	}
	return nil
}

type namespaceUpdate func(ctx context.Context, ns *v1.Namespace) (*v1.Namespace, error)

// retryOnConflict reapplies fn to a fresh copy on conflicts, refusing to
// carry on if the namespace was recreated (new UID) meanwhile.
func (d *namespacedResourcesDeleter) retryOnConflict(ctx context.Context, ns *v1.Namespace, fn namespaceUpdate) (*v1.Namespace, error) {
	current := ns
	for {
		result, err := fn(ctx, current)
		if err == nil {
			return result, nil
		}
		if !apierrors.IsConflict(err) {
			return nil, err
		}
		latest, err := d.nsClient.Get(ctx, current.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if latest.UID != current.UID {
			return nil, fmt.Errorf("namespace uid has changed across retries")
		}
		current = latest
	}
}

func (d *namespacedResourcesDeleter) markTerminating(ctx context.Context, ns *v1.Namespace) (*v1.Namespace, error) {
	if ns.DeletionTimestamp.IsZero() || ns.Status.Phase == v1.NamespaceTerminating {
		return ns, nil
	}
	updated := ns.DeepCopy()
	updated.Status.Phase = v1.NamespaceTerminating
	return d.nsClient.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
}

// finalize drops our token from spec.finalizers via the finalize
// subresource; the rest are kept, sorted and deduplicated.
func (d *namespacedResourcesDeleter) finalize(ctx context.Context, ns *v1.Namespace) (*v1.Namespace, error) {
	keep := sets.New[string]()
	for _, f := range ns.Spec.Finalizers {
		if f != d.finalizerToken {
			keep.Insert(string(f))
		}
	}
	req := v1.Namespace{ObjectMeta: ns.ObjectMeta, Spec: ns.Spec}
	req.Spec.Finalizers = make([]v1.FinalizerName, 0, keep.Len())
	for _, f := range sets.List(keep) {
		req.Spec.Finalizers = append(req.Spec.Finalizers, v1.FinalizerName(f))
	}
	result, err := d.nsClient.Finalize(ctx, &req, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return result, nil
	}
	return result, err
}

// backgroundDelete keeps the garbage collector from adding its orphan
// finalizer: everything in the namespace is going anyway.
func backgroundDelete() metav1.DeleteOptions {
	p := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &p}
}

// notSupported covers resources discovery lists without usable verbs: some
// answer 405, some a plain 404.
func notSupported(err error) bool {
	return apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err)
}

// deleteCollection reports whether deletecollection is supported, and an
// error only when it is but failed. Parts, if any, split the request.
func (d *namespacedResourcesDeleter) deleteCollection(ctx context.Context, gvr schema.GroupVersionResource, ns string, parts requestSource) (bool, error) {
	logger := klog.FromContext(ctx)
	if !d.unsupported.supported(verbKey{verbDeleteCollection, gvr}) {
		logger.V(5).Info("Namespace controller - deleteCollection ignored since not supported", "namespace", ns, "resource", gvr)
		return false, nil
	}
	err := d.deleteShards(ctx, gvr, ns, parts)
	switch {
	case err == nil:
		return true, nil
	case notSupported(err):
		logger.V(5).Info("Namespace controller - deleteCollection not supported", "namespace", ns, "resource", gvr)
		return false, nil
	default:
		return true, err
	}
}

// listPageSize bounds one list response. A namespace being emptied may
// hold tens of thousands of pods, and one response listing them all is
// decoded at once: the largest allocation of a mass delete (upstream lists
// without a limit).
const listPageSize = 500

// eachListItem hands fn every item list returns, listing listPageSize at a
// time: one page is held while fn runs, the next one is being fetched. The
// pages come from one snapshot of the collection (the continue token), as
// a single list would. A token outlives its snapshot only if the pages
// take minutes (the server's compaction interval); then the pass fails
// and is retried, like any failed list, so fn must not write.
func eachListItem(ctx context.Context, list pager.ListPageFunc, fn func(runtime.Object) error) error {
	p := pager.New(list)
	p.PageSize = listPageSize
	p.PageBufferSize = 0
	return p.EachListItem(ctx, metav1.ListOptions{}, fn)
}

// eachItem hands fn every instance of gvr in ns. It reports whether list is
// supported, and an error only when it is but failed (or fn failed).
func (d *namespacedResourcesDeleter) eachItem(ctx context.Context, gvr schema.GroupVersionResource, ns string, fn func(*metav1.PartialObjectMetadata) error) (bool, error) {
	if !d.unsupported.supported(verbKey{verbList, gvr}) {
		klog.FromContext(ctx).V(5).Info("Namespace controller - listCollection ignored since not supported", "namespace", ns, "resource", gvr)
		return false, nil
	}
	client := d.metadataClient.Resource(gvr).Namespace(ns)
	err := eachListItem(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return client.List(ctx, opts)
	}, func(obj runtime.Object) error {
		item, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return fmt.Errorf("listing %v returned a %T", gvr, obj)
		}
		return fn(item)
	})
	switch {
	case err == nil:
		return true, nil
	case notSupported(err):
		return false, nil
	default:
		return true, err
	}
}

// deleteEach is the fallback for resources without deletecollection. It
// deletes once the listing is over (one request each can take longer than
// a page's snapshot lives), keeping only the names.
func (d *namespacedResourcesDeleter) deleteEach(ctx context.Context, gvr schema.GroupVersionResource, ns string) error {
	var names []string
	ok, err := d.eachItem(ctx, gvr, ns, func(item *metav1.PartialObjectMetadata) error {
		names = append(names, item.Name)
		return nil
	})
	if err != nil || !ok {
		return err
	}
	client := d.metadataClient.Resource(gvr).Namespace(ns)
	for _, name := range names {
		if err := client.Delete(ctx, name, backgroundDelete()); err != nil && !notSupported(err) {
			return err
		}
	}
	return nil
}

// resourceResult is what one resource pass leaves behind.
type resourceResult struct {
	// estimate is seconds to wait; zero does not by itself mean empty.
	estimate    int64
	remaining   int
	byFinalizer map[string]int
}

// deleteResource deletes every instance of gvr in ns and checks what is
// left. Leftovers are expected while pods terminate or finalizers run;
// leftovers with neither are an error.
func (d *namespacedResourcesDeleter) deleteResource(ctx context.Context, gvr schema.GroupVersionResource, ns string, deletedAt metav1.Time) (resourceResult, error) {
	logger := klog.FromContext(ctx)
	estimate, parts, err := d.planDeletion(ctx, gvr, ns, deletedAt)
	if err != nil {
		return resourceResult{}, err
	}
	collected, err := d.deleteCollection(ctx, gvr, ns, parts)
	if err != nil {
		return resourceResult{estimate: estimate}, err
	}
	if !collected {
		if err := d.deleteEach(ctx, gvr, ns); err != nil {
			return resourceResult{estimate: estimate}, err
		}
	}

	left := 0
	byFinalizer := map[string]int{}
	ok, err := d.eachItem(ctx, gvr, ns, func(item *metav1.PartialObjectMetadata) error {
		left++
		for _, f := range item.Finalizers {
			byFinalizer[f]++
		}
		return nil
	})
	if err != nil || !ok {
		return resourceResult{estimate: estimate}, err
	}
	if left == 0 {
		return resourceResult{}, nil
	}
	logger.V(5).Info("Namespace controller - items remaining", "namespace", ns, "resource", gvr, "items", left, "finalizers", byFinalizer)
	switch {
	case estimate != 0:
		return resourceResult{estimate: estimate, remaining: left, byFinalizer: byFinalizer}, nil
	case len(byFinalizer) > 0:
		return resourceResult{estimate: finalizerWaitSeconds, remaining: left, byFinalizer: byFinalizer}, nil
	default:
		return resourceResult{remaining: left},
			fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, gvr)
	}
}

// resourceOutcome is one resource's pass, gathered from the workers.
type resourceOutcome struct {
	gvr schema.GroupVersionResource
	res resourceResult
	err error
}

// remainingContent totals what is left across all resources.
type remainingContent struct {
	byResource  map[schema.GroupVersionResource]int
	byFinalizer map[string]int
}

func (r *remainingContent) add(gvr schema.GroupVersionResource, res resourceResult) {
	if res.remaining <= 0 {
		return
	}
	r.byResource[gvr] = res.remaining
	for f, n := range res.byFinalizer {
		if n > 0 {
			r.byFinalizer[f] += n
		}
	}
}

// deleteAllContent deletes pods first and everything else only once no pod
// remains, so workloads stop before their config and credentials vanish.
// It returns the longest wait estimate and the aggregated errors, and
// writes the namespace's conditions when they changed.
func (d *namespacedResourcesDeleter) deleteAllContent(ctx context.Context, ns *v1.Namespace) (int64, error) {
	logger := klog.FromContext(ctx)
	deletedAt := *ns.DeletionTimestamp
	var errs []error
	conds := conditionCollector{}

	// Discovery failures are not fatal: delete what was discovered.
	lists, err := d.discover()
	if err != nil {
		errs = append(errs, err)
		conds.discoveryFailed(err)
	}
	deletable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete"}}, lists)
	gvrs, err := discovery.GroupVersionResources(deletable)
	if err != nil {
		errs = append(errs, err)
		conds.groupVersionParsingFailed(err)
	}

	totals := remainingContent{byResource: map[schema.GroupVersionResource]int{}, byFinalizer: map[string]int{}}
	estimate := int64(0)
	record := func(gvr schema.GroupVersionResource, res resourceResult) {
		if res.estimate > estimate {
			estimate = res.estimate
		}
		totals.add(gvr, res)
	}

	if _, ok := gvrs[podsResource]; ok {
		res, err := d.deleteResource(ctx, podsResource, ns.Name, deletedAt)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to delete pods for namespace: %s, err: %w", ns.Name, err))
			conds.contentDeletionFailed(err)
		}
		record(podsResource, res)
		if totals.byResource[podsResource] > 0 {
			logger.V(5).Info("Namespace controller - pods still remain, delaying deletion of other resources", "namespace", ns.Name)
			// Upstream does not report remaining content on this early return.
			d.writeConditions(ctx, ns, &conds)
			return estimate, utilerrors.NewAggregate(errs)
		}
	}

	// Sorted only so passes are reproducible; upstream walks a map, one
	// resource at a time.
	ordered := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		if gvr != podsResource {
			ordered = append(ordered, gvr)
		}
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].String() < ordered[j].String() })
	tasks := passTasks(ordered)
	outcomes := make([][]resourceOutcome, len(tasks))
	workqueue.ParallelizeUntil(ctx, parallelRequests, len(tasks), func(i int) {
		for _, gvr := range tasks[i] {
			res, err := d.deleteResource(ctx, gvr, ns.Name, deletedAt)
			outcomes[i] = append(outcomes[i], resourceOutcome{gvr, res, err})
		}
	})
	if err := ctx.Err(); err != nil {
		// Stopping: some resources were skipped, so no condition is known.
		return estimate, err
	}
	for _, task := range outcomes {
		for _, o := range task {
			if o.err != nil {
				// Keep going: one broken resource must not block the others.
				errs = append(errs, o.err)
				conds.contentDeletionFailed(o.err)
			}
			record(o.gvr, o.res)
		}
	}
	conds.remaining(totals)
	// Always reconcile: a failure seen earlier must flip back to healthy.
	d.writeConditions(ctx, ns, &conds)

	err = utilerrors.NewAggregate(errs)
	logger.V(4).Info("namespace controller - deleteAllContent", "namespace", ns.Name, "estimate", estimate, "err", err)
	return estimate, err
}

func (d *namespacedResourcesDeleter) writeConditions(ctx context.Context, ns *v1.Namespace, conds *conditionCollector) {
	if !conds.apply(ns) {
		return
	}
	if _, err := d.nsClient.UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Couldn't update status condition for namespace", "namespace", ns.Name)
	}
}

// planDeletion returns how long, in seconds, instances of gvr may still
// take to go (only pods have a grace period; zero once the namespace has
// been deleting for longer) and the parts a large collection of pods or
// events is deleted in. Pods whose graceful deletion is under way get no
// request of their own: another delete would leave them as they are.
func (d *namespacedResourcesDeleter) planDeletion(ctx context.Context, gvr schema.GroupVersionResource, ns string, deletedAt metav1.Time) (int64, requestSource, error) {
	if gvr.GroupResource() != podsResource.GroupResource() {
		return 0, d.eventPages(gvr, ns), nil
	}
	survey, err := d.surveyPods(ctx, ns)
	if err != nil {
		return 0, nil, err
	}
	estimate := survey.longestGrace
	if d.now().Sub(deletedAt.Time) >= time.Duration(estimate)*time.Second {
		estimate = 0
	}
	pods := total(survey.byNode)
	if pods > 0 && len(survey.toDelete) == 0 {
		klog.FromContext(ctx).V(5).Info("Namespace controller - every pod left is terminating, not deleting them again", "namespace", ns, "pods", pods)
		return estimate, sendNothing, nil
	}
	var shards []string
	if pods >= shardMinItems {
		shards = nodeShards(survey.byNode, survey.toDelete)
	}
	return estimate, selectorShards(shards), nil
}

// podSurvey is what one listing of a namespace's pods tells a pass.
type podSurvey struct {
	// longestGrace is the largest terminationGracePeriodSeconds among pods
	// that have not finished.
	longestGrace int64
	// byNode counts pods per node ("" for pods not scheduled).
	byNode map[string]int
	// toDelete counts, by node, the pods a delete would change: all but
	// those whose graceful deletion is under way, which the API server
	// leaves as they are when deleted again without a grace period (a
	// deletion grace period of zero is retried at once).
	toDelete map[string]int
}

func (d *namespacedResourcesDeleter) surveyPods(ctx context.Context, ns string) (podSurvey, error) {
	survey := podSurvey{byNode: map[string]int{}, toDelete: map[string]int{}}
	if d.podsGetter == nil {
		return survey, fmt.Errorf("unexpected: podsGetter is nil. Cannot estimate grace period seconds for pods")
	}
	pods := d.podsGetter.Pods(ns)
	err := eachListItem(ctx, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return pods.List(ctx, opts)
	}, func(obj runtime.Object) error {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return fmt.Errorf("listing pods returned a %T", obj)
		}
		survey.byNode[p.Spec.NodeName]++
		gracePending := p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds != 0
		if !gracePending {
			survey.toDelete[p.Spec.NodeName]++
		}
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			return nil
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g > survey.longestGrace {
			survey.longestGrace = *g
		}
		return nil
	})
	if err != nil {
		return podSurvey{}, err
	}
	return survey, nil
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
