// Package options defines kube-controller-manager's command-line flags,
// validates them and turns them into the runtime Config.
package options

import (
	"context"
	"fmt"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	genericfeatures "k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/server/flagz"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	// Registers the json log format, which adds the --log-json-* flags.
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/metrics"
	metricsfeatures "k8s.io/component-base/metrics/features"
	netutils "k8s.io/utils/net"

	cmoptions "github.com/kcmclone/controller-manager/options"

	kcmappconfig "github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
	// Registers every feature gate kube-controller-manager knows.
	_ "github.com/kcmclone/kube-controller-manager/pkg/features"
)

// KubeControllerManagerUserAgent names the binary in requests and events.
const KubeControllerManagerUserAgent = "kube-controller-manager"

// KubeControllerManagerPort is the default --secure-port.
const KubeControllerManagerPort = 10257

// DefaultControllerShutdownTimeout is the default --controller-shutdown-timeout.
const DefaultControllerShutdownTimeout = 10 * time.Second

// KubeControllerManagerOptions holds every option of the binary. Per
// controller option structs point into one component config, so parsed
// flags land there directly.
type KubeControllerManagerOptions struct {
	Generic         *cmoptions.GenericControllerManagerConfigurationOptions
	KubeCloudShared *KubeCloudSharedOptions

	AttachDetachController                    *AttachDetachControllerOptions
	CSRSigningController                      *CSRSigningControllerOptions
	DaemonSetController                       *DaemonSetControllerOptions
	DeploymentController                      *DeploymentControllerOptions
	DisruptionController                      *DisruptionControllerOptions
	DeviceTaintEvictionController             *DeviceTaintEvictionControllerOptions
	ResourceClaimController                   *ResourceClaimControllerOptions
	StatefulSetController                     *StatefulSetControllerOptions
	EndpointController                        *EndpointControllerOptions
	EndpointSliceController                   *EndpointSliceControllerOptions
	EndpointSliceMirroringController          *EndpointSliceMirroringControllerOptions
	EphemeralVolumeController                 *EphemeralVolumeControllerOptions
	GarbageCollectorController                *GarbageCollectorControllerOptions
	HPAController                             *HPAControllerOptions
	JobController                             *JobControllerOptions
	CronJobController                         *CronJobControllerOptions
	LegacySATokenCleaner                      *LegacySATokenCleanerOptions
	NamespaceController                       *NamespaceControllerOptions
	NodeIPAMController                        *NodeIPAMControllerOptions
	NodeLifecycleController                   *NodeLifecycleControllerOptions
	PersistentVolumeBinderController          *PersistentVolumeBinderControllerOptions
	PodGCController                           *PodGCControllerOptions
	ReplicaSetController                      *ReplicaSetControllerOptions
	ReplicationController                     *ReplicationControllerOptions
	ResourceQuotaController                   *ResourceQuotaControllerOptions
	SAController                              *SAControllerOptions
	TTLAfterFinishedController                *TTLAfterFinishedControllerOptions
	ValidatingAdmissionPolicyStatusController *ValidatingAdmissionPolicyStatusControllerOptions

	SecureServing  *apiserveroptions.SecureServingOptionsWithLoopback
	Authentication *apiserveroptions.DelegatingAuthenticationOptions
	Authorization  *apiserveroptions.DelegatingAuthorizationOptions
	Metrics        *metrics.Options
	Logs           *logs.Options

	// Master overrides the server of the kubeconfig.
	Master string

	ControllerShutdownTimeout time.Duration

	// Sharded holds the flags of active-active replicas (ours, opt-in).
	Sharded *ShardedOptions

	// ComponentGlobalsRegistry holds the effective version and feature gate.
	// Call its Set() right after flags are parsed (PersistentPreRunE): that
	// applies --emulated-version, --min-compatibility-version and
	// --feature-gates, and fails on unknown gates or bad values.
	ComponentGlobalsRegistry basecompatibility.ComponentGlobalsRegistry

	// flagSets are the flags Flags() bound, for checks across all of them.
	flagSets *cliflag.NamedFlagSets
}

