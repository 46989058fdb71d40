// Package config holds kube-controller-manager's component configuration.
// Go field names and JSON names follow upstream's
// kubecontrollermanager.config.k8s.io/v1alpha1 KubeControllerManagerConfiguration,
// and fields appear in its order, so /configz serves the same document.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cmconfig "github.com/kcmclone/controller-manager/config"
)

// GroupName is the API group of the component configuration.
const GroupName = "kubecontrollermanager.config.k8s.io"

// Version is the API version /configz reports.
const Version = "v1alpha1"

// Kind is the kind /configz reports.
const Kind = "KubeControllerManagerConfiguration"

// KubeControllerManagerConfiguration is the whole configuration of the binary.
type KubeControllerManagerConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// Generic holds what every controller manager shares.
	Generic cmconfig.GenericControllerManagerConfiguration
	// KubeCloudShared holds settings shared with the cloud-controller-manager.
	KubeCloudShared KubeCloudSharedConfiguration

	AttachDetachController                    AttachDetachControllerConfiguration
	CSRSigningController                      CSRSigningControllerConfiguration
	DaemonSetController                       DaemonSetControllerConfiguration
	DeploymentController                      DeploymentControllerConfiguration
	DisruptionController                      DisruptionControllerConfiguration
	StatefulSetController                     StatefulSetControllerConfiguration
	DeprecatedController                      DeprecatedControllerConfiguration
	EndpointController                        EndpointControllerConfiguration
	EndpointSliceController                   EndpointSliceControllerConfiguration
	EndpointSliceMirroringController          EndpointSliceMirroringControllerConfiguration
	EphemeralVolumeController                 EphemeralVolumeControllerConfiguration
	GarbageCollectorController                GarbageCollectorControllerConfiguration
	HPAController                             HPAControllerConfiguration
	JobController                             JobControllerConfiguration
	CronJobController                         CronJobControllerConfiguration
	LegacySATokenCleaner                      LegacySATokenCleanerConfiguration
	NamespaceController                       NamespaceControllerConfiguration
	NodeIPAMController                        NodeIPAMControllerConfiguration
	NodeLifecycleController                   NodeLifecycleControllerConfiguration
	PersistentVolumeBinderController          PersistentVolumeBinderControllerConfiguration
	PodGCController                           PodGCControllerConfiguration
	ReplicaSetController                      ReplicaSetControllerConfiguration
	ReplicationController                     ReplicationControllerConfiguration
	ResourceQuotaController                   ResourceQuotaControllerConfiguration
	SAController                              SAControllerConfiguration
	ServiceController                         ServiceControllerConfiguration
	TTLAfterFinishedController                TTLAfterFinishedControllerConfiguration
	ValidatingAdmissionPolicyStatusController ValidatingAdmissionPolicyStatusControllerConfiguration
	DeviceTaintEvictionController             DeviceTaintEvictionControllerConfiguration
	ResourceClaimController                   ResourceClaimControllerConfiguration
}

// KubeCloudSharedConfiguration holds cloud-related settings shared by the
// kube and cloud controller managers.
type KubeCloudSharedConfiguration struct {
	CloudProvider CloudProviderConfiguration
	// ExternalCloudVolumePlugin is the volume plugin used with an external cloud provider.
	ExternalCloudVolumePlugin string
	// UseServiceAccountCredentials gives each controller its own service account.
	UseServiceAccountCredentials bool
	// AllowUntaggedCloud is deprecated and has no effect.
	AllowUntaggedCloud bool
	// RouteReconciliationPeriod is how often cloud routes are reconciled.
	RouteReconciliationPeriod metav1.Duration
	// ClusterName is the instance prefix of the cluster.
	ClusterName string
	// ClusterCIDR is the pod CIDR range, used when AllocateNodeCIDRs is set.
	ClusterCIDR string
	// AllocateNodeCIDRs makes the controller manager allocate pod CIDRs to nodes.
	AllocateNodeCIDRs bool
	// CIDRAllocatorType names the CIDR allocator; only RangeAllocator remains.
	CIDRAllocatorType string
	// ConfigureCloudRoutes configures allocated CIDRs on the cloud provider.
	ConfigureCloudRoutes bool
	// NodeSyncPeriod is deprecated and has no effect.
	NodeSyncPeriod metav1.Duration
}

// CloudProviderConfiguration names the cloud provider and its config file.
type CloudProviderConfiguration struct {
	Name            string
	CloudConfigFile string
}

