package controller

import (
	"fmt"
	"strconv"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

const (
	// PodDeletionCostAnnotation lets users hint which pods of a ReplicaSet to
	// delete first on scale-down (lower cost goes first).
	PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

	// PodControllerIndex names the pod informer index from
	// AddPodControllerIndexer (same name as upstream, so sharing the pod
	// informer with other controllers adds it once).
	PodControllerIndex = "podController"

	// PodTemplateHashIndex names the pod informer index from
	// AddPodTemplateHashIndexer.
	PodTemplateHashIndex = "podTemplateHash"

	// PodLabelsIndex names the pod informer index from AddPodLabelsIndexer.
	PodLabelsIndex = "podLabels"
)

// KeyFunc is the key controllers queue objects under: namespace/name, and
// it also accepts the tombstones informers deliver for missed deletes.
var KeyFunc = cache.DeletionHandlingMetaNamespaceKeyFunc

// PodKey returns namespace/name of a pod (the key expectations track).
func PodKey(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// podReadyCondition returns the pod's Ready condition or nil.
func podReadyCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// IsPodReady reports whether the pod's Ready condition is True.
func IsPodReady(pod *v1.Pod) bool {
	c := podReadyCondition(pod)
	return c != nil && c.Status == v1.ConditionTrue
}

// IsPodAvailable reports whether the pod has been ready for at least
// minReadySeconds at now (a pod ready with a zero transition time is only
// available when minReadySeconds is 0).
func IsPodAvailable(pod *v1.Pod, minReadySeconds int32, now metav1.Time) bool {
	if !IsPodReady(pod) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	c := podReadyCondition(pod)
	if c.LastTransitionTime.IsZero() {
		return false
	}
	availableAt := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
	return !availableAt.After(now.Time)
}

// IsPodTerminal reports whether the pod reached Succeeded or Failed.
func IsPodTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// IsPodActive reports whether the pod counts as a replica: not finished and
// not being deleted.
func IsPodActive(pod *v1.Pod) bool {
	return !IsPodTerminal(pod) && pod.DeletionTimestamp == nil
}

// IsPodTerminating reports whether the pod is being deleted but has not
// finished yet.
func IsPodTerminating(pod *v1.Pod) bool {
	return !IsPodTerminal(pod) && pod.DeletionTimestamp != nil
}

func filterPods(pods []*v1.Pod, keep func(*v1.Pod) bool) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// FilterActivePods returns the pods for which IsPodActive holds.
func FilterActivePods(pods []*v1.Pod) []*v1.Pod {
	return filterPods(pods, IsPodActive)
}

// FilterTerminatingPods returns the pods for which IsPodTerminating holds.
func FilterTerminatingPods(pods []*v1.Pod) []*v1.Pod {
	return filterPods(pods, IsPodTerminating)
}

// CountTerminatingPods counts the pods for which IsPodTerminating holds.
func CountTerminatingPods(pods []*v1.Pod) int32 {
	n := int32(0)
	for _, p := range pods {
		if IsPodTerminating(p) {
			n++
		}
	}
	return n
}

// FilterClaimedPods returns the pods controlled by owner whose labels match
// selector (orphans and pods of other controllers are dropped).
func FilterClaimedPods(owner metav1.Object, selector labels.Selector, pods []*v1.Pod) []*v1.Pod {
	return filterPods(pods, func(p *v1.Pod) bool {
		return metav1.IsControlledBy(p, owner) && selector.Matches(labels.Set(p.Labels))
	})
}

// GetDeletionCostFromPodAnnotations parses the pod-deletion-cost annotation.
// A missing annotation is 0; so is an invalid one (with an error). Like the
// API validation, "+1" and leading zeros are rejected.
func GetDeletionCostFromPodAnnotations(annotations map[string]string) (int32, error) {
	value, ok := annotations[PodDeletionCostAnnotation]
	if !ok {
		return 0, nil
	}
	// Only canonical integers: no leading '+' or zeros, as upstream accepts.
	if value == "" || (value[0] != '-' && value != "0" && (value[0] < '1' || value[0] > '9')) {
		return 0, fmt.Errorf("invalid value %q", value)
	}
	i, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0, err
	}
	return int32(i), nil
}

// PodControllerIndexKey is the PodControllerIndex key of pods controlled by
// ref, or of the namespace's orphans when ref is nil.
func PodControllerIndexKey(namespace string, ref *metav1.OwnerReference) string {
	if ref == nil {
		return namespace
	}
	return namespace + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)
}

