package app

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// handlerRegistry remembers the event handlers one build of a controller
// added to the shared informers, so that they can be removed when that
// build stops for good: a controller built again after a hand-over adds its
// own, and the stale ones would otherwise keep running on every event.
type handlerRegistry struct {
	mu   sync.Mutex
	regs []registration
}

type registration struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
}

func (r *handlerRegistry) add(inf cache.SharedIndexInformer, h cache.ResourceEventHandlerRegistration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.regs = append(r.regs, registration{inf, h})
}

// removeAll removes every handler added through the registry.
func (r *handlerRegistry) removeAll() {
	r.mu.Lock()
	regs := r.regs
	r.regs = nil
	r.mu.Unlock()
	for _, reg := range regs {
		// Removing a handler removed already is a no-op.
		_ = reg.informer.RemoveEventHandler(reg.handle)
	}
}

func (r *handlerRegistry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.regs)
}

// trackingInformer is a shared informer whose handler registrations are
// recorded. Adding an indexer that exists already is a no-op, since a
// rebuilt controller adds its indexers again.
type trackingInformer struct {
	cache.SharedIndexInformer
	reg *handlerRegistry
}

func (t *trackingInformer) track(h cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		t.reg.add(t.SharedIndexInformer, h)
	}
	return h, err
}

func (t *trackingInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandler(h))
}

func (t *trackingInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (t *trackingInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return t.track(t.SharedIndexInformer.AddEventHandlerWithOptions(h, opts))
}

func (t *trackingInformer) AddIndexers(indexers cache.Indexers) error {
	existing := t.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return t.SharedIndexInformer.AddIndexers(missing)
}

type trackingGeneric struct {
	informers.GenericInformer
	reg *handlerRegistry
}

func (g trackingGeneric) Informer() cache.SharedIndexInformer {
	return &trackingInformer{g.GenericInformer.Informer(), g.reg}
}

// trackingFactory hands out the shared factory's informers, tracked. The
// typed group accessors are built on it so that every informer passes
// through its InformerFor.
type trackingFactory struct {
	informers.SharedInformerFactory
	namespace string
	tweak     internalinterfaces.TweakListOptionsFunc
	reg       *handlerRegistry
}

func (f *trackingFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	return &trackingInformer{f.SharedInformerFactory.InformerFor(obj, newFunc), f.reg}
}

func (f *trackingFactory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	g, err := f.SharedInformerFactory.ForResource(gvr)
	if err != nil {
		return nil, err
	}
	return trackingGeneric{g, f.reg}, nil
}

func (f *trackingFactory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Apps() apps.Interface { return apps.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Autoscaling() autoscaling.Interface {
	return autoscaling.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Batch() batch.Interface { return batch.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Certificates() certificates.Interface {
	return certificates.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Coordination() coordination.Interface {
	return coordination.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Core() core.Interface { return core.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Discovery() discovery.Interface {
	return discovery.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Events() events.Interface { return events.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Extensions() extensions.Interface {
	return extensions.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Flowcontrol() flowcontrol.Interface {
	return flowcontrol.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Lifecycle() lifecycle.Interface {
	return lifecycle.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Networking() networking.Interface {
	return networking.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Node() node.Interface     { return node.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Policy() policy.Interface { return policy.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Rbac() rbac.Interface     { return rbac.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Resource() resource.Interface {
	return resource.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Scheduling() scheduling.Interface {
	return scheduling.New(f, f.namespace, f.tweak)
}
func (f *trackingFactory) Storage() storage.Interface { return storage.New(f, f.namespace, f.tweak) }
func (f *trackingFactory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, f.namespace, f.tweak)
}

type trackingMetadataFactory struct {
	metadatainformer.SharedInformerFactory
	reg *handlerRegistry
}

func (f trackingMetadataFactory) ForResource(gvr schema.GroupVersionResource) informers.GenericInformer {
	return trackingGeneric{f.SharedInformerFactory.ForResource(gvr), f.reg}
}

// tracked returns a copy of cc whose informer factories record the event
// handlers added through them in reg.
func (c ControllerContext) tracked(reg *handlerRegistry) ControllerContext {
	out := c
	out.InformerFactory = &trackingFactory{SharedInformerFactory: c.InformerFactory, reg: reg}
	out.MetadataInformerFactory = trackingMetadataFactory{c.MetadataInformerFactory, reg}
	out.wrapFiltered = func(f informers.SharedInformerFactory, namespace, fieldSelector string) informers.SharedInformerFactory {
		return &trackingFactory{SharedInformerFactory: f, namespace: namespace, reg: reg,
			tweak: func(o *metav1.ListOptions) { o.FieldSelector = fieldSelector }}
	}
	return out
}