// AttachDetachControllerConfiguration configures persistentvolume-attach-detach-controller.
type AttachDetachControllerConfiguration struct {
	DisableAttachDetachReconcilerSync bool
	ReconcilerSyncLoopPeriod          metav1.Duration
	DisableForceDetachOnTimeout       bool `json:"disableForceDetachOnTimeout"`
}

// CSRSigningControllerConfiguration configures certificatesigningrequest-signing-controller.
type CSRSigningControllerConfiguration struct {
	// ClusterSigningCertFile and ClusterSigningKeyFile sign for every signer.
	ClusterSigningCertFile string
	ClusterSigningKeyFile  string

	// Per-signer CA files; exclusive with the cluster-wide pair.
	KubeletServingSignerConfiguration      CSRSigningConfiguration
	KubeletClientSignerConfiguration       CSRSigningConfiguration
	KubeAPIServerClientSignerConfiguration CSRSigningConfiguration
	LegacyUnknownSignerConfiguration       CSRSigningConfiguration

	// ClusterSigningDuration is the longest validity a signed certificate gets.
	ClusterSigningDuration metav1.Duration
}

// CSRSigningConfiguration is a CA certificate and key pair.
type CSRSigningConfiguration struct {
	CertFile string
	KeyFile  string
}

// DaemonSetControllerConfiguration configures daemonset-controller.
type DaemonSetControllerConfiguration struct {
	ConcurrentDaemonSetSyncs int32
}

// DeploymentControllerConfiguration configures deployment-controller.
type DeploymentControllerConfiguration struct {
	ConcurrentDeploymentSyncs int32
}

// DisruptionControllerConfiguration configures disruption-controller.
type DisruptionControllerConfiguration struct {
	ConcurrentDisruptionSyncs int32
}

// StatefulSetControllerConfiguration configures statefulset-controller.
type StatefulSetControllerConfiguration struct {
	ConcurrentStatefulSetSyncs int32
}

// DeprecatedControllerConfiguration is empty; upstream keeps it for
// compatibility.
type DeprecatedControllerConfiguration struct{}

// EndpointControllerConfiguration configures endpoints-controller.
type EndpointControllerConfiguration struct {
	ConcurrentEndpointSyncs    int32
	EndpointUpdatesBatchPeriod metav1.Duration
}

// EndpointSliceControllerConfiguration configures endpointslice-controller.
type EndpointSliceControllerConfiguration struct {
	ConcurrentServiceEndpointSyncs int32
	MaxEndpointsPerSlice           int32
	EndpointUpdatesBatchPeriod     metav1.Duration
}

// EndpointSliceMirroringControllerConfiguration configures endpointslice-mirroring-controller.
type EndpointSliceMirroringControllerConfiguration struct {
	MirroringConcurrentServiceEndpointSyncs int32
	MirroringMaxEndpointsPerSubset          int32
	MirroringEndpointUpdatesBatchPeriod     metav1.Duration
}

// EphemeralVolumeControllerConfiguration configures ephemeral-volume-controller.
type EphemeralVolumeControllerConfiguration struct {
	ConcurrentEphemeralVolumeSyncs int32
}

// GroupResource names a resource by group and plural name.
type GroupResource struct {
	Group    string
	Resource string
}

// GarbageCollectorControllerConfiguration configures garbage-collector-controller.
type GarbageCollectorControllerConfiguration struct {
	EnableGarbageCollector bool
	ConcurrentGCSyncs      int32
	// GCIgnoredResources are never garbage collected.
	GCIgnoredResources []GroupResource
}

// HPAControllerConfiguration configures horizontal-pod-autoscaler-controller.
type HPAControllerConfiguration struct {
	ConcurrentHorizontalPodAutoscalerSyncs              int32
	HorizontalPodAutoscalerSyncPeriod                   metav1.Duration
	HorizontalPodAutoscalerDownscaleStabilizationWindow metav1.Duration
	HorizontalPodAutoscalerTolerance                    float64
	HorizontalPodAutoscalerCPUInitializationPeriod      metav1.Duration
	HorizontalPodAutoscalerInitialReadinessDelay        metav1.Duration
}

// JobControllerConfiguration configures job-controller.
type JobControllerConfiguration struct {
	ConcurrentJobSyncs int32
}

// CronJobControllerConfiguration configures cronjob-controller.
type CronJobControllerConfiguration struct {
	ConcurrentCronJobSyncs int32
}

// LegacySATokenCleanerConfiguration configures legacy-serviceaccount-token-cleaner-controller.
type LegacySATokenCleanerConfiguration struct {
	CleanUpPeriod metav1.Duration
}

