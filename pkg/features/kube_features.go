// Code in this file is data: the feature gates kube-controller-manager v1.37
// knows, with the stage history recorded upstream. Edit by hand when
// upstream changes a gate.

package features

import (
	genericfeatures "k8s.io/apiserver/pkg/features"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
)

// Names of the Kubernetes feature gates. Generic apiserver, zpages,
// client-go, logging and metrics gates are declared by their own packages.
const (
	AllowDNSOnlyNodeCSR                                  featuregate.Feature = "AllowDNSOnlyNodeCSR"
	AllowInsecureKubeletCertificateSigningRequests       featuregate.Feature = "AllowInsecureKubeletCertificateSigningRequests"
	AllowOverwriteTerminationGracePeriodSeconds          featuregate.Feature = "AllowOverwriteTerminationGracePeriodSeconds"
	AllowServiceExternalIPs                              featuregate.Feature = "AllowServiceExternalIPs"
	AtomicWriteVolumeUserFields                          featuregate.Feature = "AtomicWriteVolumeUserFields"
	AuthorizePodWebsocketUpgradeCreatePermission         featuregate.Feature = "AuthorizePodWebsocketUpgradeCreatePermission"
	CPUCFSQuotaPeriod                                    featuregate.Feature = "CustomCPUCFSQuotaPeriod" // name differs from the constant upstream too
	CPUManagerPolicyAlphaOptions                         featuregate.Feature = "CPUManagerPolicyAlphaOptions"
	CPUManagerPolicyBetaOptions                          featuregate.Feature = "CPUManagerPolicyBetaOptions"
	CPUManagerPolicyOptions                              featuregate.Feature = "CPUManagerPolicyOptions"
	CRDObservedGenerationTracking                        featuregate.Feature = "CRDObservedGenerationTracking"
	CRDValidationRatcheting                              featuregate.Feature = "CRDValidationRatcheting"
	CRIListStreaming                                     featuregate.Feature = "CRIListStreaming"
	CSIServiceAccountTokenSecrets                        featuregate.Feature = "CSIServiceAccountTokenSecrets"
	CSIVolumeHealth                                      featuregate.Feature = "CSIVolumeHealth"
	ChangeContainerStatusOnKubeletRestart                featuregate.Feature = "ChangeContainerStatusOnKubeletRestart"
	ClearingNominatedNodeNameAfterBinding                featuregate.Feature = "ClearingNominatedNodeNameAfterBinding"
	CloudControllerManagerWatchBasedRoutesReconciliation featuregate.Feature = "CloudControllerManagerWatchBasedRoutesReconciliation"
	CloudControllerManagerWebhook                        featuregate.Feature = "CloudControllerManagerWebhook"
	ClusterTrustBundle                                   featuregate.Feature = "ClusterTrustBundle"
	ClusterTrustBundleProjection                         featuregate.Feature = "ClusterTrustBundleProjection"
	CompositePodGroup                                    featuregate.Feature = "CompositePodGroup"
	ContainerCheckpoint                                  featuregate.Feature = "ContainerCheckpoint"
	ControllerManagerReleaseLeaderElectionLockOnExit     featuregate.Feature = "ControllerManagerReleaseLeaderElectionLockOnExit"
	ContainerRestartRules                                featuregate.Feature = "ContainerRestartRules"
	ContainerStopSignals                                 featuregate.Feature = "ContainerStopSignals"
	CrossNamespaceVolumeDataSource                       featuregate.Feature = "CrossNamespaceVolumeDataSource"
	CustomResourceFieldSelectors                         featuregate.Feature = "CustomResourceFieldSelectors"
	DRAAdminAccess                                       featuregate.Feature = "DRAAdminAccess"
	DRAConsumableCapacity                                featuregate.Feature = "DRAConsumableCapacity"
	DRADerivedAttributes                                 featuregate.Feature = "DRADerivedAttributes"
	DRADeviceBindingConditions                           featuregate.Feature = "DRADeviceBindingConditions"
	DRADeviceCompatibilityGroups                         featuregate.Feature = "DRADeviceCompatibilityGroups"
	DRADeviceTaintRules                                  featuregate.Feature = "DRADeviceTaintRules"
	DRADeviceTaints                                      featuregate.Feature = "DRADeviceTaints"
	DRAExtendedResource                                  featuregate.Feature = "DRAExtendedResource"
	DRAFractionalCapacityRange                           featuregate.Feature = "DRAFractionalCapacityRange"
	DRAListTypeAttributes                                featuregate.Feature = "DRAListTypeAttributes"
	DRANodeAllocatableResources                          featuregate.Feature = "DRANodeAllocatableResources"
	DRAOptionalNodeOperations                            featuregate.Feature = "DRAOptionalNodeOperations"
	DRAPartitionableDevices                              featuregate.Feature = "DRAPartitionableDevices"
	DRAPartitionableDevicesType                          featuregate.Feature = "DRAPartitionableDevicesType"
	DRAPrioritizedList                                   featuregate.Feature = "DRAPrioritizedList"
	DRAResourceClaimDeviceStatus                         featuregate.Feature = "DRAResourceClaimDeviceStatus"
	DRAResourceClaimGranularStatusAuthorization          featuregate.Feature = "DRAResourceClaimGranularStatusAuthorization"
	DRAResourcePoolStatus                                featuregate.Feature = "DRAResourcePoolStatus"
	DRASchedulerFilterTimeout                            featuregate.Feature = "DRASchedulerFilterTimeout"
	DRAWorkloadResourceClaims                            featuregate.Feature = "DRAWorkloadResourceClaims"
	DefaultPodSysctls                                    featuregate.Feature = "DefaultPodSysctls"
	DeploymentReplicaSetTerminatingReplicas              featuregate.Feature = "DeploymentReplicaSetTerminatingReplicas"
	DisableAllocatorDualWrite                            featuregate.Feature = "DisableAllocatorDualWrite"
	DisableCPUQuotaWithExclusiveCPUs                     featuregate.Feature = "DisableCPUQuotaWithExclusiveCPUs"
	DisableNodeKubeProxyVersion                          featuregate.Feature = "DisableNodeKubeProxyVersion"
	DynamicResourceAllocation                            featuregate.Feature = "DynamicResourceAllocation"
	EmptyDirVolumeMode                                   featuregate.Feature = "EmptyDirVolumeMode"
	EnvFiles                                             featuregate.Feature = "EnvFiles"
	EventedPLEG                                          featuregate.Feature = "EventedPLEG"
	EvictionRequestAPI                                   featuregate.Feature = "EvictionRequestAPI"
	ExecProbeTimeout                                     featuregate.Feature = "ExecProbeTimeout"
	ExtendWebSocketsToKubelet                            featuregate.Feature = "ExtendWebSocketsToKubelet"
	ExternalServiceAccountTokenSigner                    featuregate.Feature = "ExternalServiceAccountTokenSigner"
	GRPCContainerProbeTLS                                featuregate.Feature = "GRPCContainerProbeTLS"
	GenericWorkload                                      featuregate.Feature = "GenericWorkload"
	GitRepoVolumeDriver                                  featuregate.Feature = "GitRepoVolumeDriver"
	GracefulNodeShutdown                                 featuregate.Feature = "GracefulNodeShutdown"
	GracefulNodeShutdownBasedOnPodPriority               featuregate.Feature = "GracefulNodeShutdownBasedOnPodPriority"
	H2CContainerProbe                                    featuregate.Feature = "H2CContainerProbe"
	HPAConfigurableTolerance                             featuregate.Feature = "HPAConfigurableTolerance"
	HPAGeneration                                        featuregate.Feature = "HPAGeneration"
	HPAOptimizedSelectorStore                            featuregate.Feature = "HPAOptimizedSelectorStore"
	HPAScaleToZero                                       featuregate.Feature = "HPAScaleToZero"
	HostnameOverride                                     featuregate.Feature = "HostnameOverride"
	HugepageAwareEviction                                featuregate.Feature = "HugepageAwareEviction"
	ImageMaximumGCAge                                    featuregate.Feature = "ImageMaximumGCAge"
	ImageVolume                                          featuregate.Feature = "ImageVolume"
	ImageVolumeWithDigest                                featuregate.Feature = "ImageVolumeWithDigest"
	InPlacePodLevelResourcesVerticalScaling              featuregate.Feature = "InPlacePodLevelResourcesVerticalScaling"
	InPlacePodVerticalScaling                            featuregate.Feature = "InPlacePodVerticalScaling"
	InPlacePodVerticalScalingExclusiveCPUs               featuregate.Feature = "InPlacePodVerticalScalingExclusiveCPUs"
	InPlacePodVerticalScalingExclusiveMemory             featuregate.Feature = "InPlacePodVerticalScalingExclusiveMemory"
	InPlacePodVerticalScalingInitContainers              featuregate.Feature = "InPlacePodVerticalScalingInitContainers"
	InPlacePodVerticalScalingMemoryBackedVolumes         featuregate.Feature = "InPlacePodVerticalScalingMemoryBackedVolumes"
	InPlacePodVerticalScalingSchedulerPreemption         featuregate.Feature = "InPlacePodVerticalScalingSchedulerPreemption"
	InterPodAffinityHostnameFastPath                     featuregate.Feature = "InterPodAffinityHostnameFastPath"
	JobManagedBy                                         featuregate.Feature = "JobManagedBy"
	KubeProxyIPVS                                        featuregate.Feature = "KubeProxyIPVS"
	KubeProxyNFTablesLocalhostNodePorts                  featuregate.Feature = "KubeProxyNFTablesLocalhostNodePorts"
	KubeletAllocatedPodsEndpoint                         featuregate.Feature = "KubeletAllocatedPodsEndpoint"
	KubeletCgroupDriverFromCRI                           featuregate.Feature = "KubeletCgroupDriverFromCRI"
	KubeletCrashLoopBackOffMax                           featuregate.Feature = "KubeletCrashLoopBackOffMax"
	KubeletEnsureSecretPulledImages                      featuregate.Feature = "KubeletEnsureSecretPulledImages"
	KubeletFineGrainedAuthz                              featuregate.Feature = "KubeletFineGrainedAuthz"
	KubeletInUserNamespace                               featuregate.Feature = "KubeletInUserNamespace"
	KubeletPSI                                           featuregate.Feature = "KubeletPSI"
	KubeletPodResourcesDynamicResources                  featuregate.Feature = "KubeletPodResourcesDynamicResources"
	KubeletPodResourcesGet                               featuregate.Feature = "KubeletPodResourcesGet"
	KubeletPodResourcesListUseActivePods                 featuregate.Feature = "KubeletPodResourcesListUseActivePods"
	KubeletRegistrationGetOnExistsOnly                   featuregate.Feature = "KubeletRegistrationGetOnExistsOnly"
	KubeletSeparateDiskGC                                featuregate.Feature = "KubeletSeparateDiskGC"
	KubeletServiceAccountTokenForCredentialProviders     featuregate.Feature = "KubeletServiceAccountTokenForCredentialProviders"
	KubeletTracing                                       featuregate.Feature = "KubeletTracing"
	LocalStorageCapacityIsolationFSQuotaMonitoring       featuregate.Feature = "LocalStorageCapacityIsolationFSQuotaMonitoring"
	MatchLabelKeysInPodAffinity                          featuregate.Feature = "MatchLabelKeysInPodAffinity"
	MatchLabelKeysInPodTopologySpread                    featuregate.Feature = "MatchLabelKeysInPodTopologySpread"
	MatchLabelKeysInPodTopologySpreadSelectorMerge       featuregate.Feature = "MatchLabelKeysInPodTopologySpreadSelectorMerge"
	MaxUnavailableStatefulSet                            featuregate.Feature = "MaxUnavailableStatefulSet"
	MemoryQoS                                            featuregate.Feature = "MemoryQoS"
	MultiCIDRServiceAllocator                            featuregate.Feature = "MultiCIDRServiceAllocator"
	MutableCSINodeAllocatableCount                       featuregate.Feature = "MutableCSINodeAllocatableCount"
	MutablePVNodeAffinity                                featuregate.Feature = "MutablePVNodeAffinity"
	MutablePodResourcesForSuspendedJobs                  featuregate.Feature = "MutablePodResourcesForSuspendedJobs"
	MutableSchedulingDirectivesForSuspendedJobs          featuregate.Feature = "MutableSchedulingDirectivesForSuspendedJobs"
	NFTablesNetlink                                      featuregate.Feature = "NFTablesNetlink"
	NFTablesProxyMode                                    featuregate.Feature = "NFTablesProxyMode"
	NodeControllerLeaseCircuitBreaker                    featuregate.Feature = "NodeControllerLeaseCircuitBreaker"
	NodeDeclaredFeatures                                 featuregate.Feature = "NodeDeclaredFeatures"
	NodeInclusionPolicyInPodTopologySpread               featuregate.Feature = "NodeInclusionPolicyInPodTopologySpread"
	NodeLifecycleConditions                              featuregate.Feature = "NodeLifecycleConditions"
	NodeLogQuery                                         featuregate.Feature = "NodeLogQuery"
	NodeSwap                                             featuregate.Feature = "NodeSwap"
	NominatedNodeNameForExpectation                      featuregate.Feature = "NominatedNodeNameForExpectation"
	OpportunisticBatching                                featuregate.Feature = "OpportunisticBatching"
	PLEGOnDemandRelist                                   featuregate.Feature = "PLEGOnDemandRelist"
	PersistentVolumeClaimUnusedSinceTime                 featuregate.Feature = "PersistentVolumeClaimUnusedSinceTime"
	PodAndContainerStatsFromCRI                          featuregate.Feature = "PodAndContainerStatsFromCRI"
	PodCertificateRequest                                featuregate.Feature = "PodCertificateRequest"
	PodDeletionCost                                      featuregate.Feature = "PodDeletionCost"
	PodGroupPreemptionPolicy                             featuregate.Feature = "PodGroupPreemptionPolicy"
	PodLevelResourceManagers                             featuregate.Feature = "PodLevelResourceManagers"
	PodLevelResources                                    featuregate.Feature = "PodLevelResources"
	PodLevelResourcesFixDefaulting                       featuregate.Feature = "PodLevelResourcesFixDefaulting"
	PodLevelResourcesFixKubeletQOSClass                  featuregate.Feature = "PodLevelResourcesFixKubeletQOSClass"
	PodLogsQuerySplitStreams                             featuregate.Feature = "PodLogsQuerySplitStreams"
	PodObservedGenerationTracking                        featuregate.Feature = "PodObservedGenerationTracking"
	PodReadyToStartContainersCondition                   featuregate.Feature = "PodReadyToStartContainersCondition"
	PodSchedulingReadiness                               featuregate.Feature = "PodSchedulingReadiness"
	PodTopologyLabelsAdmission                           featuregate.Feature = "PodTopologyLabelsAdmission"
	PodsAPI                                              featuregate.Feature = "PodsAPI"
	PortForwardWebsockets                                featuregate.Feature = "PortForwardWebsockets"
	PreferSameTrafficDistribution                        featuregate.Feature = "PreferSameTrafficDistribution"
	ProcMountType                                        featuregate.Feature = "ProcMountType"
	QOSReserved                                          featuregate.Feature = "QOSReserved"
	RecoverVolumeExpansionFailure                        featuregate.Feature = "RecoverVolumeExpansionFailure"
	RecursiveReadOnlyMounts                              featuregate.Feature = "RecursiveReadOnlyMounts"
	ReduceDefaultCrashLoopBackOffDecay                   featuregate.Feature = "ReduceDefaultCrashLoopBackOffDecay"
	RelaxedEnvironmentVariableValidation                 featuregate.Feature = "RelaxedEnvironmentVariableValidation"
	RelaxedServiceNameValidation                         featuregate.Feature = "RelaxedServiceNameValidation"
	ReloadKubeletClientCAFile                            featuregate.Feature = "ReloadKubeletClientCAFile"
	ReloadKubeletServerCertificateFile                   featuregate.Feature = "ReloadKubeletServerCertificateFile"
	ResourceHealthStatus                                 featuregate.Feature = "ResourceHealthStatus"
	ResourceHealthStatusMessage                          featuregate.Feature = "ResourceHealthStatusMessage"
	RestartAllContainersOnContainerExits                 featuregate.Feature = "RestartAllContainersOnContainerExits"
	RotateKubeletServerCertificate                       featuregate.Feature = "RotateKubeletServerCertificate"
	RuntimeClassInImageCriAPI                            featuregate.Feature = "RuntimeClassInImageCriApi" // name differs from the constant upstream too
	SELinuxChangePolicy                                  featuregate.Feature = "SELinuxChangePolicy"
	SELinuxMount                                         featuregate.Feature = "SELinuxMount"
	SELinuxMountReadWriteOncePod                         featuregate.Feature = "SELinuxMountReadWriteOncePod"
	SchedulerAsyncAPICalls                               featuregate.Feature = "SchedulerAsyncAPICalls"
	SchedulerAsyncPreemption                             featuregate.Feature = "SchedulerAsyncPreemption"
	SchedulerPopFromBackoffQ                             featuregate.Feature = "SchedulerPopFromBackoffQ"
	SchedulerPreQueueingHints                            featuregate.Feature = "SchedulerPreQueueingHints"
	SeparateTaintEvictionController                      featuregate.Feature = "SeparateTaintEvictionController"
	ServiceAccountNodeAudienceRestriction                featuregate.Feature = "ServiceAccountNodeAudienceRestriction"
	ServiceAccountTokenJTI                               featuregate.Feature = "ServiceAccountTokenJTI"
	ServiceAccountTokenNodeBinding                       featuregate.Feature = "ServiceAccountTokenNodeBinding"
	ServiceAccountTokenNodeBindingValidation             featuregate.Feature = "ServiceAccountTokenNodeBindingValidation"
	ServiceAccountTokenPodNodeInfo                       featuregate.Feature = "ServiceAccountTokenPodNodeInfo"
	ServiceCIDRStatusFieldWiping                         featuregate.Feature = "ServiceCIDRStatusFieldWiping"
	StaleControllerConsistencyDaemonSet                  featuregate.Feature = "StaleControllerConsistencyDaemonSet"
	StaleControllerConsistencyHPA                        featuregate.Feature = "StaleControllerConsistencyHPA"
	StaleControllerConsistencyJob                        featuregate.Feature = "StaleControllerConsistencyJob"
	StaleControllerConsistencyReplicaSet                 featuregate.Feature = "StaleControllerConsistencyReplicaSet"
	StaleControllerConsistencyStatefulSet                featuregate.Feature = "StaleControllerConsistencyStatefulSet"
	StatefulSetRecreateStrategy                          featuregate.Feature = "StatefulSetRecreateStrategy"
	StatefulSetSemanticRevisionComparison                featuregate.Feature = "StatefulSetSemanticRevisionComparison"
	StorageCapacityScoring                               featuregate.Feature = "StorageCapacityScoring"
	StorageNamespaceIndex                                featuregate.Feature = "StorageNamespaceIndex"
	StorageVersionMigrator                               featuregate.Feature = "StorageVersionMigrator"
	StrictIPCIDRValidation                               featuregate.Feature = "StrictIPCIDRValidation"
	SupplementalGroupsPolicy                             featuregate.Feature = "SupplementalGroupsPolicy"
	SystemdWatchdog                                      featuregate.Feature = "SystemdWatchdog"
	TaintTolerationComparisonOperators                   featuregate.Feature = "TaintTolerationComparisonOperators"
	TopologyAwareWorkloadScheduling                      featuregate.Feature = "TopologyAwareWorkloadScheduling"
	TopologyManagerPolicyAlphaOptions                    featuregate.Feature = "TopologyManagerPolicyAlphaOptions"
	TopologyManagerPolicyBetaOptions                     featuregate.Feature = "TopologyManagerPolicyBetaOptions"
	TopologyManagerPolicyOptions                         featuregate.Feature = "TopologyManagerPolicyOptions"
	TranslateStreamCloseWebsocketRequests                featuregate.Feature = "TranslateStreamCloseWebsocketRequests"
	UserNamespacesHostNetworkSupport                     featuregate.Feature = "UserNamespacesHostNetworkSupport"
	UserNamespacesSupport                                featuregate.Feature = "UserNamespacesSupport"
	VolumeAttributesClass                                featuregate.Feature = "VolumeAttributesClass"
	VolumeBindMountOptions                               featuregate.Feature = "VolumeBindMountOptions"
	VolumeLimitScaling                                   featuregate.Feature = "VolumeLimitScaling"
	WinDSR                                               featuregate.Feature = "WinDSR"
	WinOverlay                                           featuregate.Feature = "WinOverlay"
	WindowsCPUAndMemoryAffinity                          featuregate.Feature = "WindowsCPUAndMemoryAffinity"
	WindowsGracefulNodeShutdown                          featuregate.Feature = "WindowsGracefulNodeShutdown"
	WindowsHostNetwork                                   featuregate.Feature = "WindowsHostNetwork"
	WorkloadWithJob                                      featuregate.Feature = "WorkloadWithJob"
)