// NewKubeControllerManagerOptions returns options holding upstream's defaults.
func NewKubeControllerManagerOptions() (*KubeControllerManagerOptions, error) {
	ensureKubeComponentRegistered(componentGlobalsRegistry)

	cfg := NewDefaultComponentConfig()
	s := &KubeControllerManagerOptions{
		Generic:         cmoptions.NewGenericControllerManagerConfigurationOptions(&cfg.Generic),
		KubeCloudShared: &KubeCloudSharedOptions{&cfg.KubeCloudShared},

		AttachDetachController:                    &AttachDetachControllerOptions{&cfg.AttachDetachController},
		CSRSigningController:                      &CSRSigningControllerOptions{&cfg.CSRSigningController},
		DaemonSetController:                       &DaemonSetControllerOptions{&cfg.DaemonSetController},
		DeploymentController:                      &DeploymentControllerOptions{&cfg.DeploymentController},
		DisruptionController:                      &DisruptionControllerOptions{&cfg.DisruptionController},
		DeviceTaintEvictionController:             &DeviceTaintEvictionControllerOptions{&cfg.DeviceTaintEvictionController},
		ResourceClaimController:                   &ResourceClaimControllerOptions{&cfg.ResourceClaimController},
		StatefulSetController:                     &StatefulSetControllerOptions{&cfg.StatefulSetController},
		EndpointController:                        &EndpointControllerOptions{&cfg.EndpointController},
		EndpointSliceController:                   &EndpointSliceControllerOptions{&cfg.EndpointSliceController},
		EndpointSliceMirroringController:          &EndpointSliceMirroringControllerOptions{&cfg.EndpointSliceMirroringController},
		EphemeralVolumeController:                 &EphemeralVolumeControllerOptions{&cfg.EphemeralVolumeController},
		GarbageCollectorController:                &GarbageCollectorControllerOptions{&cfg.GarbageCollectorController},
		HPAController:                             &HPAControllerOptions{&cfg.HPAController},
		JobController:                             &JobControllerOptions{&cfg.JobController},
		CronJobController:                         &CronJobControllerOptions{&cfg.CronJobController},
		LegacySATokenCleaner:                      &LegacySATokenCleanerOptions{&cfg.LegacySATokenCleaner},
		NamespaceController:                       &NamespaceControllerOptions{&cfg.NamespaceController},
		NodeIPAMController:                        &NodeIPAMControllerOptions{&cfg.NodeIPAMController},
		NodeLifecycleController:                   &NodeLifecycleControllerOptions{&cfg.NodeLifecycleController},
		PersistentVolumeBinderController:          &PersistentVolumeBinderControllerOptions{&cfg.PersistentVolumeBinderController},
		PodGCController:                           &PodGCControllerOptions{&cfg.PodGCController},
		ReplicaSetController:                      &ReplicaSetControllerOptions{&cfg.ReplicaSetController},
		ReplicationController:                     &ReplicationControllerOptions{&cfg.ReplicationController},
		ResourceQuotaController:                   &ResourceQuotaControllerOptions{&cfg.ResourceQuotaController},
		SAController:                              &SAControllerOptions{&cfg.SAController},
		TTLAfterFinishedController:                &TTLAfterFinishedControllerOptions{&cfg.TTLAfterFinishedController},
		ValidatingAdmissionPolicyStatusController: &ValidatingAdmissionPolicyStatusControllerOptions{&cfg.ValidatingAdmissionPolicyStatusController},

		SecureServing:  apiserveroptions.NewSecureServingOptions().WithLoopback(),
		Authentication: apiserveroptions.NewDelegatingAuthenticationOptions(),
		Authorization:  apiserveroptions.NewDelegatingAuthorizationOptions(),
		Metrics:        metrics.NewOptions(),
		Logs:           logs.NewOptions(),

		ControllerShutdownTimeout: DefaultControllerShutdownTimeout,
		Sharded:                   NewShardedOptions(),
		ComponentGlobalsRegistry:  componentGlobalsRegistry,
	}

	// Without a delegating kubeconfig, fall back to in-cluster config or
	// run without delegated authn/authz, as upstream does.
	s.Authentication.RemoteKubeConfigFileOptional = true
	s.Authorization.RemoteKubeConfigFileOptional = true

	// Keep generated serving certs in memory unless --cert-dir is given.
	s.SecureServing.ServerCert.CertDirectory = ""
	s.SecureServing.ServerCert.PairName = KubeControllerManagerUserAgent
	s.SecureServing.BindPort = KubeControllerManagerPort
	return s, nil
}