// NamespaceControllerConfiguration configures namespace-controller.
type NamespaceControllerConfiguration struct {
	NamespaceSyncPeriod      metav1.Duration
	ConcurrentNamespaceSyncs int32
}

// NodeIPAMControllerConfiguration configures node-ipam-controller.
type NodeIPAMControllerConfiguration struct {
	ServiceCIDR          string
	SecondaryServiceCIDR string
	NodeCIDRMaskSize     int32
	NodeCIDRMaskSizeIPv4 int32
	NodeCIDRMaskSizeIPv6 int32
}

// NodeLifecycleControllerConfiguration configures node-lifecycle-controller.
type NodeLifecycleControllerConfiguration struct {
	NodeEvictionRate          float32
	SecondaryNodeEvictionRate float32
	NodeStartupGracePeriod    metav1.Duration
	NodeMonitorGracePeriod    metav1.Duration
	// PodEvictionTimeout is unused; upstream still serves it (as 0s).
	PodEvictionTimeout        metav1.Duration
	LargeClusterSizeThreshold int32
	UnhealthyZoneThreshold    float32
	NodeMonitorPeriod         metav1.Duration
}

// PersistentVolumeBinderControllerConfiguration configures persistentvolume-binder-controller.
type PersistentVolumeBinderControllerConfiguration struct {
	PVClaimBinderSyncPeriod metav1.Duration
	VolumeConfiguration     VolumeConfiguration
}

// VolumeConfiguration holds volume plugin settings.
type VolumeConfiguration struct {
	EnableHostPathProvisioning            bool
	EnableDynamicProvisioning             bool
	PersistentVolumeRecyclerConfiguration PersistentVolumeRecyclerConfiguration
	FlexVolumePluginDir                   string
}

// PersistentVolumeRecyclerConfiguration configures recycler pods.
type PersistentVolumeRecyclerConfiguration struct {
	MaximumRetry                int32
	MinimumTimeoutNFS           int32
	PodTemplateFilePathNFS      string
	IncrementTimeoutNFS         int32
	PodTemplateFilePathHostPath string
	MinimumTimeoutHostPath      int32
	IncrementTimeoutHostPath    int32
}

// PodGCControllerConfiguration configures pod-garbage-collector-controller.
type PodGCControllerConfiguration struct {
	TerminatedPodGCThreshold int32
}

// ReplicaSetControllerConfiguration configures replicaset-controller.
type ReplicaSetControllerConfiguration struct {
	ConcurrentRSSyncs int32
}

// ReplicationControllerConfiguration configures replicationcontroller-controller.
type ReplicationControllerConfiguration struct {
	ConcurrentRCSyncs int32
}

// ResourceQuotaControllerConfiguration configures resourcequota-controller.
type ResourceQuotaControllerConfiguration struct {
	ResourceQuotaSyncPeriod      metav1.Duration
	ConcurrentResourceQuotaSyncs int32
}

// SAControllerConfiguration configures the service account token controllers.
type SAControllerConfiguration struct {
	ServiceAccountKeyFile  string
	ConcurrentSATokenSyncs int32
	RootCAFile             string
}

// ServiceControllerConfiguration configures the cloud service controller,
// which kube-controller-manager no longer runs; kept for /configz.
type ServiceControllerConfiguration struct {
	ConcurrentServiceSyncs int32
}

// TTLAfterFinishedControllerConfiguration configures ttl-after-finished-controller.
type TTLAfterFinishedControllerConfiguration struct {
	ConcurrentTTLSyncs int32
}

// ValidatingAdmissionPolicyStatusControllerConfiguration configures validatingadmissionpolicy-status-controller.
type ValidatingAdmissionPolicyStatusControllerConfiguration struct {
	ConcurrentPolicySyncs int32
}

// DeviceTaintEvictionControllerConfiguration configures device-taint-eviction-controller.
type DeviceTaintEvictionControllerConfiguration struct {
	ConcurrentSyncs int32
}

// ResourceClaimControllerConfiguration configures resourceclaim-controller.
type ResourceClaimControllerConfiguration struct {
	ConcurrentSyncs int32
}

// DeepCopy returns an independent copy.
func (c *KubeControllerManagerConfiguration) DeepCopy() *KubeControllerManagerConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	out.Generic = *c.Generic.DeepCopy()
	if c.GarbageCollectorController.GCIgnoredResources != nil {
		out.GarbageCollectorController.GCIgnoredResources = append([]GroupResource(nil), c.GarbageCollectorController.GCIgnoredResources...)
	}
	return &out
}
