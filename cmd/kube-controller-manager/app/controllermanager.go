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

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/server/mux"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/configz"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // rest client, workqueue and leader election metrics
	"k8s.io/component-base/metrics/prometheus/slis"
	"k8s.io/component-base/term"
	utilversion "k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"

	cmapp "github.com/kcmclone/controller-manager/app"
	"github.com/kcmclone/controller-manager/clientbuilder"
	cmhealthz "github.com/kcmclone/controller-manager/healthz"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/options"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
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
	logger.Info("Starting", "version", utilversion.Get())
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

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
	if c.SecureServing != nil {
		unsecuredMux = cmapp.NewBaseHandler(cmapp.Debugging{
			EnableProfiling:           c.ComponentConfig.Generic.Debugging.EnableProfiling,
			EnableContentionProfiling: c.ComponentConfig.Generic.Debugging.EnableContentionProfiling,
		}, map[string]http.Handler{"/healthz": health.healthz, "/livez": health.livez, "/readyz": health.readyz})
		slis.SLIMetricsWithReset{}.Install(unsecuredMux)
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

	run := func(ctx context.Context) error {
		cc, err := CreateControllerContext(ctx, c, rootClientBuilder, clientBuilder)
		if err != nil {
			logger.Error(err, "Error building controller context")
			return err
		}
		descriptors := NewControllerDescriptors()
		descriptors[names.ServiceAccountTokenController].init = newServiceAccountTokenController(rootClientBuilder)
		controllers, err := BuildControllers(ctx, cc, descriptors, unsecuredMux, health)
		if err != nil {
			logger.Error(err, "Error building controllers")
			return err
		}
		cc.StartInformers(ctx.Done())
		defer cc.ShutdownInformers()
		close(cc.InformersStarted)
		informerSync.watch(ctx, cc)

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
		return run(ctx)
	}

	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("unable to get hostname: %w", err)
	}
	// The uuid keeps two processes on one host from sharing an identity.
	id := hostname + "_" + string(uuid.NewUUID())
	if c.LeaderElectSharded {
		return runSharded(ctx, c, id, unsecuredMux, health, informerSync, rootClientBuilder, clientBuilder)
	}
	return leaderElectAndRun(ctx, c, id, electionChecker, run)
}

// leaderElectAndRun campaigns for the Lease and runs while leading. Losing
// the lease while not shutting down exits the process with 1, as upstream
// does, so that a restart re-elects cleanly; on shutdown the lease is
// released so a standby takes over without waiting for it to expire.
func leaderElectAndRun(ctx context.Context, c *config.CompletedConfig, id string, checker *leaderelection.HealthzAdaptor, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	le := c.ComponentConfig.Generic.LeaderElection
	lockConfig := restclient.CopyConfig(c.Kubeconfig)
	// The lock's requests must fail faster than the renew deadline.
	lockConfig.Timeout = le.RenewDeadline.Duration
	rl, err := resourcelock.NewFromKubeconfig(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: c.EventRecorder},
		restclient.AddUserAgent(lockConfig, "leader-election"), le.RenewDeadline.Duration)
	if err != nil {
		return fmt.Errorf("error creating lock: %w", err)
	}

	var (
		runErr  error
		mu      sync.Mutex
		leading bool
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            rl,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		WatchDog:        checker,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				mu.Lock()
				leading = true
				mu.Unlock()
				if err := run(leadCtx); err != nil && !errors.Is(err, context.Canceled) {
					mu.Lock()
					runErr = err
					mu.Unlock()
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() != nil {
					logger.Info("Released leadership on shutdown")
					return
				}
				mu.Lock()
				wasLeading := leading
				mu.Unlock()
				if wasLeading {
					logger.Error(nil, "leaderelection lost")
					klog.FlushAndExit(klog.ExitFlushTimeout, 1)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					logger.Info("New leader elected", "identity", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("error creating leader elector: %w", err)
	}
	// Run returns when ctx is cancelled or leadership is lost; a run that
	// failed before ctx ended is surfaced as the process's error.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	elector.Run(runCtx)
	mu.Lock()
	defer mu.Unlock()
	return runErr
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