// NewDefaultComponentConfig returns the defaulted component configuration.
func NewDefaultComponentConfig() kcmconfig.KubeControllerManagerConfiguration {
	return kcmconfig.NewDefaultKubeControllerManagerConfiguration()
}

// Flags returns the flags in upstream's sections and order. Call it once
// per options instance: it binds the flags to the instance's fields.
func (s *KubeControllerManagerOptions) Flags(allControllers []string, disabledByDefaultControllers []string, controllerAliases map[string]string) cliflag.NamedFlagSets {
	fss := cliflag.NamedFlagSets{}
	s.flagSets = &fss
	s.Generic.AddFlags(&fss, allControllers, disabledByDefaultControllers, controllerAliases)
	s.KubeCloudShared.AddFlags(fss.FlagSet("generic"))
	s.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	s.Authentication.AddFlags(fss.FlagSet("authentication"))
	s.Authorization.AddFlags(fss.FlagSet("authorization"))

	s.AttachDetachController.AddFlags(fss.FlagSet(sectionAttachDetach))
	s.CSRSigningController.AddFlags(fss.FlagSet(sectionCSRSigning))
	s.DeploymentController.AddFlags(fss.FlagSet(sectionDeployment))
	s.DisruptionController.AddFlags(fss.FlagSet(sectionDisruption))
	s.DeviceTaintEvictionController.AddFlags(fss.FlagSet(sectionDeviceTaintEviction))
	s.ResourceClaimController.AddFlags(fss.FlagSet(sectionResourceClaim))
	s.StatefulSetController.AddFlags(fss.FlagSet(sectionStatefulSet))
	s.DaemonSetController.AddFlags(fss.FlagSet(sectionDaemonSet))
	s.EndpointController.AddFlags(fss.FlagSet(sectionEndpoints))
	s.EndpointSliceController.AddFlags(fss.FlagSet(sectionEndpointSlice))
	s.EndpointSliceMirroringController.AddFlags(fss.FlagSet(sectionEndpointSliceMirroring))
	s.EphemeralVolumeController.AddFlags(fss.FlagSet(sectionEphemeralVolume))
	s.GarbageCollectorController.AddFlags(fss.FlagSet(sectionGarbageCollector))
	s.HPAController.AddFlags(fss.FlagSet(sectionHPA))
	s.JobController.AddFlags(fss.FlagSet(sectionJob))
	s.CronJobController.AddFlags(fss.FlagSet(sectionCronJob))
	s.LegacySATokenCleaner.AddFlags(fss.FlagSet(sectionLegacySATokenCleaner))
	s.NamespaceController.AddFlags(fss.FlagSet(sectionNamespace))
	s.NodeIPAMController.AddFlags(fss.FlagSet(sectionNodeIPAM))
	s.NodeLifecycleController.AddFlags(fss.FlagSet(sectionNodeLifecycle))
	s.PersistentVolumeBinderController.AddFlags(fss.FlagSet(sectionPVBinder))
	s.PodGCController.AddFlags(fss.FlagSet(sectionPodGC))
	s.ReplicaSetController.AddFlags(fss.FlagSet(sectionReplicaSet))
	s.ReplicationController.AddFlags(fss.FlagSet(sectionReplicationController))
	s.ResourceQuotaController.AddFlags(fss.FlagSet(sectionResourceQuota))
	s.SAController.AddFlags(fss.FlagSet(sectionServiceAccount))
	s.TTLAfterFinishedController.AddFlags(fss.FlagSet(sectionTTLAfterFinished))
	s.ValidatingAdmissionPolicyStatusController.AddFlags(fss.FlagSet(sectionVAPStatus))

	s.Metrics.AddFlags(fss.FlagSet("metrics"))
	logsapi.AddFlags(s.Logs, fss.FlagSet("logs"))

	misc := fss.FlagSet("misc")
	misc.StringVar(&s.Master, "master", s.Master,
		"Address of the Kubernetes API server; overrides the server in the kubeconfig.")
	misc.StringVar(&s.Generic.ClientConnection.Kubeconfig, "kubeconfig", s.Generic.ClientConnection.Kubeconfig,
		"Path to a kubeconfig file with the API server location and credentials (--master overrides the location).")

	generic := fss.FlagSet("generic")
	generic.DurationVar(&s.ControllerShutdownTimeout, "controller-shutdown-timeout", s.ControllerShutdownTimeout,
		"How long to wait for controllers to stop before the process exits")
	s.Sharded.AddFlags(generic)
	// Adds --feature-gates, --emulated-version and --min-compatibility-version.
	s.ComponentGlobalsRegistry.AddFlags(generic)

	markNotYetUsed(&fss)
	return fss
}

