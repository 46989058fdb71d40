package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cmconfig "github.com/kcmclone/controller-manager/config"
)

// Defaults specific to kube-controller-manager.
const (
	// DefaultQPS and DefaultBurst replace the generic client defaults.
	DefaultQPS   = 20
	DefaultBurst = 30

	DefaultLeaderElectionResourceName      = "kube-controller-manager"
	DefaultLeaderElectionResourceNamespace = "kube-system"

	// RangeAllocatorType is the only CIDR allocator left in-tree.
	RangeAllocatorType = "RangeAllocator"

	DefaultFlexVolumePluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
)

// DefaultGCIgnoredResources are the resources the garbage collector never
// tracks: both flavours of events.
func DefaultGCIgnoredResources() []GroupResource {
	return []GroupResource{
		{Group: "", Resource: "events"},
		{Group: "events.k8s.io", Resource: "events"},
	}
}

// NewDefaultKubeControllerManagerConfiguration returns the configuration a
// kube-controller-manager started without flags runs with, i.e. the values
// upstream's v1alpha1 defaulting and flag defaults produce together.
func NewDefaultKubeControllerManagerConfiguration() KubeControllerManagerConfiguration {
	var c KubeControllerManagerConfiguration
	c.APIVersion = GroupName + "/" + Version
	c.Kind = Kind

	c.Generic = cmconfig.NewRecommendedGenericControllerManagerConfiguration()
	c.Generic.ClientConnection.QPS = DefaultQPS
	c.Generic.ClientConnection.Burst = DefaultBurst
	c.Generic.LeaderElection.ResourceName = DefaultLeaderElectionResourceName
	c.Generic.LeaderElection.ResourceNamespace = DefaultLeaderElectionResourceNamespace

	c.KubeCloudShared = KubeCloudSharedConfiguration{
		ClusterName:               "kubernetes",
		ConfigureCloudRoutes:      true,
		RouteReconciliationPeriod: duration(10 * time.Second),
		CIDRAllocatorType:         RangeAllocatorType,
	}

	c.AttachDetachController.ReconcilerSyncLoopPeriod = duration(time.Minute)
	c.CSRSigningController.ClusterSigningDuration = duration(365 * 24 * time.Hour)
	c.DaemonSetController.ConcurrentDaemonSetSyncs = 2
	c.DeploymentController.ConcurrentDeploymentSyncs = 5
	c.DisruptionController.ConcurrentDisruptionSyncs = 1
	c.StatefulSetController.ConcurrentStatefulSetSyncs = 5
	c.EndpointController.ConcurrentEndpointSyncs = 5
	c.EndpointSliceController.ConcurrentServiceEndpointSyncs = 5
	c.EndpointSliceController.MaxEndpointsPerSlice = 100
	c.EndpointSliceMirroringController.MirroringConcurrentServiceEndpointSyncs = 5
	c.EndpointSliceMirroringController.MirroringMaxEndpointsPerSubset = 1000
	c.EphemeralVolumeController.ConcurrentEphemeralVolumeSyncs = 5

	c.GarbageCollectorController.EnableGarbageCollector = true
	c.GarbageCollectorController.ConcurrentGCSyncs = 20
	c.GarbageCollectorController.GCIgnoredResources = DefaultGCIgnoredResources()

	c.HPAController = HPAControllerConfiguration{
		ConcurrentHorizontalPodAutoscalerSyncs:              5,
		HorizontalPodAutoscalerSyncPeriod:                   duration(15 * time.Second),
		HorizontalPodAutoscalerDownscaleStabilizationWindow: duration(5 * time.Minute),
		HorizontalPodAutoscalerTolerance:                    0.1,
		HorizontalPodAutoscalerCPUInitializationPeriod:      duration(5 * time.Minute),
		HorizontalPodAutoscalerInitialReadinessDelay:        duration(30 * time.Second),
	}

	c.JobController.ConcurrentJobSyncs = 5
	c.CronJobController.ConcurrentCronJobSyncs = 5
	c.LegacySATokenCleaner.CleanUpPeriod = duration(365 * 24 * time.Hour)
	c.NamespaceController.ConcurrentNamespaceSyncs = 10
	c.NamespaceController.NamespaceSyncPeriod = duration(5 * time.Minute)

	c.NodeLifecycleController = NodeLifecycleControllerConfiguration{
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0.01,
		NodeStartupGracePeriod:    duration(time.Minute),
		NodeMonitorGracePeriod:    duration(50 * time.Second),
		LargeClusterSizeThreshold: 50,
		UnhealthyZoneThreshold:    0.55,
		NodeMonitorPeriod:         duration(5 * time.Second),
	}

	c.PersistentVolumeBinderController = PersistentVolumeBinderControllerConfiguration{
		PVClaimBinderSyncPeriod: duration(15 * time.Second),
		VolumeConfiguration: VolumeConfiguration{
			EnableDynamicProvisioning: true,
			FlexVolumePluginDir:       DefaultFlexVolumePluginDir,
			PersistentVolumeRecyclerConfiguration: PersistentVolumeRecyclerConfiguration{
				MaximumRetry:             3,
				MinimumTimeoutNFS:        300,
				IncrementTimeoutNFS:      30,
				MinimumTimeoutHostPath:   60,
				IncrementTimeoutHostPath: 30,
			},
		},
	}

	c.PodGCController.TerminatedPodGCThreshold = 12500
	c.ReplicaSetController.ConcurrentRSSyncs = 5
	c.ReplicationController.ConcurrentRCSyncs = 5
	c.ResourceQuotaController.ConcurrentResourceQuotaSyncs = 5
	c.ResourceQuotaController.ResourceQuotaSyncPeriod = duration(5 * time.Minute)
	c.SAController.ConcurrentSATokenSyncs = 5
	c.ServiceController.ConcurrentServiceSyncs = 1
	c.TTLAfterFinishedController.ConcurrentTTLSyncs = 5
	c.ValidatingAdmissionPolicyStatusController.ConcurrentPolicySyncs = 5
	c.DeviceTaintEvictionController.ConcurrentSyncs = 8
	c.ResourceClaimController.ConcurrentSyncs = 50
	return c
}

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
