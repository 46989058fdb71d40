package controller

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	endpointsliceutil "k8s.io/endpointslice/util"
)

const (
	// ServiceSelectorIndex names the Service informer index from
	// AddServiceSelectorIndexer.
	ServiceSelectorIndex = "serviceSelector"

	// EndpointSliceServiceIndex names the EndpointSlice informer index from
	// AddEndpointSliceServiceIndexer.
	EndpointSliceServiceIndex = "endpointSliceService"
)

// serviceSelectorIndexValue is the ServiceSelectorIndex value of a Service
// whose selector's first key (in sorted order) is key with value. A
// selector of {} selects every pod and is indexed under the bare namespace.
func serviceSelectorIndexValue(namespace, key, value string) string {
	if key == "" {
		return namespace
	}
	return podLabelsIndexValue(namespace, key, value)
}

// AddServiceSelectorIndexer indexes Services with a selector under one
// key=value pair of it: every pod the Service selects carries that pair, so
// the Services selecting a pod are all in the buckets of the pod's own
// labels (plus the namespace's select-everything bucket). Services without
// a selector select nothing and are not indexed. A no-op if already added.
func AddServiceSelectorIndexer(serviceInformer cache.SharedIndexInformer) error {
	return addIndexOnce(serviceInformer, ServiceSelectorIndex, func(obj interface{}) ([]string, error) {
		svc, ok := obj.(*v1.Service)
		if !ok || svc.Spec.Selector == nil {
			return nil, nil
		}
		if len(svc.Spec.Selector) == 0 {
			return []string{serviceSelectorIndexValue(svc.Namespace, "", "")}, nil
		}
		keys := make([]string, 0, len(svc.Spec.Selector))
		for k := range svc.Spec.Selector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return []string{serviceSelectorIndexValue(svc.Namespace, keys[0], svc.Spec.Selector[keys[0]])}, nil
	})
}

// ServicesSelectingPods returns the keys of the Services in namespace whose
// selector matches podLabels, like the endpointslice library's lookup that
// matches every Service of the namespace; with ServiceSelectorIndex only
// the Services in the buckets of podLabels are matched.
func ServicesSelectingPods(serviceIndexer cache.Indexer, namespace string, podLabels labels.Set) (sets.Set[string], error) {
	var candidates []interface{}
	if _, indexed := serviceIndexer.GetIndexers()[ServiceSelectorIndex]; indexed && namespace != metav1.NamespaceAll {
		values := []string{serviceSelectorIndexValue(namespace, "", "")}
		for k, v := range podLabels {
			values = append(values, serviceSelectorIndexValue(namespace, k, v))
		}
		for _, value := range values {
			objs, err := serviceIndexer.ByIndex(ServiceSelectorIndex, value)
			if err != nil {
				return nil, err
			}
			candidates = append(candidates, objs...)
		}
	} else {
		err := cache.ListAllByNamespace(serviceIndexer, namespace, labels.Everything(), func(o interface{}) {
			candidates = append(candidates, o)
		})
		if err != nil {
			return nil, err
		}
	}
	keys := sets.New[string]()
	for _, o := range candidates {
		svc, ok := o.(*v1.Service)
		// A nil selector selects nothing, not everything.
		if !ok || svc.Spec.Selector == nil {
			continue
		}
		if labels.ValidatedSetSelector(svc.Spec.Selector).Matches(podLabels) {
			keys.Insert(svc.Namespace + "/" + svc.Name)
		}
	}
	return keys, nil
}

// ServicesToUpdate returns the keys of the Services a pod change (key)
// affects: those selecting the pod, and on a label change those it joined
// or left (or, if the pod changed too, every Service it was or is in).
// It is the endpointslice library's GetServicesToUpdate through
// ServicesSelectingPods.
func ServicesToUpdate(serviceIndexer cache.Indexer, key *endpointsliceutil.PodProjectionKey) (sets.Set[string], error) {
	if key == nil {
		return nil, nil
	}
	now, err := ServicesSelectingPods(serviceIndexer, key.Namespace, key.Labels)
	if err != nil || key.OldLabels == nil {
		return now, err
	}
	before, err := ServicesSelectingPods(serviceIndexer, key.Namespace, key.OldLabels)
	if err != nil {
		return nil, err
	}
	if key.PodChanged {
		return now.Union(before), nil
	}
	// Only the labels changed: the Services that still select the pod see
	// no difference.
	return now.SymmetricDifference(before), nil
}

