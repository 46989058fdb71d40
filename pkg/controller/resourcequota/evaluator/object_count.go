package evaluator

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// ListerForResourceFunc returns a lister for a resource.
type ListerForResourceFunc func(schema.GroupVersionResource) (cache.GenericLister, error)

// InformerForResourceFunc returns a shared informer for a resource.
type InformerForResourceFunc func(schema.GroupVersionResource) (informers.GenericInformer, error)

// ListerFuncForResourceFunc wraps informer lookups into listers that refuse
// to answer until their informer has synced: counting from a half-filled
// cache would write too low a usage.
func ListerFuncForResourceFunc(f InformerForResourceFunc) ListerForResourceFunc {
	return func(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
		inf, err := f(gvr)
		if err != nil {
			return nil, err
		}
		return &syncedLister{
			synced:   latchTrue(inf.Informer().HasSynced),
			notReady: fmt.Errorf("%v not yet synced", gvr),
			lister:   inf.Lister(),
		}, nil
	}
}

// latchTrue remembers the first true answer of hasSynced, which is sticky
// for an informer anyway, so later calls are lock-free.
func latchTrue(hasSynced func() bool) func() bool {
	var done atomic.Bool
	return func() bool {
		if done.Load() {
			return true
		}
		if hasSynced() {
			done.Store(true)
			return true
		}
		return false
	}
}

type syncedLister struct {
	synced   func() bool
	notReady error
	lister   cache.GenericLister
}

func (l *syncedLister) List(selector labels.Selector) ([]runtime.Object, error) {
	if !l.synced() {
		return nil, l.notReady
	}
	return l.lister.List(selector)
}

func (l *syncedLister) Get(name string) (runtime.Object, error) {
	if !l.synced() {
		return nil, l.notReady
	}
	return l.lister.Get(name)
}

func (l *syncedLister) ByNamespace(namespace string) cache.GenericNamespaceLister {
	return &syncedNamespaceLister{synced: l.synced, notReady: l.notReady, lister: l.lister.ByNamespace(namespace)}
}

type syncedNamespaceLister struct {
	synced   func() bool
	notReady error
	lister   cache.GenericNamespaceLister
}

func (l *syncedNamespaceLister) List(selector labels.Selector) ([]runtime.Object, error) {
	if !l.synced() {
		return nil, l.notReady
	}
	return l.lister.List(selector)
}

func (l *syncedNamespaceLister) Get(name string) (runtime.Object, error) {
	if !l.synced() {
		return nil, l.notReady
	}
	return l.lister.Get(name)
}

// ListResourceUsingListerFunc lists all objects of resource in a namespace.
// The lister is looked up per call so a resource discovered later works.
func ListResourceUsingListerFunc(l ListerForResourceFunc, gvr schema.GroupVersionResource) ListFuncByNamespace {
	return func(namespace string) ([]runtime.Object, error) {
		lister, err := l(gvr)
		if err != nil {
			return nil, err
		}
		return lister.ByNamespace(namespace).List(labels.Everything())
	}
}

// ObjectCountQuotaResourceNameFor is the quota name counting objects of a
// resource: count/<resource> for the core group, else count/<resource>.<group>.
func ObjectCountQuotaResourceNameFor(gr schema.GroupResource) corev1.ResourceName {
	if gr.Group == "" {
		return corev1.ResourceName("count/" + gr.Resource)
	}
	return corev1.ResourceName("count/" + gr.Resource + "." + gr.Group)
}

// objectCount charges 1 per object under each of its names.
type objectCount struct {
	groupResource schema.GroupResource
	list          ListFuncByNamespace
	names         []corev1.ResourceName
}

// NewObjectCountEvaluator counts objects of gr under count/<resource>.<group>
// and, when alias is set, also under alias (the legacy names "configmaps",
// "secrets", ...).
func NewObjectCountEvaluator(gr schema.GroupResource, list ListFuncByNamespace, alias corev1.ResourceName) Evaluator {
	names := []corev1.ResourceName{ObjectCountQuotaResourceNameFor(gr)}
	if alias != "" {
		names = append(names, alias)
	}
	return &objectCount{groupResource: gr, list: list, names: names}
}

func (o *objectCount) GroupResource() schema.GroupResource { return o.groupResource }

func (o *objectCount) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return Intersection(input, o.names)
}

func (o *objectCount) Usage(runtime.Object) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for _, n := range o.names {
		out[n] = *resource.NewQuantity(1, resource.DecimalSI)
	}
	return out, nil
}

func (o *objectCount) UsageStats(options UsageStatsOptions) (UsageStats, error) {
	return CalculateUsageStats(options, o.list, MatchesNoScope, o.Usage)
}
