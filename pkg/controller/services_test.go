package controller

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	endpointsliceutil "k8s.io/endpointslice/util"
)

func newIndexedServices(t *testing.T, services ...*v1.Service) cache.Indexer {
	t.Helper()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Service{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	indexer := SelectorIndexedServices(inf)
	for _, s := range services {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return indexer
}

func selectingService(namespace, name string, selector map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: v1.ServiceSpec{Selector: selector}}
}

// The Services a pod change affects, found through the selector index, are
// exactly those the endpointslice library finds by matching every Service
// of the namespace, for new, deleted, changed and relabelled pods; and the
// index lookup never scans the namespace.
func TestServicesToUpdateMatchesLibrary(t *testing.T) {
	indexer := newIndexedServices(t,
		selectingService("a", "web", map[string]string{"app": "web"}),
		selectingService("a", "web-canary", map[string]string{"app": "web", "track": "canary"}),
		selectingService("a", "frontend", map[string]string{"tier": "front", "app": "web"}),
		selectingService("a", "api", map[string]string{"app": "api"}),
		selectingService("a", "everything", map[string]string{}),
		selectingService("a", "selectorless", nil),
		selectingService("b", "web", map[string]string{"app": "web"}),
	)
	oracle := corelisters.NewServiceLister(indexer)
	web := labels.Set{"app": "web"}
	canary := labels.Set{"app": "web", "track": "canary", "tier": "front"}
	api := labels.Set{"app": "api"}
	for _, key := range []*endpointsliceutil.PodProjectionKey{
		{Namespace: "a", Labels: web},
		{Namespace: "a", Labels: canary},
		{Namespace: "a", Labels: labels.Set{}},
		{Namespace: "a", Labels: labels.Set{"unrelated": "x"}},
		{Namespace: "b", Labels: web},
		{Namespace: "c", Labels: web},
		{Namespace: "a", Labels: api, OldLabels: web},
		{Namespace: "a", Labels: api, OldLabels: web, PodChanged: true},
		{Namespace: "a", Labels: canary, OldLabels: web},
		{Namespace: "a", Labels: canary, OldLabels: web, PodChanged: true},
	} {
		want, err := endpointsliceutil.GetServicesToUpdate(oracle, key)
		if err != nil {
			t.Fatal(err)
		}
		spy := &indexSpy{Indexer: indexer}
		got, err := ServicesToUpdate(spy, key)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Errorf("%+v: got %v, want %v", key, sets.List(got), sets.List(want))
		}
		if slices.Contains(spy.used, cache.NamespaceIndex) || !slices.Contains(spy.used, ServiceSelectorIndex) {
			t.Errorf("%+v: looked up through %v, want only %s", key, spy.used, ServiceSelectorIndex)
		}
	}
	if got, err := ServicesToUpdate(indexer, nil); err != nil || got != nil {
		t.Errorf("nil key: got %v, %v", got, err)
	}
}

// A relabelled Service moves between buckets; without the index every
// Service of the namespace is matched, with the same result.
func TestServicesSelectingPodsFollowsUpdatesAndFallsBack(t *testing.T) {
	svc := selectingService("a", "web", map[string]string{"app": "web"})
	indexer := newIndexedServices(t, svc)
	moved := svc.DeepCopy()
	moved.Spec.Selector = map[string]string{"app": "api"}
	if err := indexer.Update(moved); err != nil {
		t.Fatal(err)
	}
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := plain.Add(moved); err != nil {
		t.Fatal(err)
	}
	for name, idx := range map[string]cache.Indexer{"indexed": indexer, "plain": plain} {
		for podLabels, want := range map[string][]string{"app=web": nil, "app=api": {"a/web"}} {
			set, err := labels.ConvertSelectorToLabelsMap(podLabels)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ServicesSelectingPods(idx, "a", set)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sets.List(got), want) {
				t.Errorf("%s, pod %s: got %v, want %v", name, podLabels, sets.List(got), want)
			}
		}
	}
}

func endpointSlice(namespace, name, service, managedBy string) *discovery.EndpointSlice {
	l := map[string]string{discovery.LabelManagedBy: managedBy}
	if service != "" {
		l[discovery.LabelServiceName] = service
	}
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l}}
}

// A selector naming a Service reads that Service's bucket and finds what a
// namespace scan finds (other managers' slices filtered out); any other
// selector scans the namespace.
func TestListEndpointSlicesBySelectorUsesServiceIndex(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &discovery.EndpointSlice{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	lister := ServiceIndexedEndpointSliceLister(inf)
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*discovery.EndpointSlice{
		endpointSlice("a", "web-1", "web", "ours"),
		endpointSlice("a", "web-2", "web", "ours"),
		endpointSlice("a", "web-mirrored", "web", "mirror"),
		endpointSlice("a", "api-1", "api", "ours"),
		endpointSlice("a", "unnamed", "", "ours"),
		endpointSlice("b", "web-1", "web", "ours"),
	} {
		if err := inf.GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
		if err := plain.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		selector string
		want     []string
		indexed  bool
	}{
		{discovery.LabelServiceName + "=web," + discovery.LabelManagedBy + "=ours", []string{"web-1", "web-2"}, true},
		{discovery.LabelServiceName + "=web", []string{"web-1", "web-2", "web-mirrored"}, true},
		{discovery.LabelServiceName + "=gone", nil, true},
		{discovery.LabelManagedBy + "=ours", []string{"api-1", "unnamed", "web-1", "web-2"}, false},
	} {
		sel, err := labels.Parse(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		spy := &indexSpy{Indexer: inf.GetIndexer()}
		for name, idx := range map[string]cache.Indexer{"indexed": spy, "plain": plain} {
			list, err := ListEndpointSlicesBySelector(idx, "a", sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range list {
				got = append(got, s.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s %q: got %v, want %v", name, tc.selector, got, tc.want)
			}
		}
		if used := slices.Contains(spy.used, EndpointSliceServiceIndex); used != tc.indexed {
			t.Errorf("%q: looked up through %v, want the Service index: %v", tc.selector, spy.used, tc.indexed)
		}
		viaLister, err := lister.EndpointSlices("a").List(sel)
		if err != nil {
			t.Fatal(err)
		}
		if len(viaLister) != len(tc.want) {
			t.Errorf("lister %q: %d slices, want %d", tc.selector, len(viaLister), len(tc.want))
		}
	}
}

// Controllers sharing an informer each ask for the indexes they use; the
// second request is a no-op, not an indexer conflict.
func TestIndexersAddedTwiceAreNoOps(t *testing.T) {
	services := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Service{}, 0, cache.Indexers{})
	slices := cache.NewSharedIndexInformer(&cache.ListWatch{}, &discovery.EndpointSlice{}, 0, cache.Indexers{})
	for i := 0; i < 2; i++ {
		if err := AddServiceSelectorIndexer(services); err != nil {
			t.Fatalf("Service selector index, request %d: %v", i+1, err)
		}
		if err := AddEndpointSliceServiceIndexer(slices); err != nil {
			t.Fatalf("EndpointSlice Service index, request %d: %v", i+1, err)
		}
	}
}
