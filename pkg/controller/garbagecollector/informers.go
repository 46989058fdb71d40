package garbagecollector

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
)

// InformerFactory hands out one shared informer per resource. The garbage
// collector only needs object metadata, but reusing a typed informer that
// other controllers already run saves a second watch of the same resource.
type InformerFactory interface {
	ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error)
	Start(stopCh <-chan struct{})
}

type typedOrMetadataFactory struct {
	typed    informers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory
}

// NewInformerFactory returns the typed informer for resources the typed
// factory knows (built-in types) and a metadata-only informer for the rest
// (CRDs, aggregated APIs), as upstream's ObjectOrMetadataInformerFactory.
// typed may be nil to use metadata informers for everything.
func NewInformerFactory(typed informers.SharedInformerFactory, metadata metadatainformer.SharedInformerFactory) InformerFactory {
	return &typedOrMetadataFactory{typed: typed, metadata: metadata}
}

func (f *typedOrMetadataFactory) ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error) {
	if f.typed != nil {
		if inf, err := f.typed.ForResource(resource); err == nil {
			return inf, nil
		}
	}
	return f.metadata.ForResource(resource), nil
}

func (f *typedOrMetadataFactory) Start(stopCh <-chan struct{}) {
	if f.typed != nil {
		f.typed.Start(stopCh)
	}
	f.metadata.Start(stopCh)
}
