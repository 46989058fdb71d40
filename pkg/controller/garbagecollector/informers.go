package garbagecollector

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata/metadatainformer"
)

// InformerFactory hands out one shared informer per resource.
type InformerFactory interface {
	ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error)
	Start(stopCh <-chan struct{})
}

type typedOrMetadataFactory struct {
	typed    informers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory
}

// NewInformerFactory returns, for each resource, the typed informer of typed
// when some controller already runs it (reusing its watch and cache), and a
// metadata-only informer otherwise. Upstream makes a typed informer for
// every built-in resource, caching the body of every ConfigMap and Secret
// of the cluster only to read owner references; this collector does not.
// Ask after typed has been started, or every resource gets metadata only.
// typed may be nil.
func NewInformerFactory(typed informers.SharedInformerFactory, metadata metadatainformer.SharedInformerFactory) InformerFactory {
	return &typedOrMetadataFactory{typed: typed, metadata: metadata}
}

func (f *typedOrMetadataFactory) ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error) {
	if f.typed != nil && f.typedRunning(resource) {
		if inf, err := f.typed.ForResource(resource); err == nil {
			return inf, nil
		}
	}
	return f.metadata.ForResource(resource), nil
}

// typedRunning reports whether the typed factory has started an informer
// for resource. A done context makes WaitForCacheSync return at once with
// the set of started informers.
func (f *typedOrMetadataFactory) typedRunning(resource schema.GroupVersionResource) bool {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for t := range f.typed.WaitForCacheSyncWithContext(done).Synced {
		if t.Kind() != reflect.Pointer {
			continue
		}
		obj, ok := reflect.New(t.Elem()).Interface().(runtime.Object)
		if !ok {
			continue
		}
		kinds, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			continue
		}
		for _, gvk := range kinds {
			if plural, _ := meta.UnsafeGuessKindToResource(gvk); plural == resource {
				return true
			}
		}
	}
	return false
}

func (f *typedOrMetadataFactory) Start(stopCh <-chan struct{}) {
	if f.typed != nil {
		f.typed.Start(stopCh)
	}
	f.metadata.Start(stopCh)
}