// AddPodControllerIndexer indexes pods by controller (or as orphans) so a
// controller can list its pods without scanning the namespace. It is a no-op
// if another controller sharing the informer already added it.
func AddPodControllerIndexer(podInformer cache.SharedIndexInformer) error {
	return addIndexOnce(podInformer, PodControllerIndex, func(obj interface{}) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		return []string{PodControllerIndexKey(pod.Namespace, metav1.GetControllerOfNoCopy(pod))}, nil
	})
}

// AddPodTemplateHashIndexer indexes pods by namespace and pod-template-hash
// label (the label a Deployment's ReplicaSets select on), so the pods a
// Deployment's ReplicaSet selects can be found without matching the
// selector against every pod in the namespace. A no-op if already added.
func AddPodTemplateHashIndexer(podInformer cache.SharedIndexInformer) error {
	return AddPodLabelIndexer(podInformer, PodTemplateHashIndex, apps.DefaultDeploymentUniqueLabelKey)
}

// AddPodLabelIndexer indexes pods under index by namespace and the value of
// their label key (pods without it are not indexed). A no-op if index is
// already added.
func AddPodLabelIndexer(podInformer cache.SharedIndexInformer, index, key string) error {
	return addIndexOnce(podInformer, index, func(obj interface{}) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return nil, nil
		}
		value, ok := pod.Labels[key]
		if !ok {
			return nil, nil
		}
		return []string{pod.Namespace + "/" + value}, nil
	})
}

// podLabelsIndexValue is a PodLabelsIndex value. A namespace has no "/"
// and a label key no "=", so distinct triples never share a value.
func podLabelsIndexValue(namespace, key, value string) string {
	return namespace + "/" + key + "=" + value
}

// AddPodLabelsIndexer indexes pods by namespace and each of their labels
// (one entry per key=value), so the pods an equality selector picks are
// found by looking at one bucket instead of matching every pod of the
// namespace. A no-op if already added.
func AddPodLabelsIndexer(podInformer cache.SharedIndexInformer) error {
	return addIndexOnce(podInformer, PodLabelsIndex, func(obj interface{}) ([]string, error) {
		pod, ok := obj.(*v1.Pod)
		if !ok || len(pod.Labels) == 0 {
			return nil, nil
		}
		values := make([]string, 0, len(pod.Labels))
		for k, v := range pod.Labels {
			values = append(values, podLabelsIndexValue(pod.Namespace, k, v))
		}
		return values, nil
	})
}

// ListPodsByLabels returns the pods in namespace that selector selects,
// like a namespaced lister List. With PodLabelsIndex on podIndexer and a
// selector requiring at least one label to have a single value, only the
// smallest such bucket is matched; otherwise every pod of the namespace is.
// Both give the same pods: a pod outside a required bucket can't match.
func ListPodsByLabels(podIndexer cache.Indexer, namespace string, selector labels.Selector) ([]*v1.Pod, error) {
	candidates, narrowed, err := smallestLabelBucket(podIndexer, namespace, selector)
	if err != nil {
		return nil, err
	}
	return selectPods(podIndexer, namespace, selector, candidates, narrowed)
}

