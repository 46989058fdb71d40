// Package app builds and runs the kube-controller-manager command.
package app

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest client, workqueue and leader election metrics
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/component-base/term"
	baseversion "k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	cmapp "github.com/kcmclone/controller-manager/app"
	"github.com/kcmclone/controller-manager/clientbuilder"
	"github.com/kcmclone/controller-manager/controller"
	cmhealthz "github.com/kcmclone/controller-manager/healthz"
	"github.com/kcmclone/controller-manager/leadermigration"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/options"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
	kcmcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

const (
	componentName = "kube-controller-manager"
	// configzName is the /configz key, the component config's API group.
	configzName = kcmconfig.GroupName
	// controllerStartJitter spreads controller starts over
	// [interval, 2*interval), as upstream.
	controllerStartJitter = 1.0
	// apiserverWaitTimeout is how long a starting manager waits for a healthy apiserver.
	apiserverWaitTimeout = 10 * time.Second
)

// NewControllerManagerCommand returns the kube-controller-manager command.
func NewControllerManagerCommand() *cobra.Command {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		klog.Background().Error(err, "Unable to initialize command options")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}

	cmd := &cobra.Command{
		Use: componentName,
		Long: `The Kubernetes controller manager runs the core control loops of Kubernetes
as one daemon. A control loop never ends: it watches the shared state of the
cluster through the apiserver and changes it, step by step, towards the state
users asked for. Among the controllers it runs are the Deployment, ReplicaSet,
ReplicationController, namespace, endpoints and service account controllers.`,
		SilenceUsage: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Generic watches of deprecated APIs are expected; their
			// warnings would only be noise.
			restclient.SetDefaultWarningHandler(restclient.NoWarnings{})
			// Applies --feature-gates and the version flags before RunE.
			return s.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			verflag.PrintAndExitIfRequested()
			if err := logsapi.ValidateAndApply(s.Logs, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			cliflag.PrintFlags(cmd.Flags())

			c, err := s.Config(context.Background(), KnownControllers(), ControllersDisabledByDefault(), ControllerAliases())
			if err != nil {
				return err
			}
			return Run(setupSignalContext(), c.Complete())
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}

	fs := cmd.Flags()
	namedFlagSets := s.Flags(KnownControllers(), ControllersDisabledByDefault(), ControllerAliases())
	verflag.AddFlags(namedFlagSets.FlagSet("global"))
	globalflag.AddGlobalFlags(namedFlagSets.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, namedFlagSets, cols)
	return cmd
}

// setupSignalContext is cancelled on the first SIGTERM or SIGINT, so
// controllers stop and the lease is released; a second signal exits at once.
func setupSignalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx
}

// resyncPeriod returns a period in [min, 2*min) each call, so informers of
// different controllers do not resync in lock-step.
func resyncPeriod(c *config.CompletedConfig) func() time.Duration {
	return func() time.Duration {
		factor := rand.Float64() + 1
		return time.Duration(float64(c.ComponentConfig.Generic.MinResyncPeriod.Nanoseconds()) * factor)
	}
}

// healthHandlers are the three health endpoints; controllers add their
// checks to healthz and readyz once built.
type healthHandlers struct {
	healthz *cmhealthz.MutableHandler
	livez   *cmhealthz.MutableHandler
	readyz  *cmhealthz.MutableHandler
}

func (h healthHandlers) AddHealthChecker(checks ...healthz.HealthChecker) {
	h.healthz.AddHealthChecker(checks...)
	h.readyz.AddHealthChecker(checks...)
}

