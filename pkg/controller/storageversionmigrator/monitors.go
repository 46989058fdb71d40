package storageversionmigrator

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// ResourceVersioner reports the resourceVersion an informer has caught up
// to (cache.Controller and every shared informer have it).
type ResourceVersioner interface {
	LastSyncResourceVersion() string
}

// Monitor is one resource's cache as the garbage collector keeps it: the
// objects, and how far its watch has got.
type Monitor struct {
	Store      cache.Store
	Controller ResourceVersioner
}

// GraphBuilder is what the migrator needs from the garbage collector's
// dependency graph builder: upstream lists the objects to migrate from the
// collector's monitor of the resource rather than from the apiserver.
// GetMonitor returns an error when no monitor exists for the resource, and
// false when its cache did not sync before ctx ended.
type GraphBuilder interface {
	GetMonitor(ctx context.Context, resource schema.GroupVersionResource) (*Monitor, bool, error)
}

// gcMonitoredVerbs are the verbs a resource needs for the garbage
// collector to monitor it.
var gcMonitoredVerbs = []string{"delete", "list", "watch"}

// MetadataMonitors is a GraphBuilder made of metadata-only informers, for
// when the collector's own monitors cannot be reached. It offers a monitor
// for exactly the resources the collector monitors (served with delete,
// list and watch, and not ignored), so a migration of any other resource
// is retried as upstream's is. Given the metadata informer factory the
// collector uses, both share one watch and one cache per resource.
type MetadataMonitors struct {
	discovery        discovery.ServerResourcesInterfaceWithContext
	factory          metadatainformer.SharedInformerFactory
	ignored          map[schema.GroupResource]struct{}
	informersStarted <-chan struct{}
	stopCh           <-chan struct{}

	mu      sync.Mutex
	started map[schema.GroupVersionResource]cache.SharedIndexInformer
}

var _ GraphBuilder = &MetadataMonitors{}

// NewMetadataMonitors returns monitors backed by factory's informers. They
// are started (with ctx's lifetime) on first use, but never before
// informersStarted is closed, so the factory is not started before every
// controller asked for its informers. ignoredResources is the collector's
// --gc-ignored-resources set (config GCIgnoredResources).
func NewMetadataMonitors(
	ctx context.Context,
	discoveryClient discovery.ServerResourcesInterface,
	factory metadatainformer.SharedInformerFactory,
	ignoredResources map[schema.GroupResource]struct{},
	informersStarted <-chan struct{},
) *MetadataMonitors {
	return &MetadataMonitors{
		discovery:        discovery.ToServerResourcesInterfaceWithContext(discoveryClient),
		factory:          factory,
		ignored:          ignoredResources,
		informersStarted: informersStarted,
		stopCh:           ctx.Done(),
		started:          map[schema.GroupVersionResource]cache.SharedIndexInformer{},
	}
}

// GetMonitor returns resource's monitor once its cache has synced, or
// false if ctx ended first.
func (m *MetadataMonitors) GetMonitor(ctx context.Context, resource schema.GroupVersionResource) (*Monitor, bool, error) {
	monitored, err := m.gcMonitors(ctx, resource)
	if err != nil {
		return nil, false, err
	}
	if !monitored {
		return nil, false, fmt.Errorf("no monitor found for resource %s", resource.String())
	}
	informer, ok := m.informerFor(ctx, resource)
	if !ok {
		return nil, false, nil
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, informer.HasSynced) {
		return nil, false, nil
	}
	return &Monitor{Store: informer.GetStore(), Controller: informer}, true, nil
}

// gcMonitors reports whether the garbage collector would monitor resource.
func (m *MetadataMonitors) gcMonitors(ctx context.Context, resource schema.GroupVersionResource) (bool, error) {
	if _, ignored := m.ignored[resource.GroupResource()]; ignored {
		return false, nil
	}
	list, err := m.discovery.ServerResourcesForGroupVersionWithContext(ctx, resource.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == resource.Resource {
			return hasAllVerbs(r, gcMonitoredVerbs), nil
		}
	}
	return false, nil
}

// informerFor returns resource's informer, started. It gives up (false) if
// ctx ends before the app has started its informers.
func (m *MetadataMonitors) informerFor(ctx context.Context, resource schema.GroupVersionResource) (cache.SharedIndexInformer, bool) {
	m.mu.Lock()
	informer, ok := m.started[resource]
	m.mu.Unlock()
	if ok {
		return informer, true
	}
	informer = m.factory.ForResource(resource).Informer()
	select {
	case <-m.informersStarted:
	case <-ctx.Done():
		return nil, false
	}
	// Start only launches informers not running yet.
	m.factory.Start(m.stopCh)
	m.mu.Lock()
	m.started[resource] = informer
	m.mu.Unlock()
	return informer, true
}

func hasAllVerbs(r metav1.APIResource, verbs []string) bool {
	for _, v := range verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}

// resourceFor resolves a migration's group and resource to the version the
// RESTMapper prefers; false if the mapper does not know it.
func resourceFor(mapper meta.RESTMapper, gr metav1.GroupResource) (*schema.GroupVersionResource, bool, error) {
	gvrs, err := mapper.ResourcesFor(schema.GroupVersionResource{Group: gr.Group, Resource: gr.Resource})
	if meta.IsNoMatchError(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	for _, gvr := range gvrs {
		if gvr.Group == gr.Group && gvr.Resource == gr.Resource {
			return &gvr, true, nil
		}
	}
	return nil, false, nil
}