// Validate checks every option and returns all problems as one aggregate.
func (s *KubeControllerManagerOptions) Validate(allControllers []string, disabledByDefaultControllers []string, controllerAliases map[string]string) error {
	var errs []error
	// Normally already done by the command after parsing; this only
	// catches callers that skipped it.
	if err := s.ComponentGlobalsRegistry.SetFallback(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.ComponentGlobalsRegistry.Validate()...)
	errs = append(errs, s.Generic.Validate(allControllers, disabledByDefaultControllers, controllerAliases)...)
	errs = append(errs, s.Sharded.Validate(s.Generic.LeaderElection.LeaderElect,
		s.Generic.LeaderMigration != nil && s.Generic.LeaderMigration.Enabled,
		utilfeature.DefaultFeatureGate.Enabled(genericfeatures.CoordinatedLeaderElection))...)
	errs = append(errs, s.KubeCloudShared.Validate()...)
	errs = append(errs, s.AttachDetachController.Validate()...)
	errs = append(errs, s.CSRSigningController.Validate()...)
	errs = append(errs, s.DaemonSetController.Validate()...)
	errs = append(errs, s.DeploymentController.Validate()...)
	errs = append(errs, s.DisruptionController.Validate()...)
	errs = append(errs, s.DeviceTaintEvictionController.Validate()...)
	errs = append(errs, s.ResourceClaimController.Validate()...)
	errs = append(errs, s.StatefulSetController.Validate()...)
	errs = append(errs, s.EndpointController.Validate()...)
	errs = append(errs, s.EndpointSliceController.Validate()...)
	errs = append(errs, s.EndpointSliceMirroringController.Validate()...)
	errs = append(errs, s.EphemeralVolumeController.Validate()...)
	errs = append(errs, s.GarbageCollectorController.Validate()...)
	errs = append(errs, s.HPAController.Validate()...)
	errs = append(errs, s.JobController.Validate()...)
	errs = append(errs, s.CronJobController.Validate()...)
	errs = append(errs, s.LegacySATokenCleaner.Validate()...)
	errs = append(errs, s.NamespaceController.Validate()...)
	errs = append(errs, s.NodeIPAMController.Validate()...)
	errs = append(errs, s.NodeLifecycleController.Validate()...)
	errs = append(errs, s.PersistentVolumeBinderController.Validate()...)
	errs = append(errs, s.PodGCController.Validate()...)
	errs = append(errs, s.ReplicaSetController.Validate()...)
	errs = append(errs, s.ReplicationController.Validate()...)
	errs = append(errs, s.ResourceQuotaController.Validate()...)
	errs = append(errs, s.SAController.Validate()...)
	errs = append(errs, s.TTLAfterFinishedController.Validate()...)
	errs = append(errs, s.ValidatingAdmissionPolicyStatusController.Validate()...)
	errs = append(errs, s.SecureServing.Validate()...)
	errs = append(errs, s.Authentication.Validate()...)
	errs = append(errs, s.Authorization.Validate()...)
	errs = append(errs, s.Metrics.Validate()...)
	errs = append(errs, logsapi.Validate(s.Logs, utilfeature.DefaultFeatureGate, nil).ToAggregate())
	errs = append(errs, negativeWorkerCounts(s.flagSets)...)
	return utilerrors.NewAggregate(errs)
}