// kubeFeatureHistory holds each gate's stage changes, oldest first. A step
// reads "<major.minor> <Alpha|Beta|GA|Deprecated> <on|off> [locked]
// [min=<major.minor>]": from that version on the gate has that stage and
// default, optionally locked to the default or only once the minimum
// compatibility version reaches min.
var kubeFeatureHistory = map[featuregate.Feature]string{
	AllowDNSOnlyNodeCSR:                                  "1.0 GA on | 1.31 Deprecated off",
	AllowInsecureKubeletCertificateSigningRequests:       "1.0 GA on | 1.31 Deprecated off",
	AllowOverwriteTerminationGracePeriodSeconds:          "1.0 GA on | 1.32 Deprecated off | 1.35 Deprecated off locked",
	AllowServiceExternalIPs:                              "1.0 GA on",
	AtomicWriteVolumeUserFields:                          "1.37 Alpha off",
	AuthorizePodWebsocketUpgradeCreatePermission:         "1.35 Beta on",
	CPUCFSQuotaPeriod:                                    "1.12 Alpha off | 1.36 GA on",
	CPUManagerPolicyAlphaOptions:                         "1.23 Alpha off",
	CPUManagerPolicyBetaOptions:                          "1.23 Beta on",
	CPUManagerPolicyOptions:                              "1.22 Alpha off | 1.23 Beta on | 1.33 GA on locked",
	CRDObservedGenerationTracking:                        "1.35 Beta off | 1.36 Beta on",
	CRDValidationRatcheting:                              "1.28 Alpha off | 1.30 Beta on | 1.33 GA on locked",
	CRIListStreaming:                                     "1.36 Alpha off",
	CSIServiceAccountTokenSecrets:                        "1.35 Beta on | 1.36 GA on locked",
	CSIVolumeHealth:                                      "1.21 Alpha off",
	ChangeContainerStatusOnKubeletRestart:                "1.0 GA on | 1.35 Deprecated off",
	ClearingNominatedNodeNameAfterBinding:                "1.34 Alpha off | 1.35 Beta on",
	CloudControllerManagerWatchBasedRoutesReconciliation: "1.35 Alpha off",
	CloudControllerManagerWebhook:                        "1.27 Alpha off",
	ClusterTrustBundle:                                   "1.27 Alpha off | 1.33 Beta off | 1.37 GA on",
	ClusterTrustBundleProjection:                         "1.29 Alpha off | 1.33 Beta off | 1.37 GA on",
	CompositePodGroup:                                    "1.37 Alpha off",
	ContainerCheckpoint:                                  "1.25 Alpha off | 1.30 Beta on",
	ControllerManagerReleaseLeaderElectionLockOnExit:     "1.36 Alpha off",
	ContainerRestartRules:                                "1.34 Alpha off | 1.35 Beta on",
	ContainerStopSignals:                                 "1.33 Alpha off",
	CrossNamespaceVolumeDataSource:                       "1.26 Alpha off",
	CustomResourceFieldSelectors:                         "1.30 Alpha off | 1.31 Beta on | 1.32 GA on locked",
	DRAAdminAccess:                                       "1.32 Alpha off | 1.34 Beta on | 1.36 GA on locked",
	DRAConsumableCapacity:                                "1.34 Alpha off | 1.36 Beta on",
	DRADerivedAttributes:                                 "1.37 Alpha off",
	DRADeviceBindingConditions:                           "1.34 Alpha off | 1.36 Beta on",
	DRADeviceCompatibilityGroups:                         "1.37 Alpha off",
	DRADeviceTaintRules:                                  "1.35 Alpha off | 1.36 Beta off | 1.37 GA on",
	DRADeviceTaints:                                      "1.33 Alpha off | 1.36 Beta on | 1.37 GA on",
	DRAExtendedResource:                                  "1.34 Alpha off | 1.36 Beta on | 1.37 GA on locked",
	DRAFractionalCapacityRange:                           "1.37 Beta off | 1.37 Beta on min=1.37",
	DRAListTypeAttributes:                                "1.36 Alpha off",
	DRANodeAllocatableResources:                          "1.36 Alpha off",
	DRAOptionalNodeOperations:                            "1.37 Alpha off",
	DRAPartitionableDevices:                              "1.33 Alpha off | 1.36 Beta on",
	DRAPartitionableDevicesType:                          "1.37 Alpha off",
	DRAPrioritizedList:                                   "1.33 Alpha off | 1.34 Beta on | 1.36 GA on | 1.37 GA on locked",
	DRAResourceClaimDeviceStatus:                         "1.32 Alpha off | 1.33 Beta on | 1.37 GA on locked",
	DRAResourceClaimGranularStatusAuthorization:          "1.36 Beta on",
	DRAResourcePoolStatus:                                "1.36 Alpha off",
	DRASchedulerFilterTimeout:                            "1.34 Beta on",
	DRAWorkloadResourceClaims:                            "1.36 Alpha off | 1.37 Beta off",
	DefaultPodSysctls:                                    "1.37 Alpha off",
	DeploymentReplicaSetTerminatingReplicas:              "1.33 Alpha off | 1.35 Beta on",
	DisableAllocatorDualWrite:                            "1.31 Alpha off | 1.33 Beta off | 1.34 GA on | 1.35 GA on locked",
	DisableCPUQuotaWithExclusiveCPUs:                     "1.33 Beta on | 1.36 Deprecated on | 1.37 Deprecated on locked",
	DisableNodeKubeProxyVersion:                          "1.29 Alpha off | 1.31 Deprecated off | 1.33 Deprecated on | 1.36 Deprecated on locked",
	DynamicResourceAllocation:                            "1.26 Alpha off | 1.32 Beta off | 1.34 GA on | 1.35 GA on locked",
	EmptyDirVolumeMode:                                   "1.37 Alpha off",
	EnvFiles:                                             "1.34 Alpha off | 1.35 Beta on",
	EventedPLEG:                                          "1.26 Alpha off",
	EvictionRequestAPI:                                   "1.37 Alpha off",
	ExecProbeTimeout:                                     "1.20 GA on | 1.35 GA on locked",
	ExtendWebSocketsToKubelet:                            "1.36 Beta on",
	ExternalServiceAccountTokenSigner:                    "1.32 Alpha off | 1.34 Beta on | 1.36 GA on locked",
	GRPCContainerProbeTLS:                                "1.37 Alpha off",
	GenericWorkload:                                      "1.35 Alpha off | 1.37 Beta off",
	GitRepoVolumeDriver:                                  "1.0 GA on | 1.33 Deprecated off | 1.36 Deprecated off locked",
	GracefulNodeShutdown:                                 "1.20 Alpha off | 1.21 Beta on",
	GracefulNodeShutdownBasedOnPodPriority:               "1.23 Alpha off | 1.24 Beta on",
	H2CContainerProbe:                                    "1.37 Alpha off",
	HPAConfigurableTolerance:                             "1.33 Alpha off | 1.35 Beta on | 1.37 GA on locked",
	HPAGeneration:                                        "1.37 Beta on",
	HPAOptimizedSelectorStore:                            "1.37 Beta on",
	HPAScaleToZero:                                       "1.16 Alpha off | 1.37 Beta on",
	HostnameOverride:                                     "1.34 Alpha off | 1.35 Beta on | 1.37 GA on locked",
	HugepageAwareEviction:                                "1.37 Beta on",
	ImageMaximumGCAge:                                    "1.29 Alpha off | 1.30 Beta on | 1.35 GA on locked",
	ImageVolume:                                          "1.31 Alpha off | 1.33 Beta off | 1.35 Beta on | 1.36 GA on locked",
	ImageVolumeWithDigest:                                "1.35 Alpha off",
	InPlacePodLevelResourcesVerticalScaling:              "1.35 Alpha off | 1.36 Beta on",
	InPlacePodVerticalScaling:                            "1.27 Alpha off | 1.33 Beta on | 1.35 GA on locked",
	InPlacePodVerticalScalingExclusiveCPUs:               "1.32 Alpha off",
	InPlacePodVerticalScalingExclusiveMemory:             "1.34 Alpha off",
	InPlacePodVerticalScalingInitContainers:              "1.36 Beta on | 1.37 GA on locked",
	InPlacePodVerticalScalingMemoryBackedVolumes:         "1.37 Alpha off",
	InPlacePodVerticalScalingSchedulerPreemption:         "1.37 Alpha off",
	InterPodAffinityHostnameFastPath:                     "1.37 Alpha off",
	JobManagedBy:                                         "1.30 Alpha off | 1.32 Beta on | 1.35 GA on locked",
	KubeProxyIPVS:                                        "1.0 GA on | 1.37 Deprecated on",
	KubeProxyNFTablesLocalhostNodePorts:                  "1.37 Alpha off",
	KubeletAllocatedPodsEndpoint:                         "1.37 Alpha off",
	KubeletCgroupDriverFromCRI:                           "1.28 Alpha off | 1.31 Beta on | 1.34 GA on locked",
	KubeletCrashLoopBackOffMax:                           "1.32 Alpha off | 1.35 Beta on",
	KubeletEnsureSecretPulledImages:                      "1.33 Alpha off | 1.35 Beta on",
	KubeletFineGrainedAuthz:                              "1.32 Alpha off | 1.33 Beta on | 1.36 GA on locked",
	KubeletInUserNamespace:                               "1.22 Alpha off | 1.37 Beta on",
	KubeletPSI:                                           "1.33 Alpha off | 1.34 Beta on | 1.36 GA on locked",
	KubeletPodResourcesDynamicResources:                  "1.27 Alpha off | 1.34 Beta on | 1.36 GA on locked",
	KubeletPodResourcesGet:                               "1.27 Alpha off | 1.34 Beta on | 1.36 GA on locked",
	KubeletPodResourcesListUseActivePods:                 "1.0 GA off | 1.34 Deprecated on",
	KubeletRegistrationGetOnExistsOnly:                   "1.0 GA on | 1.32 Deprecated off",
	KubeletSeparateDiskGC:                                "1.29 Alpha off | 1.31 Beta on",
	KubeletServiceAccountTokenForCredentialProviders:     "1.33 Alpha off | 1.34 Beta on",
	KubeletTracing:                                       "1.25 Alpha off | 1.27 Beta on | 1.34 GA on locked",
	LocalStorageCapacityIsolationFSQuotaMonitoring:       "1.15 Alpha off | 1.31 Beta off",
	MatchLabelKeysInPodAffinity:                          "1.29 Alpha off | 1.31 Beta on | 1.33 GA on locked",
	MatchLabelKeysInPodTopologySpread:                    "1.25 Alpha off | 1.27 Beta on",
	MatchLabelKeysInPodTopologySpreadSelectorMerge:       "1.34 Beta on",
	MaxUnavailableStatefulSet:                            "1.24 Alpha off | 1.35 Beta off | 1.37 Beta on",
	MemoryQoS:                                            "1.22 Alpha off | 1.37 Beta on",
	MultiCIDRServiceAllocator:                            "1.27 Alpha off | 1.31 Beta off | 1.33 GA on | 1.34 GA on locked",
	MutableCSINodeAllocatableCount:                       "1.33 Alpha off | 1.34 Beta off | 1.35 Beta on | 1.36 GA on locked",
	MutablePVNodeAffinity:                                "1.35 Alpha off",
	MutablePodResourcesForSuspendedJobs:                  "1.35 Alpha off | 1.36 Beta on",
	MutableSchedulingDirectivesForSuspendedJobs:          "1.35 Alpha off | 1.36 Beta on",
	NFTablesNetlink:                                      "1.37 Beta on",
	NFTablesProxyMode:                                    "1.29 Alpha off | 1.31 Beta on | 1.33 GA on locked",
	NodeControllerLeaseCircuitBreaker:                    "1.37 Beta on",
	NodeDeclaredFeatures:                                 "1.35 Alpha off | 1.36 Beta on | 1.37 GA on locked",
	NodeInclusionPolicyInPodTopologySpread:               "1.25 Alpha off | 1.26 Beta on | 1.33 GA on locked",
	NodeLifecycleConditions:                              "1.37 Alpha off",
	NodeLogQuery:                                         "1.27 Alpha off | 1.30 Beta off | 1.36 GA on locked",
	NodeSwap:                                             "1.22 Alpha off | 1.28 Beta off | 1.30 Beta on | 1.34 GA on locked",
	NominatedNodeNameForExpectation:                      "1.34 Alpha off | 1.35 Beta on",
	OpportunisticBatching:                                "1.35 Beta on",
	PLEGOnDemandRelist:                                   "1.36 Beta on | 1.37 GA on locked",
	PersistentVolumeClaimUnusedSinceTime:                 "1.36 Alpha off | 1.37 Beta on",
	PodAndContainerStatsFromCRI:                          "1.23 Alpha off | 1.37 Beta off",
	PodCertificateRequest:                                "1.34 Alpha off | 1.35 Beta off | 1.37 GA on",
	PodDeletionCost:                                      "1.21 Alpha off | 1.22 Beta on",
	PodGroupPreemptionPolicy:                             "1.37 Alpha off",
	PodLevelResourceManagers:                             "1.36 Alpha off | 1.37 Beta off",
	PodLevelResources:                                    "1.32 Alpha off | 1.34 Beta on",
	PodLevelResourcesFixDefaulting:                       "1.37 Beta on",
	PodLevelResourcesFixKubeletQOSClass:                  "1.37 Beta on",
	PodLogsQuerySplitStreams:                             "1.32 Alpha off",
	PodObservedGenerationTracking:                        "1.33 Alpha off | 1.34 Beta on | 1.35 GA on locked",
	PodReadyToStartContainersCondition:                   "1.28 Alpha off | 1.29 Beta on | 1.37 GA on locked",
	PodSchedulingReadiness:                               "1.26 Alpha off | 1.27 Beta on | 1.30 GA on locked",
	PodTopologyLabelsAdmission:                           "1.33 Alpha off | 1.35 Beta on",
	PodsAPI:                                              "1.36 Alpha off | 1.37 Beta on",
	PortForwardWebsockets:                                "1.30 Alpha off | 1.31 Beta on",
	PreferSameTrafficDistribution:                        "1.33 Alpha off | 1.34 Beta on | 1.35 GA on locked",
	ProcMountType:                                        "1.12 Alpha off | 1.31 Beta off | 1.33 Beta on | 1.36 GA on locked",
	QOSReserved:                                          "1.11 Alpha off",
	RecoverVolumeExpansionFailure:                        "1.23 Alpha off | 1.32 Beta on | 1.34 GA on locked",
	RecursiveReadOnlyMounts:                              "1.30 Alpha off | 1.31 Beta on | 1.33 GA on locked",
	ReduceDefaultCrashLoopBackOffDecay:                   "1.33 Alpha off",
	RelaxedEnvironmentVariableValidation:                 "1.30 Alpha off | 1.32 Beta on | 1.34 GA on locked",
	RelaxedServiceNameValidation:                         "1.34 Alpha off | 1.36 Beta on | 1.37 GA on locked",
	ReloadKubeletClientCAFile:                            "1.36 Beta on",
	ReloadKubeletServerCertificateFile:                   "1.31 Beta on",
	ResourceHealthStatus:                                 "1.31 Alpha off | 1.36 Beta on",
	ResourceHealthStatusMessage:                          "1.36 Beta on",
	RestartAllContainersOnContainerExits:                 "1.35 Alpha off | 1.36 Beta on",
	RotateKubeletServerCertificate:                       "1.7 Alpha off | 1.12 Beta on",
	RuntimeClassInImageCriAPI:                            "1.29 Alpha off",
	SELinuxChangePolicy:                                  "1.32 Alpha off | 1.33 Beta on | 1.36 GA on locked",
	SELinuxMount:                                         "1.30 Alpha off | 1.33 Beta off | 1.37 GA on",
	SELinuxMountReadWriteOncePod:                         "1.25 Alpha off | 1.27 Beta off | 1.28 Beta on | 1.36 GA on locked",
	SchedulerAsyncAPICalls:                               "1.34 Beta off",
	SchedulerAsyncPreemption:                             "1.32 Alpha off | 1.33 Beta on",
	SchedulerPopFromBackoffQ:                             "1.33 Beta on",
	SchedulerPreQueueingHints:                            "1.37 Alpha off",
	SeparateTaintEvictionController:                      "1.29 Beta on | 1.34 GA on locked",
	ServiceAccountNodeAudienceRestriction:                "1.32 Beta off | 1.33 Beta on",
	ServiceAccountTokenJTI:                               "1.29 Alpha off | 1.30 Beta on | 1.32 GA on locked",
	ServiceAccountTokenNodeBinding:                       "1.29 Alpha off | 1.31 Beta on | 1.33 GA on locked",
	ServiceAccountTokenNodeBindingValidation:             "1.29 Alpha off | 1.30 Beta on | 1.32 GA on locked",
	ServiceAccountTokenPodNodeInfo:                       "1.29 Alpha off | 1.30 Beta on | 1.32 GA on locked",
	ServiceCIDRStatusFieldWiping:                         "1.0 GA off | 1.36 Deprecated on",
	StaleControllerConsistencyDaemonSet:                  "1.36 Beta on",
	StaleControllerConsistencyHPA:                        "1.37 Beta on",
	StaleControllerConsistencyJob:                        "1.36 Beta on",
	StaleControllerConsistencyReplicaSet:                 "1.36 Beta on",
	StaleControllerConsistencyStatefulSet:                "1.36 Beta on",
	StatefulSetRecreateStrategy:                          "1.37 Alpha off",
	StatefulSetSemanticRevisionComparison:                "1.0 Beta on",
	StorageCapacityScoring:                               "1.33 Alpha off | 1.37 Beta on",
	StorageNamespaceIndex:                                "1.30 Beta on | 1.33 Deprecated on",
	StorageVersionMigrator:                               "1.30 Alpha off | 1.35 Beta off | 1.37 GA on",
	StrictIPCIDRValidation:                               "1.33 Alpha off | 1.36 Beta on",
	SupplementalGroupsPolicy:                             "1.31 Alpha off | 1.33 Beta on | 1.35 GA on locked",
	SystemdWatchdog:                                      "1.32 Beta on | 1.35 GA on locked",
	TaintTolerationComparisonOperators:                   "1.35 Alpha off",
	TopologyAwareWorkloadScheduling:                      "1.36 Alpha off",
	TopologyManagerPolicyAlphaOptions:                    "1.26 Alpha off",
	TopologyManagerPolicyBetaOptions:                     "1.26 Beta off | 1.28 Beta on",
	TopologyManagerPolicyOptions:                         "1.26 Alpha off | 1.28 Beta on | 1.32 GA on locked",
	TranslateStreamCloseWebsocketRequests:                "1.29 Alpha off | 1.30 Beta on",
	UserNamespacesHostNetworkSupport:                     "1.35 Alpha off",
	UserNamespacesSupport:                                "1.25 Alpha off | 1.30 Beta off | 1.33 Beta on | 1.36 GA on locked",
	VolumeAttributesClass:                                "1.29 Alpha off | 1.31 Beta off | 1.34 GA on | 1.36 GA on locked",
	VolumeBindMountOptions:                               "1.37 Alpha off",
	VolumeLimitScaling:                                   "1.35 Alpha off | 1.37 Beta on",
	WinDSR:                                               "1.14 Alpha off | 1.33 Beta on | 1.34 GA on locked",
	WinOverlay:                                           "1.14 Alpha off | 1.20 Beta on | 1.34 GA on locked",
	WindowsCPUAndMemoryAffinity:                          "1.32 Alpha off",
	WindowsGracefulNodeShutdown:                          "1.32 Alpha off | 1.34 Beta on",
	WindowsHostNetwork:                                   "1.26 Alpha off | 1.33 Deprecated off",
	WorkloadWithJob:                                      "1.36 Alpha off",
}