// Run runs the controller manager until ctx is cancelled or leadership is lost.
func Run(ctx context.Context, c *config.CompletedConfig) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting", "version", baseversion.Get())
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))
	startHeapHeadroom(ctx, logger)

	registerComponentMetrics(c)
	c.EventBroadcaster.StartStructuredLogging(0)
	c.EventBroadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: c.Client.CoreV1().Events("")})
	defer c.EventBroadcaster.Shutdown()

	cfg := c.ComponentConfig
	cfg.APIVersion = kcmconfig.GroupName + "/" + kcmconfig.Version
	cfg.Kind = kcmconfig.Kind
	if cz, err := configz.New(configzName); err != nil {
		return fmt.Errorf("unable to register configz: %w", err)
	} else if err := cz.Set(&configzObject{cfg}); err != nil {
		return fmt.Errorf("unable to set configz: %w", err)
	}

	leaderElect := c.ComponentConfig.Generic.LeaderElection.LeaderElect
	var electionChecker *leaderelection.HealthzAdaptor
	var baseChecks []healthz.HealthChecker
	// Sharded replicas check each controller's Lease instead.
	if leaderElect && !c.LeaderElectSharded {
		electionChecker = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
		baseChecks = append(baseChecks, electionChecker)
	}
	informerSync := &informerSyncCheck{}
	health := healthHandlers{
		healthz: cmhealthz.NewMutableHandler("/healthz", baseChecks...),
		livez:   cmhealthz.NewMutableHandler("/livez", append([]healthz.HealthChecker{healthz.PingHealthz}, baseChecks...)...),
		readyz:  cmhealthz.NewMutableHandler("/readyz", append([]healthz.HealthChecker{healthz.PingHealthz, informerSync}, baseChecks...)...),
	}

	var unsecuredMux *mux.PathRecorderMux
	page := newControllersPage()
	if c.SecureServing != nil {
		unsecuredMux = cmapp.NewBaseHandler(cmapp.Debugging{
			EnableProfiling:           c.ComponentConfig.Generic.Debugging.EnableProfiling,
			EnableContentionProfiling: c.ComponentConfig.Generic.Debugging.EnableContentionProfiling,
		}, map[string]http.Handler{"/healthz": health.healthz, "/livez": health.livez, "/readyz": health.readyz})
		slis.SLIMetricsWithReset{}.Install(unsecuredMux)
		page.install(ctx, unsecuredMux)
		installZPages(unsecuredMux, c)
		handler := cmapp.BuildHandlerChain(unsecuredMux, &c.Authorization, &c.Authentication)
		if _, _, err := c.SecureServing.Serve(handler, 0, ctx.Done()); err != nil {
			return err
		}
	}

	// An apiserver that stays unreachable is a configuration error worth
	// exiting on, leader or not; a restart retries.
	if err := cmapp.WaitForAPIServer(ctx, c.Client, apiserverWaitTimeout); err != nil {
		return fmt.Errorf("failed to wait for apiserver being healthy: %w", err)
	}

	clientBuilder, rootClientBuilder := createClientBuilders(c)

	// run builds and runs the given controllers until ctx ends; started,
	// when given, is called once the controllers are about to start.
	run := func(ctx context.Context, descriptors map[string]*ControllerDescriptor, started func()) error {
		cc, err := CreateControllerContext(ctx, c, rootClientBuilder, clientBuilder)
		if err != nil {
			logger.Error(err, "Error building controller context")
			return err
		}
		cc.Statuses = page.statuses
		controllers, err := BuildControllers(ctx, cc, descriptors, unsecuredMux, health)
		if err != nil {
			logger.Error(err, "Error building controllers")
			return err
		}
		cc.StartInformers(ctx.Done())
		defer cc.ShutdownInformers()
		close(cc.InformersStarted)
		informerSync.watch(ctx, cc)
		if started != nil {
			started()
		}

		if len(controllers) == 0 {
			<-ctx.Done()
			return nil
		}
		if !RunControllers(ctx, cc, controllers, controllerStartJitter, c.ControllerShutdownTimeout) {
			return errors.New("controller shutdown timeout reached")
		}
		return nil
	}

	if !leaderElect {
		return run(ctx, NewControllerDescriptors(), nil)
	}

	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("unable to get hostname: %w", err)
	}
	// The uuid keeps two processes on one host from sharing an identity.
	id := hostname + "_" + string(uuid.NewUUID())
	if c.LeaderElectSharded {
		return runSharded(ctx, c, id, unsecuredMux, health, informerSync, page, rootClientBuilder, clientBuilder)
	}

	var migrator *leadermigration.LeaderMigrator
	if leadermigration.Enabled(&c.ComponentConfig.Generic) {
		logger.Info("starting leader migration")
		migrator = leadermigration.NewLeaderMigrator(&c.ComponentConfig.Generic.LeaderMigration, componentName)
	}
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.CoordinatedLeaderElection) {
		if err := startLeaseCandidate(ctx, c, id, health); err != nil {
			return err
		}
	}

	elections := []election{{
		resourceLock: c.ComponentConfig.Generic.LeaderElection.ResourceLock,
		name:         c.ComponentConfig.Generic.LeaderElection.ResourceName,
		run: func(ctx context.Context) error {
			descriptors := NewControllerDescriptors()
			if migrator == nil {
				return run(ctx, descriptors, nil)
			}
			logger.Info("leader migration: starting main controllers.")
			return run(ctx, mainLeaseDescriptors(descriptors, migrator.FilterFunc), migrator.MarkReady)
		},
	}}
	if migrator != nil {
		lm := c.ComponentConfig.Generic.LeaderMigration
		elections = append(elections, election{
			resourceLock: lm.ResourceLock,
			name:         lm.LeaderName,
			// Only a process that leads the main Lease seeks this one, so
			// that one process does not hold the main Lease while another,
			// on the same release, holds the migration Lease.
			after: migrator.Ready(),
			run: func(ctx context.Context) error {
				logger.Info("leader migration: starting migrated controllers.")
				return run(ctx, migrationLeaseDescriptors(NewControllerDescriptors(), migrator.FilterFunc), nil)
			},
		})
	}
	// A standby may wait long for its turn; startup is over either way.
	releaseStartupPages(logger)
	return runElections(ctx, c, id, electionChecker, elections)
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
			st := cc.Statuses.Controller(ctrl.Name())
			st.Start(time.Now())
			defer st.Stop()
			mu.Lock()
			running.Insert(ctrl.Name())
			mu.Unlock()
			defer func() {
				mu.Lock()
				running.Delete(ctrl.Name())
				mu.Unlock()
				logger.V(1).Info("Controller terminated", "controller", ctrl.Name())
			}()
			ctrl.Run(kcmcontroller.WithStatus(ctx, st))
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