// SelectorIndexedServices adds ServiceSelectorIndex to serviceInformer
// if missing (a failure only costs speed) and returns its indexer for
// ServicesToUpdate.
func SelectorIndexedServices(serviceInformer cache.SharedIndexInformer) cache.Indexer {
	if err := AddServiceSelectorIndexer(serviceInformer); err != nil {
		utilruntime.HandleError(fmt.Errorf("adding the Service selector index: %w", err))
	}
	return serviceInformer.GetIndexer()
}

// AddEndpointSliceServiceIndexer indexes EndpointSlices by namespace and
// the Service they belong to (their kubernetes.io/service-name label). A
// no-op if already added.
func AddEndpointSliceServiceIndexer(sliceInformer cache.SharedIndexInformer) error {
	return addIndexOnce(sliceInformer, EndpointSliceServiceIndex, func(obj interface{}) ([]string, error) {
		slice, ok := obj.(*discovery.EndpointSlice)
		if !ok {
			return nil, nil
		}
		service, ok := slice.Labels[discovery.LabelServiceName]
		if !ok {
			return nil, nil
		}
		return []string{slice.Namespace + "/" + service}, nil
	})
}

// ListEndpointSlicesBySelector returns the EndpointSlices in namespace that
// selector selects, like a namespaced lister List; when selector pins the
// Service name label and sliceIndexer has EndpointSliceServiceIndex, only
// that Service's slices are matched.
func ListEndpointSlicesBySelector(sliceIndexer cache.Indexer, namespace string, selector labels.Selector) ([]*discovery.EndpointSlice, error) {
	var slices []*discovery.EndpointSlice
	keep := func(o interface{}) {
		if s, ok := o.(*discovery.EndpointSlice); ok {
			slices = append(slices, s)
		}
	}
	service, pinned := pinnedValue(selector, discovery.LabelServiceName)
	if _, indexed := sliceIndexer.GetIndexers()[EndpointSliceServiceIndex]; !indexed || !pinned || namespace == metav1.NamespaceAll {
		err := cache.ListAllByNamespace(sliceIndexer, namespace, selector, keep)
		return slices, err
	}
	objs, err := sliceIndexer.ByIndex(EndpointSliceServiceIndex, namespace+"/"+service)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if s, ok := o.(*discovery.EndpointSlice); ok && selector.Matches(labels.Set(s.Labels)) {
			keep(s)
		}
	}
	return slices, nil
}

// ServiceIndexedEndpointSliceLister returns an EndpointSlice lister over
// sliceInformer whose namespaced List goes through EndpointSliceServiceIndex
// (see ListEndpointSlicesBySelector); it adds the index if missing and
// falls back to a namespace scan if that fails.
func ServiceIndexedEndpointSliceLister(sliceInformer cache.SharedIndexInformer) discoverylisters.EndpointSliceLister {
	if err := AddEndpointSliceServiceIndexer(sliceInformer); err != nil {
		utilruntime.HandleError(fmt.Errorf("adding the EndpointSlice Service index: %w", err))
	}
	indexer := sliceInformer.GetIndexer()
	return serviceIndexedSliceLister{EndpointSliceLister: discoverylisters.NewEndpointSliceLister(indexer), indexer: indexer}
}

type serviceIndexedSliceLister struct {
	discoverylisters.EndpointSliceLister
	indexer cache.Indexer
}

func (l serviceIndexedSliceLister) EndpointSlices(namespace string) discoverylisters.EndpointSliceNamespaceLister {
	return serviceIndexedSliceNamespaceLister{EndpointSliceNamespaceLister: l.EndpointSliceLister.EndpointSlices(namespace), indexer: l.indexer, namespace: namespace}
}

type serviceIndexedSliceNamespaceLister struct {
	discoverylisters.EndpointSliceNamespaceLister
	indexer   cache.Indexer
	namespace string
}

func (l serviceIndexedSliceNamespaceLister) List(selector labels.Selector) ([]*discovery.EndpointSlice, error) {
	return ListEndpointSlicesBySelector(l.indexer, l.namespace, selector)
}