// kubeFeatureDependencies lists gates that may only be enabled together with
// the gates they depend on.
var kubeFeatureDependencies = map[featuregate.Feature][]featuregate.Feature{
	ClusterTrustBundleProjection:                        {ClusterTrustBundle},
	CompositePodGroup:                                   {GenericWorkload, TopologyAwareWorkloadScheduling},
	DRAAdminAccess:                                      {DynamicResourceAllocation},
	DRAConsumableCapacity:                               {DynamicResourceAllocation},
	DRADerivedAttributes:                                {DynamicResourceAllocation},
	DRADeviceBindingConditions:                          {DynamicResourceAllocation, DRAResourceClaimDeviceStatus},
	DRADeviceCompatibilityGroups:                        {DynamicResourceAllocation, DRAPartitionableDevices},
	DRADeviceTaintRules:                                 {DRADeviceTaints},
	DRADeviceTaints:                                     {DynamicResourceAllocation},
	DRAExtendedResource:                                 {DynamicResourceAllocation},
	DRAFractionalCapacityRange:                          {DRAConsumableCapacity},
	DRAListTypeAttributes:                               {DynamicResourceAllocation},
	DRANodeAllocatableResources:                         {DynamicResourceAllocation},
	DRAOptionalNodeOperations:                           {DynamicResourceAllocation, NodeDeclaredFeatures},
	DRAPartitionableDevices:                             {DynamicResourceAllocation},
	DRAPartitionableDevicesType:                         {DynamicResourceAllocation, DRAPartitionableDevices, DRAResourcePoolStatus},
	DRAPrioritizedList:                                  {DynamicResourceAllocation},
	DRAResourceClaimGranularStatusAuthorization:         {DynamicResourceAllocation, DRAResourceClaimDeviceStatus},
	DRAResourcePoolStatus:                               {DynamicResourceAllocation},
	DRASchedulerFilterTimeout:                           {DynamicResourceAllocation},
	DRAWorkloadResourceClaims:                           {DynamicResourceAllocation, GenericWorkload},
	DisableAllocatorDualWrite:                           {MultiCIDRServiceAllocator},
	EventedPLEG:                                         {PLEGOnDemandRelist},
	ExtendWebSocketsToKubelet:                           {NodeDeclaredFeatures},
	GracefulNodeShutdownBasedOnPodPriority:              {GracefulNodeShutdown},
	H2CContainerProbe:                                   {NodeDeclaredFeatures},
	ImageVolumeWithDigest:                               {ImageVolume},
	InPlacePodLevelResourcesVerticalScaling:             {InPlacePodVerticalScaling, PodLevelResources, NodeDeclaredFeatures},
	InPlacePodVerticalScalingExclusiveCPUs:              {InPlacePodVerticalScaling},
	InPlacePodVerticalScalingExclusiveMemory:            {InPlacePodVerticalScaling},
	InPlacePodVerticalScalingInitContainers:             {InPlacePodVerticalScaling, NodeDeclaredFeatures},
	InPlacePodVerticalScalingMemoryBackedVolumes:        {InPlacePodVerticalScaling, NodeDeclaredFeatures},
	InPlacePodVerticalScalingSchedulerPreemption:        {InPlacePodVerticalScaling},
	KubeletAllocatedPodsEndpoint:                        {InPlacePodVerticalScaling},
	MatchLabelKeysInPodTopologySpreadSelectorMerge:      {MatchLabelKeysInPodTopologySpread},
	NodeControllerLeaseCircuitBreaker:                   {featuregate.Feature(clientfeatures.AtomicFIFO)},
	PodGroupPreemptionPolicy:                            {GenericWorkload},
	PodLevelResourceManagers:                            {PodLevelResources},
	PodLevelResourcesFixDefaulting:                      {PodLevelResources},
	PodLevelResourcesFixKubeletQOSClass:                 {PodLevelResources},
	ProcMountType:                                       {UserNamespacesSupport},
	ResourceHealthStatus:                                {DynamicResourceAllocation},
	ResourceHealthStatusMessage:                         {ResourceHealthStatus},
	RestartAllContainersOnContainerExits:                {ContainerRestartRules, NodeDeclaredFeatures},
	ServiceAccountTokenNodeBinding:                      {ServiceAccountTokenNodeBindingValidation},
	StaleControllerConsistencyDaemonSet:                 {featuregate.Feature(clientfeatures.AtomicFIFO)},
	StaleControllerConsistencyHPA:                       {featuregate.Feature(clientfeatures.AtomicFIFO)},
	StaleControllerConsistencyJob:                       {featuregate.Feature(clientfeatures.AtomicFIFO)},
	StaleControllerConsistencyReplicaSet:                {featuregate.Feature(clientfeatures.AtomicFIFO)},
	StaleControllerConsistencyStatefulSet:               {featuregate.Feature(clientfeatures.AtomicFIFO)},
	TopologyAwareWorkloadScheduling:                     {GenericWorkload},
	UserNamespacesHostNetworkSupport:                    {UserNamespacesSupport, NodeDeclaredFeatures},
	WindowsGracefulNodeShutdown:                         {GracefulNodeShutdown},
	WorkloadWithJob:                                     {GenericWorkload},
	genericfeatures.DeclarativeValidationBeta:           {genericfeatures.DeclarativeValidation},
	genericfeatures.DeclarativeValidationTakeover:       {genericfeatures.DeclarativeValidation}, //nolint:staticcheck // upstream still registers the deprecated gate
	genericfeatures.StorageVersionAPI:                   {genericfeatures.APIServerIdentity},
	genericfeatures.UnknownVersionInteroperabilityProxy: {genericfeatures.APIServerIdentity},
}