// filterDescriptors keeps the descriptors filter classifies as want.
func filterDescriptors(descriptors map[string]*ControllerDescriptor, filter leadermigration.FilterFunc, want leadermigration.FilterResult) map[string]*ControllerDescriptor {
	out := map[string]*ControllerDescriptor{}
	for name, d := range descriptors {
		if filter(name) == want {
			out[name] = d
		}
	}
	return out
}

// mainLeaseDescriptors are the controllers run under the main Lease during
// a migration: those the migration does not list, and the token controller
// whatever the configuration says, since others may need its tokens.
func mainLeaseDescriptors(descriptors map[string]*ControllerDescriptor, filter leadermigration.FilterFunc) map[string]*ControllerDescriptor {
	out := filterDescriptors(descriptors, filter, leadermigration.ControllerNonMigrated)
	if d, ok := descriptors[names.ServiceAccountTokenController]; ok {
		out[names.ServiceAccountTokenController] = d
	}
	return out
}

// migrationLeaseDescriptors are the controllers the migration gives this
// component, never the token controller.
func migrationLeaseDescriptors(descriptors map[string]*ControllerDescriptor, filter leadermigration.FilterFunc) map[string]*ControllerDescriptor {
	out := filterDescriptors(descriptors, filter, leadermigration.ControllerMigrated)
	delete(out, names.ServiceAccountTokenController)
	return out
}

// startLeaseCandidate publishes this process as a candidate for the
// kube-controller-manager Lease, for the apiserver's coordinated election,
// and adds the candidate's cache sync to /healthz.
func startLeaseCandidate(ctx context.Context, c *config.CompletedConfig, id string, health healthHandlers) error {
	ev := c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent)
	candidate, synced, err := leaderelection.NewCandidate(c.Client, metav1.NamespaceSystem, id, componentName,
		finalVersion(ev.BinaryVersion()), finalVersion(ev.EmulationVersion()), coordinationv1.OldestEmulationVersion)
	if err != nil {
		return err
	}
	// Not on /readyz: it has its own informer-sync check.
	health.healthz.AddHealthChecker(healthz.NewInformerSyncHealthz(synced))
	go candidate.Run(ctx)
	return nil
}

// finalVersion renders v as major.minor.patch, without pre-release or
// build parts, as the LeaseCandidate's version fields hold it.
func finalVersion(v *utilversion.Version) string {
	return fmt.Sprintf("%d.%d.%d", v.Major(), v.Minor(), v.Patch())
}

// election is one Lease and what runs while this process holds it.
type election struct {
	resourceLock string
	name         string
	// after, when set, delays campaigning until it is closed.
	after <-chan struct{}
	run   func(context.Context) error
}

