package app

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	cmapp "github.com/kcmclone/controller-manager/app"
	"github.com/kcmclone/controller-manager/clientbuilder"
	cmoptions "github.com/kcmclone/controller-manager/options"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
	kcmcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ControllerContext is what every controller's InitFunc gets.
type ControllerContext struct {
	// ClientBuilder gives each controller a client named after it.
	ClientBuilder clientbuilder.ControllerClientBuilder
	// InformerFactory is shared by all controllers; informers made from it
	// start once every controller is built.
	InformerFactory informers.SharedInformerFactory
	// MetadataInformerFactory caches only object metadata, for controllers
	// that watch arbitrary resources.
	MetadataInformerFactory metadatainformer.SharedInformerFactory
	ComponentConfig         kcmconfig.KubeControllerManagerConfiguration
	// RESTMapper discovers lazily and is reset every 30s to see new APIs.
	RESTMapper *restmapper.DeferredDiscoveryRESTMapper
	// InformersStarted is closed once informers started; a controller that
	// creates informers later may start them itself after this.
	InformersStarted chan struct{}
	// ResyncPeriod returns a jittered period per call.
	ResyncPeriod func() time.Duration
	// Statuses collects what running controllers report for
	// /debug/controllers; nil reports nowhere.
	Statuses *kcmcontroller.StatusRegistry

	// rootClientBuilder has the manager's own credentials, for the
	// ServiceAccount token controller.
	rootClientBuilder clientbuilder.ControllerClientBuilder

	filtered *filteredInformers
	// wrapFiltered, when set, wraps the factories FilteredInformerFactory
	// returns (sharded replicas track the handlers added through them).
	wrapFiltered func(f informers.SharedInformerFactory, namespace, fieldSelector string) informers.SharedInformerFactory
	// informerName labels the shared factory's informer metrics; released
	// on shutdown so a later context can take it.
	informerName *cache.InformerName
}

// FilteredInformerFactory returns a shared informer factory that sees only
// objects matching fieldSelector (in namespace, unless empty). Its
// informers start, sync and stop with the shared factories.
func (c ControllerContext) FilteredInformerFactory(namespace, fieldSelector string) informers.SharedInformerFactory {
	f := c.filtered.factory(namespace, fieldSelector)
	if c.wrapFiltered != nil {
		return c.wrapFiltered(f, namespace, fieldSelector)
	}
	return f
}

// StartInformers starts every informer requested so far.
func (c ControllerContext) StartInformers(stop <-chan struct{}) {
	c.InformerFactory.Start(stop)
	c.MetadataInformerFactory.Start(stop)
	c.filtered.start(stop)
}

// WaitForInformersSync waits for every started informer's cache.
func (c ControllerContext) WaitForInformersSync(stop <-chan struct{}) {
	c.InformerFactory.WaitForCacheSync(stop)
	c.MetadataInformerFactory.WaitForCacheSync(stop)
	c.filtered.waitForCacheSync(stop)
}

// ShutdownInformers waits for every informer goroutine to end.
func (c ControllerContext) ShutdownInformers() {
	c.InformerFactory.Shutdown()
	c.MetadataInformerFactory.Shutdown()
	c.filtered.shutdown()
	c.informerName.Release()
}

// IsControllerEnabled applies --controllers to a descriptor.
func (c ControllerContext) IsControllerEnabled(d *ControllerDescriptor) bool {
	disabled := sets.New[string]()
	if d.IsDisabledByDefault() {
		disabled.Insert(d.Name())
	}
	return cmoptions.IsControllerEnabled(d.Name(), disabled, c.ComponentConfig.Generic.Controllers)
}

// NewClient is ClientBuilder.Client with a clearer error.
func (c ControllerContext) NewClient(name string) (clientset.Interface, error) {
	cl, err := c.ClientBuilder.Client(name)
	if err != nil {
		return nil, fmt.Errorf("failed to create Kubernetes client for %q: %w", name, err)
	}
	return cl, nil
}

// InformerTransform is the transform of every shared informer: what
// controllers' caches hold. Exported for the field-loss test
// (test/integration/fieldloss), which runs controllers over caches trimmed
// exactly like this and checks no stored byte is lost.
var InformerTransform = trimForCache