// selectPods returns the candidates selector matches when narrowed, and
// else the pods of namespace it matches.
func selectPods(podIndexer cache.Indexer, namespace string, selector labels.Selector, candidates []interface{}, narrowed bool) ([]*v1.Pod, error) {
	var pods []*v1.Pod
	if narrowed {
		for _, o := range candidates {
			if p, ok := o.(*v1.Pod); ok && selector.Matches(labels.Set(p.Labels)) {
				pods = append(pods, p)
			}
		}
		return pods, nil
	}
	err := cache.ListAllByNamespace(podIndexer, namespace, selector, func(o interface{}) {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	})
	return pods, err
}

// smallestLabelBucket returns the fewest pods of PodLabelsIndex under one
// of the key=value pairs selector requires, and false when the index is
// missing, selector pins no label or namespace is all of them (buckets are
// per namespace).
func smallestLabelBucket(podIndexer cache.Indexer, namespace string, selector labels.Selector) ([]interface{}, bool, error) {
	if _, indexed := podIndexer.GetIndexers()[PodLabelsIndex]; !indexed || namespace == metav1.NamespaceAll {
		return nil, false, nil
	}
	reqs, selectable := selector.Requirements()
	if !selectable {
		return nil, false, nil
	}
	var best []interface{}
	found := false
	for _, r := range reqs {
		value, pinned := singleValue(r)
		if !pinned {
			continue
		}
		objs, err := podIndexer.ByIndex(PodLabelsIndex, podLabelsIndexValue(namespace, r.Key(), value))
		if err != nil {
			return nil, false, err
		}
		if !found || len(objs) < len(best) {
			best, found = objs, true
		}
		if len(best) == 0 {
			break
		}
	}
	return best, found, nil
}

// singleValue returns the one value requirement r allows, if it allows
// exactly one.
func singleValue(r labels.Requirement) (string, bool) {
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		if vals := r.Values(); vals.Len() == 1 {
			return vals.UnsortedList()[0], true
		}
	}
	return "", false
}

// ListPodsBySelector returns the pods in namespace that selector selects,
// like a namespaced lister List, through PodTemplateHashIndex when the
// selector pins pod-template-hash (every Deployment-owned ReplicaSet's does).
func ListPodsBySelector(podIndexer cache.Indexer, namespace string, selector labels.Selector) ([]*v1.Pod, error) {
	return ListPodsPinnedBy(podIndexer, PodTemplateHashIndex, apps.DefaultDeploymentUniqueLabelKey, namespace, selector)
}

// ListPodsPinnedBy returns the pods in namespace that selector selects.
// When selector requires label key to have one value and podIndexer has
// index (from AddPodLabelIndexer for key), only the pods under that value
// are matched; otherwise every pod of the namespace is. Both give the same
// pods: a pod without that value can't match.
func ListPodsPinnedBy(podIndexer cache.Indexer, index, key, namespace string, selector labels.Selector) ([]*v1.Pod, error) {
	if value, pinned := pinnedValue(selector, key); pinned {
		if _, indexed := podIndexer.GetIndexers()[index]; indexed {
			objs, err := podIndexer.ByIndex(index, namespace+"/"+value)
			if err != nil {
				return nil, err
			}
			return selectPods(podIndexer, namespace, selector, objs, true)
		}
	}
	return selectPods(podIndexer, namespace, selector, nil, false)
}

// pinnedValue returns the one value selector requires label key to have.
func pinnedValue(selector labels.Selector, key string) (string, bool) {
	reqs, selectable := selector.Requirements()
	if !selectable {
		return "", false
	}
	for _, r := range reqs {
		if r.Key() == key {
			if value, ok := singleValue(r); ok {
				return value, true
			}
		}
	}
	return "", false
}