// runElections campaigns for each Lease and runs its controllers while
// leading. A run that ends by itself (an error, or all its controllers
// returned) stops every election and its error is returned. Losing a Lease
// while not shutting down exits the process with 1, as upstream does, so
// that a restart re-elects cleanly; on shutdown the Leases are released so
// a standby takes over without waiting for them to expire.
func runElections(ctx context.Context, c *config.CompletedConfig, id string, checker *leaderelection.HealthzAdaptor, elections []election) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		errs     []error
		runEnded bool
		wg       sync.WaitGroup
	)
	for _, e := range elections {
		wg.Go(func() {
			if e.after != nil {
				select {
				case <-e.after:
				case <-runCtx.Done():
					return
				}
			}
			err := leaderElectAndRun(runCtx, c, id, checker, e.resourceLock, e.name,
				func(leadCtx context.Context) {
					err := e.run(leadCtx)
					if leadCtx.Err() != nil {
						// Lost or shutting down: OnStoppedLeading decides.
						return
					}
					mu.Lock()
					runEnded = true
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
					cancel()
				},
				func() bool {
					mu.Lock()
					defer mu.Unlock()
					return ctx.Err() != nil || runEnded
				})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// leaderElectAndRun campaigns for one Lease and calls run while leading.
// stopping reports whether the election ends on purpose; otherwise losing
// the Lease exits the process.
func leaderElectAndRun(ctx context.Context, c *config.CompletedConfig, id string, checker *leaderelection.HealthzAdaptor,
	resourceLock, name string, run func(context.Context), stopping func() bool) error {
	logger := klog.FromContext(ctx)
	le := c.ComponentConfig.Generic.LeaderElection
	lockConfig := restclient.CopyConfig(c.Kubeconfig)
	// The lock's requests must fail faster than the renew deadline.
	lockConfig.Timeout = le.RenewDeadline.Duration
	rl, err := resourcelock.NewFromKubeconfig(resourceLock, le.ResourceNamespace, name,
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: c.EventRecorder},
		restclient.AddUserAgent(lockConfig, "leader-election"), le.RenewDeadline.Duration)
	if err != nil {
		return fmt.Errorf("error creating lock: %w", err)
	}

	var (
		mu      sync.Mutex
		leading bool
	)
	runDone := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          rl,
		LeaseDuration: le.LeaseDuration.Duration,
		RenewDeadline: le.RenewDeadline.Duration,
		RetryPeriod:   le.RetryPeriod.Duration,
		WatchDog:      checker,
		// Not client-go's release: it runs before the controllers' context
		// is cancelled, so after a failed renewal they would go on acting
		// while the release waits on an unreachable apiserver, past the
		// point where another process may take the Lease. We release it
		// ourselves, on shutdown only, once the controllers have stopped.
		ReleaseOnCancel: false,
		Name:            name,
		Coordinated:     utilfeature.DefaultFeatureGate.Enabled(genericfeatures.CoordinatedLeaderElection),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				leading = true
				mu.Unlock()
				defer close(runDone)
				run(leadCtx)
			},
			OnStoppedLeading: func() {
				if stopping() {
					return
				}
				mu.Lock()
				wasLeading := leading
				mu.Unlock()
				if wasLeading {
					logger.Error(nil, "leaderelection lost", "lease", name)
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("New leader elected", "lease", name, "identity", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("error creating leader elector: %w", err)
	}
	elector.Run(ctx)
	mu.Lock()
	wasLeading := leading
	mu.Unlock()
	if !wasLeading {
		return nil
	}
	// Shutting down while leading: the Lease is still ours until it
	// expires, so wait for the controllers to stop, then hand it over.
	select {
	case <-runDone:
	case <-time.After(le.LeaseDuration.Duration):
	}
	if err := releaseLease(rl, id, le.RenewDeadline.Duration); err != nil {
		logger.Error(err, "Failed to release lease", "lease", name)
		return nil
	}
	logger.Info("Released leadership", "lease", name)
	return nil
}

// releaseLease gives up the Lease if id still holds it, the way client-go
// does: no holder and a one-second duration, so a standby takes it at once.
func releaseLease(rl resourcelock.Interface, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		rec, _, err := rl.Get(ctx)
		if err != nil {
			return err
		}
		if rec.HolderIdentity != id {
			return nil
		}
		now := metav1.NewTime(time.Now())
		err = rl.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions:    rec.LeaderTransitions,
			LeaseDurationSeconds: 1,
			RenewTime:            now,
			AcquireTime:          now,
		})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// informerSyncCheck fails /readyz between informer start and cache sync.
type informerSyncCheck struct {
	mu      sync.Mutex
	started bool
	synced  bool
}

func (i *informerSyncCheck) Name() string { return "informer-sync" }

func (i *informerSyncCheck) Check(*http.Request) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started && !i.synced {
		return errors.New("informers not synced yet")
	}
	return nil
}

func (i *informerSyncCheck) watch(ctx context.Context, cc ControllerContext) {
	i.mu.Lock()
	i.started = true
	i.mu.Unlock()
	go func() {
		cc.WaitForInformersSync(ctx.Done())
		if ctx.Err() == nil {
			i.mu.Lock()
			i.synced = true
			i.mu.Unlock()
			releaseStartupPages(klog.FromContext(ctx))
		}
	}()
}

// createClientBuilders returns the builder controllers get their clients
// from and the root one used for informers and discovery.
func createClientBuilders(c *config.CompletedConfig) (clientBuilder, rootClientBuilder clientbuilder.ControllerClientBuilder) {
	rootClientBuilder = clientbuilder.Simple{ClientConfig: c.Kubeconfig}
	if c.ComponentConfig.KubeCloudShared.UseServiceAccountCredentials {
		clientBuilder = clientbuilder.NewServiceAccount(restclient.AnonymousClientConfig(c.Kubeconfig), c.Client.CoreV1(), "kube-system")
		return clientBuilder, rootClientBuilder
	}
	return rootClientBuilder, rootClientBuilder
}

// configzObject serves the component config at /configz; configz only
// marshals it, so a shallow copy is deep enough.
type configzObject struct {
	kcmconfig.KubeControllerManagerConfiguration
}

func (o *configzObject) DeepCopyObject() runtime.Object {
	c := *o
	return &c
}