// trimForCache drops managedFields and the pod fields no controller reads,
// and shares the strings cached objects repeat.
func trimForCache(obj interface{}) (interface{}, error) {
	if pod, ok := obj.(*v1.Pod); ok {
		kcmcontroller.TrimPodForCache(pod)
	}
	return stripAndIntern(obj)
}

// informerTransform is InformerTransform, unless the SELinux warning
// controller runs: it reads the pod fields trimmed, so pods stay whole.
func informerTransform(c *config.CompletedConfig) cache.TransformFunc {
	d := NewControllerDescriptors()[names.SELinuxWarningController]
	if d == nil {
		return InformerTransform
	}
	enabled := ControllerContext{ComponentConfig: c.ComponentConfig}.IsControllerEnabled(d)
	if gatesOn, _ := d.featureGatesEnabled(defaultFeatureGate()); enabled && gatesOn {
		return stripAndIntern
	}
	return InformerTransform
}

// stripManagedFields drops managedFields from cached objects: controllers
// never read them and they are often the bulk of an object.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// stripAndIntern drops managedFields and shares repeated strings
// (kcmcontroller.InternForCache); it keeps every other field.
func stripAndIntern(obj interface{}) (interface{}, error) {
	obj, err := stripManagedFields(obj)
	kcmcontroller.InternForCache(obj)
	return obj, err
}

// CreateControllerContext builds informer factories and discovery, after
// waiting for the apiserver to be healthy.
func CreateControllerContext(ctx context.Context, c *config.CompletedConfig, rootClientBuilder, clientBuilder clientbuilder.ControllerClientBuilder) (_ ControllerContext, err error) {
	versionedClient, err := rootClientBuilder.Client("shared-informers")
	if err != nil {
		return ControllerContext{}, fmt.Errorf("failed to create Kubernetes client for %q: %w", "shared-informers", err)
	}
	resync := resyncPeriod(c)
	informerName := reserveInformerName(klog.FromContext(ctx))
	defer func() {
		if err != nil {
			informerName.Release()
		}
	}()
	transform := informerTransform(c)
	factoryOpts := []informers.SharedInformerOption{informers.WithTransform(transform)}
	if informerName != nil {
		factoryOpts = append(factoryOpts, informers.WithInformerName(informerName))
	}
	sharedInformers := informers.NewSharedInformerFactoryWithOptions(versionedClient, resync(), factoryOpts...)
	// Events in namespaces being deleted are refused; don't send them.
	kcmcontroller.SetEventNamespaceLister(sharedInformers.Core().V1().Namespaces().Lister())

	metadataConfig, err := rootClientBuilder.Config("metadata-informers")
	if err != nil {
		return ControllerContext{}, fmt.Errorf("failed to create metadata client config: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(metadataConfig)
	if err != nil {
		return ControllerContext{}, fmt.Errorf("failed to create metadata client: %w", err)
	}
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, resync(), metadatainformer.WithTransform(transform))

	if err := cmapp.WaitForAPIServer(ctx, versionedClient, apiserverWaitTimeout); err != nil {
		return ControllerContext{}, fmt.Errorf("failed to wait for apiserver being healthy: %w", err)
	}

	discoveryClient, err := rootClientBuilder.DiscoveryClient("controller-discovery")
	if err != nil {
		return ControllerContext{}, fmt.Errorf("failed to create discovery client: %w", err)
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
	go wait.Until(restMapper.Reset, 30*time.Second, ctx.Done())

	return ControllerContext{
		ClientBuilder:           clientBuilder,
		InformerFactory:         sharedInformers,
		MetadataInformerFactory: metadataInformers,
		ComponentConfig:         c.ComponentConfig,
		RESTMapper:              restMapper,
		InformersStarted:        make(chan struct{}),
		ResyncPeriod:            resync,
		rootClientBuilder:       rootClientBuilder,
		filtered:                newFilteredInformers(versionedClient, resync(), transform),
		informerName:            informerName,
	}, nil
}

// controllerLoop adapts a controller's Run(ctx, workers) to Controller.
type controllerLoop struct {
	name string
	run  func(ctx context.Context)
}

func (c *controllerLoop) Name() string            { return c.name }
func (c *controllerLoop) Run(ctx context.Context) { c.run(ctx) }

func newControllerLoop(name string, run func(ctx context.Context)) Controller {
	return &controllerLoop{name: name, run: run}
}