// FilterPodsByOwner lists, through the PodControllerIndex, the pods that
// owner (of kind ownerKind) controls, plus the namespace's orphans when
// includeOrphans is set (candidates for adoption).
func FilterPodsByOwner(podIndexer cache.Indexer, owner metav1.Object, ownerKind string, includeOrphans bool) ([]*v1.Pod, error) {
	switch {
	case owner.GetNamespace() == "":
		return nil, fmt.Errorf("no owner namespace provided")
	case owner.GetName() == "":
		return nil, fmt.Errorf("no owner name provided")
	case owner.GetUID() == "":
		return nil, fmt.Errorf("no owner uid provided")
	case ownerKind == "":
		return nil, fmt.Errorf("no owner kind provided")
	}
	keys := []string{PodControllerIndexKey(owner.GetNamespace(), &metav1.OwnerReference{Kind: ownerKind, Name: owner.GetName(), UID: owner.GetUID()})}
	if includeOrphans {
		keys = append(keys, PodControllerIndexKey(owner.GetNamespace(), nil))
	}
	var pods []*v1.Pod
	for _, k := range keys {
		objs, err := podIndexer.ByIndex(PodControllerIndex, k)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if p, ok := o.(*v1.Pod); ok {
				pods = append(pods, p)
			}
		}
	}
	return pods, nil
}

// nextAvailableIn returns how long until a ready pod becomes available, or
// nil if it is not ready, has no transition time, or already is available.
func nextAvailableIn(pod *v1.Pod, minReadySeconds int32, now time.Time) *time.Duration {
	if minReadySeconds <= 0 || !IsPodReady(pod) {
		return nil
	}
	c := podReadyCondition(pod)
	if c.LastTransitionTime.IsZero() {
		return nil
	}
	d := c.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second).Sub(now)
	if d <= 0 {
		return nil
	}
	return &d
}

// FindMinNextPodAvailabilityCheck returns when the owner should be synced
// again so a pod that is ready but not yet available gets counted, or nil if
// no pod will become available. evaluatedAt must be the time used to compute
// the status (so no pod slips between the two); the result is then refined
// against c.Now(), and is 0 if that moment has already passed.
func FindMinNextPodAvailabilityCheck(pods []*v1.Pod, minReadySeconds int32, evaluatedAt time.Time, c clock.PassiveClock) *time.Duration {
	var soonest *time.Duration
	var soonestPod *v1.Pod
	for _, p := range pods {
		if d := nextAvailableIn(p, minReadySeconds, evaluatedAt); d != nil && (soonest == nil || *d < *soonest) {
			soonest, soonestPod = d, p
		}
	}
	if soonestPod == nil {
		return nil
	}
	if d := nextAvailableIn(soonestPod, minReadySeconds, c.Now()); d != nil {
		return d
	}
	zero := time.Duration(0)
	return &zero
}

// LabelIndexedPodLister returns a pod lister over podInformer whose
// namespaced List goes through PodLabelsIndex (see ListPodsByLabels); it
// adds the index if missing and falls back to a namespace scan if that
// fails.
func LabelIndexedPodLister(podInformer cache.SharedIndexInformer) corelisters.PodLister {
	if err := AddPodLabelsIndexer(podInformer); err != nil {
		utilruntime.HandleError(fmt.Errorf("adding the pod labels index: %w", err))
	}
	indexer := podInformer.GetIndexer()
	return labelIndexedPodLister{PodLister: corelisters.NewPodLister(indexer), indexer: indexer}
}

type labelIndexedPodLister struct {
	corelisters.PodLister
	indexer cache.Indexer
}

func (l labelIndexedPodLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return labelIndexedPodNamespaceLister{PodNamespaceLister: l.PodLister.Pods(namespace), indexer: l.indexer, namespace: namespace}
}

type labelIndexedPodNamespaceLister struct {
	corelisters.PodNamespaceLister
	indexer   cache.Indexer
	namespace string
}

func (l labelIndexedPodNamespaceLister) List(selector labels.Selector) ([]*v1.Pod, error) {
	return ListPodsByLabels(l.indexer, l.namespace, selector)
}

// addIndexOnce adds index name to informer unless it is there already
// (controllers sharing an informer each ask for the indexes they use).
func addIndexOnce(informer cache.SharedIndexInformer, name string, index cache.IndexFunc) error {
	if _, ok := informer.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	return informer.AddIndexers(cache.Indexers{name: index})
}
