package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
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
	"github.com/kcmclone/controller-manager/controller"
	cmhealthz "github.com/kcmclone/controller-manager/healthz"
	cmoptions "github.com/kcmclone/controller-manager/options"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
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
var InformerTransform = stripManagedFields

// stripManagedFields drops managedFields from cached objects: controllers
// never read them and they are often the bulk of an object.
func stripManagedFields(obj interface{}) (interface{}, error) {
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
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
	factoryOpts := []informers.SharedInformerOption{informers.WithTransform(InformerTransform)}
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
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, resync(), metadatainformer.WithTransform(InformerTransform))

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
		filtered:                newFilteredInformers(versionedClient, resync()),
		informerName:            informerName,
	}, nil
}

// HealthCheckAdder takes the per-controller health checks.
type HealthCheckAdder interface {
	AddHealthChecker(checks ...healthz.HealthChecker)
}

// BuildControllers builds every enabled, implemented controller, registers
// a /healthz/<name> check for each and mounts debug handlers.
func BuildControllers(ctx context.Context, cc ControllerContext, descriptors map[string]*ControllerDescriptor,
	unsecuredMux *mux.PathRecorderMux, health HealthCheckAdder) ([]Controller, error) {
	var (
		controllers []Controller
		checks      []healthz.HealthChecker
	)
	for _, d := range enabledControllers(ctx, cc, descriptors) {
		ctrl, check, err := buildController(ctx, cc, d, unsecuredMux)
		if err != nil {
			return nil, err
		}
		if ctrl == nil {
			continue
		}
		controllers = append(controllers, ctrl)
		checks = append(checks, check)
	}
	if len(checks) > 0 {
		health.AddHealthChecker(checks...)
	}
	return controllers, nil
}

// buildController builds one controller and mounts its debug handler when
// unsecuredMux is given. It returns a nil controller when the controller
// chose not to run, and the controller's health check.
func buildController(ctx context.Context, cc ControllerContext, d *ControllerDescriptor, unsecuredMux *mux.PathRecorderMux) (Controller, healthz.HealthChecker, error) {
	logger := klog.FromContext(ctx)
	name := d.Name()
	ctrl, err := d.init(klog.NewContext(ctx, klog.LoggerWithName(logger, name)), cc, name)
	if err != nil {
		logger.Error(err, "Error initializing a controller", "controller", name)
		return nil, nil, fmt.Errorf("error initializing %s: %w", name, err)
	}
	if ctrl == nil {
		logger.Info("Warning: skipping controller", "controller", name)
		return nil, nil, nil
	}
	check := cmhealthz.NamedPingChecker(name)
	if dbg, ok := ctrl.(controller.Debuggable); ok && unsecuredMux != nil {
		if h := dbg.DebuggingHandler(); h != nil {
			base := "/debug/controllers/" + name
			unsecuredMux.UnlistedHandle(base, http.StripPrefix(base, h))
			unsecuredMux.UnlistedHandlePrefix(base+"/", http.StripPrefix(base, h))
		}
	}
	if hc, ok := ctrl.(controller.HealthCheckable); ok {
		if real := hc.HealthChecker(); real != nil {
			check = cmhealthz.NamedHealthChecker(name, real)
		}
	}
	return ctrl, check, nil
}

// enabledControllers lists the descriptors to build, in build order: the
// ServiceAccount token controller first, since others may need the tokens
// it mints, then the rest by name.
func enabledControllers(ctx context.Context, cc ControllerContext, descriptors map[string]*ControllerDescriptor) []*ControllerDescriptor {
	logger := klog.FromContext(ctx)
	enabled := func(d *ControllerDescriptor) bool {
		if !cc.IsControllerEnabled(d) {
			logger.Info("Warning: controller is disabled", "controller", d.Name())
			return false
		}
		if ok, gate := d.featureGatesEnabled(defaultFeatureGate()); !ok {
			logger.Info("Controller is disabled by a feature gate", "controller", d.Name(), "featureGate", gate)
			return false
		}
		if !d.Implemented() {
			logger.Info("Warning: controller is not implemented yet, skipping", "controller", d.Name())
			return false
		}
		return true
	}
	// Other controllers may need the tokens this one mints, so it goes first,
	// and, as upstream, --controllers does not turn it off: only a missing
	// --service-account-private-key-file does.
	var out []*ControllerDescriptor
	for _, d := range descriptors {
		if d.requiresSpecialHandling && d.Implemented() {
			out = append(out, d)
		}
	}
	for _, name := range sets.List(sets.KeySet(descriptors)) {
		d := descriptors[name]
		if d.requiresSpecialHandling || !enabled(d) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// RunControllers runs every controller, each after a jittered start delay,
// until ctx ends; then it waits up to shutdownTimeout (0: forever) for them
// to return and reports whether they all did.
func RunControllers(ctx context.Context, cc ControllerContext, controllers []Controller, jitter float64, shutdownTimeout time.Duration) bool {
	logger := klog.FromContext(ctx)
	var (
		mu      sync.Mutex
		running = sets.New[string]()
		wg      sync.WaitGroup
	)
	for _, ctrl := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(wait.Jitter(cc.ComponentConfig.Generic.ControllerStartInterval.Duration, jitter)):
			case <-ctx.Done():
				return
			}
			logger.V(1).Info("Controller starting...", "controller", ctrl.Name())
			mu.Lock()
			running.Insert(ctrl.Name())
			mu.Unlock()
			defer func() {
				mu.Lock()
				running.Delete(ctrl.Name())
				mu.Unlock()
				logger.V(1).Info("Controller terminated", "controller", ctrl.Name())
			}()
			ctrl.Run(ctx)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	var timeout <-chan time.Time
	if shutdownTimeout > 0 {
		timeout = time.After(shutdownTimeout)
	}
	select {
	case <-done:
		logger.Info("All controllers terminated")
		return true
	case <-timeout:
		mu.Lock()
		left := sets.List(running)
		mu.Unlock()
		logger.Info("Controller shutdown timeout reached", "timeout", shutdownTimeout, "runningControllers", left)
		return false
	}
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
