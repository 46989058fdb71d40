package app

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// filteredInformers hands out informer factories whose lists and watches
// carry a field selector. Upstream caches every ConfigMap and Secret of the
// cluster for controllers that read only a handful of them (kube-root-ca.crt,
// service account tokens); a selector keeps those bodies out of memory, and
// the garbage collector then watches the kinds through metadata only.
type filteredInformers struct {
	client    clientset.Interface
	resync    time.Duration
	transform cache.TransformFunc

	mu        sync.Mutex
	factories map[filterKey]informers.SharedInformerFactory
}

type filterKey struct{ namespace, fieldSelector string }

func newFilteredInformers(client clientset.Interface, resync time.Duration, transform cache.TransformFunc) *filteredInformers {
	return &filteredInformers{client: client, resync: resync, transform: transform, factories: map[filterKey]informers.SharedInformerFactory{}}
}

// factory returns the one factory for namespace ("" for all) and
// fieldSelector, creating it on first use.
func (f *filteredInformers) factory(namespace, fieldSelector string) informers.SharedInformerFactory {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := filterKey{namespace, fieldSelector}
	if fac, ok := f.factories[key]; ok {
		return fac
	}
	opts := []informers.SharedInformerOption{
		informers.WithTransform(f.transform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = fieldSelector }),
	}
	if namespace != "" {
		opts = append(opts, informers.WithNamespace(namespace))
	}
	fac := informers.NewSharedInformerFactoryWithOptions(f.client, f.resync, opts...)
	f.factories[key] = fac
	return fac
}

func (f *filteredInformers) all() []informers.SharedInformerFactory {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]informers.SharedInformerFactory, 0, len(f.factories))
	for _, fac := range f.factories {
		out = append(out, fac)
	}
	return out
}

func (f *filteredInformers) start(stop <-chan struct{}) {
	for _, fac := range f.all() {
		fac.Start(stop)
	}
}

func (f *filteredInformers) waitForCacheSync(stop <-chan struct{}) {
	for _, fac := range f.all() {
		fac.WaitForCacheSync(stop)
	}
}

func (f *filteredInformers) shutdown() {
	for _, fac := range f.all() {
		fac.Shutdown()
	}
}