// ApplyTo copies the options into c and stamps the component config's
// apiVersion and kind. Binding the secure port happens here.
func (s *KubeControllerManagerOptions) ApplyTo(c *kcmappconfig.Config, allControllers []string, disabledByDefaultControllers []string, controllerAliases map[string]string) error {
	if err := s.ComponentGlobalsRegistry.SetFallback(); err != nil {
		return err
	}
	cc := &c.ComponentConfig
	cc.APIVersion = kcmconfig.GroupName + "/" + kcmconfig.Version
	cc.Kind = kcmconfig.Kind
	steps := []func() error{
		func() error {
			return s.Generic.ApplyTo(&cc.Generic, allControllers, disabledByDefaultControllers, controllerAliases)
		},
		func() error { return s.KubeCloudShared.ApplyTo(&cc.KubeCloudShared) },
		func() error { return s.AttachDetachController.ApplyTo(&cc.AttachDetachController) },
		func() error { return s.CSRSigningController.ApplyTo(&cc.CSRSigningController) },
		func() error { return s.DaemonSetController.ApplyTo(&cc.DaemonSetController) },
		func() error { return s.DeploymentController.ApplyTo(&cc.DeploymentController) },
		func() error { return s.DisruptionController.ApplyTo(&cc.DisruptionController) },
		func() error { return s.DeviceTaintEvictionController.ApplyTo(&cc.DeviceTaintEvictionController) },
		func() error { return s.ResourceClaimController.ApplyTo(&cc.ResourceClaimController) },
		func() error { return s.StatefulSetController.ApplyTo(&cc.StatefulSetController) },
		func() error { return s.EndpointController.ApplyTo(&cc.EndpointController) },
		func() error { return s.EndpointSliceController.ApplyTo(&cc.EndpointSliceController) },
		func() error { return s.EndpointSliceMirroringController.ApplyTo(&cc.EndpointSliceMirroringController) },
		func() error { return s.EphemeralVolumeController.ApplyTo(&cc.EphemeralVolumeController) },
		func() error { return s.GarbageCollectorController.ApplyTo(&cc.GarbageCollectorController) },
		func() error { return s.HPAController.ApplyTo(&cc.HPAController) },
		func() error { return s.JobController.ApplyTo(&cc.JobController) },
		func() error { return s.CronJobController.ApplyTo(&cc.CronJobController) },
		func() error { return s.LegacySATokenCleaner.ApplyTo(&cc.LegacySATokenCleaner) },
		func() error { return s.NamespaceController.ApplyTo(&cc.NamespaceController) },
		func() error { return s.NodeIPAMController.ApplyTo(&cc.NodeIPAMController) },
		func() error { return s.NodeLifecycleController.ApplyTo(&cc.NodeLifecycleController) },
		func() error { return s.PersistentVolumeBinderController.ApplyTo(&cc.PersistentVolumeBinderController) },
		func() error { return s.PodGCController.ApplyTo(&cc.PodGCController) },
		func() error { return s.ReplicaSetController.ApplyTo(&cc.ReplicaSetController) },
		func() error { return s.ReplicationController.ApplyTo(&cc.ReplicationController) },
		func() error { return s.ResourceQuotaController.ApplyTo(&cc.ResourceQuotaController) },
		func() error { return s.SAController.ApplyTo(&cc.SAController) },
		func() error { return s.TTLAfterFinishedController.ApplyTo(&cc.TTLAfterFinishedController) },
		func() error {
			return s.ValidatingAdmissionPolicyStatusController.ApplyTo(&cc.ValidatingAdmissionPolicyStatusController)
		},
		func() error { return s.SecureServing.ApplyTo(&c.SecureServing, &c.LoopbackClientConfig) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	// No secure port means nothing to authenticate or authorize.
	if s.SecureServing.BindPort != 0 || s.SecureServing.Listener != nil {
		if err := s.Authentication.ApplyTo(&c.Authentication, c.SecureServing, nil); err != nil {
			return err
		}
		if err := s.Authorization.ApplyTo(&c.Authorization); err != nil {
			return err
		}
	}
	c.ControllerShutdownTimeout = s.ControllerShutdownTimeout
	c.LeaderElectSharded = s.Sharded.Enabled
	c.ShardedWarmStandby = s.Sharded.WarmStandby
	return nil
}

// Config validates the options and builds the runtime configuration: API
// client, serving, delegated authn/authz, events and component config.
func (s KubeControllerManagerOptions) Config(ctx context.Context, allControllers []string, disabledByDefaultControllers []string, controllerAliases map[string]string) (*kcmappconfig.Config, error) {
	if err := s.Validate(allControllers, disabledByDefaultControllers, controllerAliases); err != nil {
		return nil, err
	}

	if err := s.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("error creating self-signed certificates: %w", err)
	}

	// With neither --master nor --kubeconfig this is the in-cluster config.
	kubeconfig, err := clientcmd.BuildConfigFromFlags(s.Master, s.Generic.ClientConnection.Kubeconfig)
	if err != nil {
		if s.Master == "" && s.Generic.ClientConnection.Kubeconfig == "" {
			return nil, fmt.Errorf("no --kubeconfig or --master given and not running in a cluster: %w", err)
		}
		return nil, fmt.Errorf("unable to load --kubeconfig %q: %w", s.Generic.ClientConnection.Kubeconfig, err)
	}
	kubeconfig.DisableCompression = true
	kubeconfig.AcceptContentTypes = s.Generic.ClientConnection.AcceptContentTypes
	kubeconfig.ContentType = s.Generic.ClientConnection.ContentType
	kubeconfig.QPS = s.Generic.ClientConnection.QPS
	kubeconfig.Burst = int(s.Generic.ClientConnection.Burst)

	// Keep Kubeconfig free of a user agent: the app adds one per controller.
	client, err := clientset.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(kubeconfig), KubeControllerManagerUserAgent))
	if err != nil {
		return nil, err
	}

	eventBroadcaster := record.NewBroadcaster(record.WithContext(ctx))
	eventRecorder := eventBroadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: KubeControllerManagerUserAgent})

	// ComponentConfig starts empty and ApplyTo fills what the options hold,
	// so parts without flags (ServiceController) stay zero as upstream's do.
	c := &kcmappconfig.Config{
		Client:                    client,
		Kubeconfig:                kubeconfig,
		EventBroadcaster:          eventBroadcaster,
		EventRecorder:             eventRecorder,
		ControllerShutdownTimeout: s.ControllerShutdownTimeout,
		ComponentGlobalsRegistry:  s.ComponentGlobalsRegistry,
	}
	if s.flagSets != nil {
		c.Flagz = flagz.NamedFlagSetsReader{FlagSets: *s.flagSets}
	}
	if err := s.ApplyTo(c, allControllers, disabledByDefaultControllers, controllerAliases); err != nil {
		eventBroadcaster.Shutdown()
		return nil, err
	}
	metricsfeatures.ApplyFeatureGates(utilfeature.DefaultFeatureGate)
	s.Metrics.Apply()
	return c, nil
}
