package evaluator

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// rl builds a ResourceList from name/quantity pairs.
func rl(pairs ...string) corev1.ResourceList {
	if len(pairs)%2 != 0 {
		panic("rl needs pairs")
	}
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

// show renders a ResourceList deterministically for error messages.
func show(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func expectList(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !Equals(got, want) {
		t.Errorf("%s = %s, want %s", what, show(got), show(want))
	}
}

func names(ns ...string) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(ns))
	for _, n := range ns {
		out = append(out, corev1.ResourceName(n))
	}
	return out
}

// listerFor serves objects from an in-memory indexer, as a synced
// informer would, for whatever resources objects are given for.
type fakeListers map[schema.GroupVersionResource]cache.Indexer

func (f fakeListers) add(t *testing.T, gvr schema.GroupVersionResource, objs ...runtime.Object) {
	t.Helper()
	idx, ok := f[gvr]
	if !ok {
		idx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		f[gvr] = idx
	}
	for _, o := range objs {
		if _, err := meta.Accessor(o); err != nil {
			t.Fatal(err)
		}
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

func (f fakeListers) lister(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	idx, ok := f[gvr]
	if !ok {
		idx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		f[gvr] = idx
	}
	return cache.NewGenericLister(idx, gvr.GroupResource()), nil
}
