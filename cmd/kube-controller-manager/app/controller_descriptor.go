package app

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/controller-manager/controller"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
)

// Controller is what a constructor hands back to the manager.
type Controller = controller.Interface

// InitFunc builds a controller. It returns (nil, nil) when the controller
// decides not to run (for example a missing signing key), which is logged
// and skipped, not an error.
type InitFunc func(ctx context.Context, cc ControllerContext, name string) (Controller, error)

// ControllerDescriptor describes one controller of upstream's set.
type ControllerDescriptor struct {
	name                 string
	aliases              []string
	disabledByDefault    bool
	requiredFeatureGates []string
	// requiresSpecialHandling controllers are started outside the ordinary
	// loop (the ServiceAccount token controller starts first).
	requiresSpecialHandling bool
	// init is nil for controllers this build does not implement yet.
	init InitFunc
}

func (d *ControllerDescriptor) Name() string                   { return d.name }
func (d *ControllerDescriptor) Aliases() []string              { return d.aliases }
func (d *ControllerDescriptor) IsDisabledByDefault() bool      { return d.disabledByDefault }
func (d *ControllerDescriptor) Implemented() bool              { return d.init != nil }
func (d *ControllerDescriptor) RequiredFeatureGates() []string { return d.requiredFeatureGates }

// featureGatesEnabled reports whether every gate the controller needs is on.
// A gate this build does not know counts as off.
func (d *ControllerDescriptor) featureGatesEnabled(fg featuregate.FeatureGate) (bool, string) {
	known := map[featuregate.Feature]featuregate.FeatureSpec{}
	if mfg, ok := fg.(featuregate.MutableFeatureGate); ok {
		known = mfg.GetAll()
	}
	for _, g := range d.requiredFeatureGates {
		f := featuregate.Feature(g)
		if _, ok := known[f]; !ok || !fg.Enabled(f) {
			return false, g
		}
	}
	return true, ""
}

// controllerTable declares every controller of upstream v1.37.2, each in
// this one place: its alias, default state, the feature gates it needs and
// its init func (nil for those not implemented yet).
func controllerTable() []*ControllerDescriptor {
	return []*ControllerDescriptor{
		{
			name:              names.BootstrapSignerController,
			aliases:           []string{"bootstrapsigner"},
			disabledByDefault: true,
			init:              newBootstrapSignerController,
		},
		{
			name:    names.CertificateSigningRequestApprovingController,
			aliases: []string{"csrapproving"},
			init:    newCSRApprovingController,
		},
		{
			name:    names.CertificateSigningRequestCleanerController,
			aliases: []string{"csrcleaner"},
			init:    newCSRCleanerController,
		},
		{
			name:    names.CertificateSigningRequestSigningController,
			aliases: []string{"csrsigning"},
			init:    newCSRSigningController,
		},
		{
			name:    names.ClusterRoleAggregationController,
			aliases: []string{"clusterrole-aggregation"},
			init:    newClusterRoleAggregationController,
		},
		{
			name:    names.CronJobController,
			aliases: []string{"cronjob"},
			init:    newCronJobController,
		},
		{
			name:    names.DaemonSetController,
			aliases: []string{"daemonset"},
			init:    newDaemonSetController,
		},
		{
			name:    names.DeploymentController,
			aliases: []string{"deployment"},
			init:    newDeploymentController,
		},
		{
			name:                 names.DeviceTaintEvictionController,
			requiredFeatureGates: []string{"DynamicResourceAllocation", "DRADeviceTaints"},
			init:                 newDeviceTaintEvictionController,
		},
		{
			name:    names.DisruptionController,
			aliases: []string{"disruption"},
			init:    newDisruptionController,
		},
		{
			name:    names.EndpointsController,
			aliases: []string{"endpoint"},
			init:    newEndpointsController,
		},
		{
			name:    names.EndpointSliceController,
			aliases: []string{"endpointslice"},
			init:    newEndpointSliceController,
		},
		{
			name:    names.EndpointSliceMirroringController,
			aliases: []string{"endpointslicemirroring"},
			init:    newEndpointSliceMirroringController,
		},
		{
			name:    names.EphemeralVolumeController,
			aliases: []string{"ephemeral-volume"},
			init:    newEphemeralVolumeController,
		},
		{
			name:    names.GarbageCollectorController,
			aliases: []string{"garbagecollector"},
			init:    newGarbageCollectorController,
		},
		{
			name:    names.HorizontalPodAutoscalerController,
			aliases: []string{"horizontalpodautoscaling"},
			init:    newHorizontalPodAutoscalerController,
		},
		{
			name:    names.JobController,
			aliases: []string{"job"},
			init:    newJobController,
		},
		{
			name:                 names.KubeAPIServerServingClusterTrustBundlePublisherController,
			requiredFeatureGates: []string{"ClusterTrustBundle"},
			init:                 newKubeAPIServerServingCTBPublisher,
		},
		{
			name:    names.LegacyServiceAccountTokenCleanerController,
			aliases: []string{"legacy-service-account-token-cleaner"},
			init:    newLegacySATokenCleanerController,
		},
		{
			name:    names.NamespaceController,
			aliases: []string{"namespace"},
			init:    newNamespaceController,
		},
		{
			name:    names.NodeIPAMController,
			aliases: []string{"nodeipam"},
			init:    newNodeIPAMController,
		},
		{
			name:    names.NodeLifecycleController,
			aliases: []string{"nodelifecycle"},
			init:    newNodeLifecycleController,
		},
		{
			name:    names.PersistentVolumeAttachDetachController,
			aliases: []string{"attachdetach"},
			init:    newAttachDetachController,
		},
		{
			name:    names.PersistentVolumeBinderController,
			aliases: []string{"persistentvolume-binder"},
			init:    newPersistentVolumeBinderController,
		},
		{
			name:    names.PersistentVolumeExpanderController,
			aliases: []string{"persistentvolume-expander"},
			init:    newPersistentVolumeExpanderController,
		},
		{
			name:    names.PersistentVolumeProtectionController,
			aliases: []string{"pv-protection"},
			init:    newPVProtectionController,
		},
		{
			name:    names.PersistentVolumeClaimProtectionController,
			aliases: []string{"pvc-protection"},
			init:    newPVCProtectionController,
		},
		{
			name:    names.PodGarbageCollectorController,
			aliases: []string{"podgc"},
			init:    newPodGarbageCollectorController,
		},
		{
			name:                 names.PodCertificateRequestCleanerController,
			requiredFeatureGates: []string{"PodCertificateRequest"},
			init:                 newPodCertificateRequestCleanerController,
		},
		{
			name:                 names.PodGroupProtectionController,
			requiredFeatureGates: []string{"GenericWorkload"},
			init:                 newPodGroupProtectionController,
		},
		{
			name:    names.ReplicaSetController,
			aliases: []string{"replicaset"},
			init:    newReplicaSetController,
		},
		{
			name:    names.ReplicationControllerController,
			aliases: []string{"replicationcontroller"},
			init:    newReplicationController,
		},
		{
			name:                 names.ResourceClaimController,
			aliases:              []string{"resource-claim-controller"},
			requiredFeatureGates: []string{"DynamicResourceAllocation"},
			init:                 newResourceClaimController,
		},
		{
			name:                 names.ResourcePoolStatusRequestController,
			requiredFeatureGates: []string{"DRAResourcePoolStatus"},
			init:                 newResourcePoolStatusRequestController,
		},
		{
			name:    names.ResourceQuotaController,
			aliases: []string{"resourcequota"},
			init:    newResourceQuotaController,
		},
		{
			name:    names.RootCACertificatePublisherController,
			aliases: []string{"root-ca-cert-publisher"},
			init:    newRootCACertificatePublisherController,
		},
		{
			name:                 names.SELinuxWarningController,
			disabledByDefault:    true,
			requiredFeatureGates: []string{"SELinuxChangePolicy"},
			init:                 newSELinuxWarningController,
		},
		{
			name:                 names.ServiceCIDRController,
			requiredFeatureGates: []string{"MultiCIDRServiceAllocator"},
			init:                 newServiceCIDRController,
		},
		{
			name:    names.ServiceAccountController,
			aliases: []string{"serviceaccount"},
			init:    newServiceAccountController,
		},
		{
			name:                    names.ServiceAccountTokenController,
			aliases:                 []string{"serviceaccount-token"},
			requiresSpecialHandling: true,
			init:                    newServiceAccountTokenController,
		},
		{
			name:    names.StatefulSetController,
			aliases: []string{"statefulset"},
			init:    newStatefulSetController,
		},
		{
			name:    names.StorageVersionMigratorController,
			aliases: []string{"svm"},
			init:    newStorageVersionMigratorController,
		},
		{
			name:                 names.StorageVersionGarbageCollectorController,
			aliases:              []string{"storage-version-gc"},
			requiredFeatureGates: []string{"APIServerIdentity", "StorageVersionAPI"},
			init:                 newStorageVersionGarbageCollectorController,
		},
		{
			name:                 names.TaintEvictionController,
			requiredFeatureGates: []string{"SeparateTaintEvictionController"},
			init:                 newTaintEvictionController,
		},
		{
			name:              names.TokenCleanerController,
			aliases:           []string{"tokencleaner"},
			disabledByDefault: true,
			init:              newTokenCleanerController,
		},
		{
			name:    names.TTLAfterFinishedController,
			aliases: []string{"ttl-after-finished"},
			init:    newTTLAfterFinishedController,
		},
		{
			name:    names.TTLController,
			aliases: []string{"ttl"},
			init:    newTTLController,
		},
		{
			name: names.ValidatingAdmissionPolicyStatusController,
			init: newValidatingAdmissionPolicyStatusController,
		},
		{
			name:                 names.VolumeAttributesClassProtectionController,
			requiredFeatureGates: []string{"VolumeAttributesClass"},
			init:                 newVACProtectionController,
		},
	}
}

// NewControllerDescriptors returns the descriptors keyed by canonical name.
func NewControllerDescriptors() map[string]*ControllerDescriptor {
	out := map[string]*ControllerDescriptor{}
	for _, d := range controllerTable() {
		if _, dup := out[d.name]; dup {
			panic(fmt.Sprintf("controller %q listed twice", d.name))
		}
		out[d.name] = d
	}
	return out
}

// KnownControllers lists every canonical name --controllers accepts.
func KnownControllers() []string {
	return sets.List(sets.KeySet(NewControllerDescriptors()))
}

// ControllersDisabledByDefault lists the controllers "*" does not enable.
func ControllersDisabledByDefault() []string {
	var out []string
	for name, d := range NewControllerDescriptors() {
		if d.disabledByDefault {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ControllerAliases maps each legacy alias to its canonical name.
func ControllerAliases() map[string]string {
	out := map[string]string{}
	for name, d := range NewControllerDescriptors() {
		for _, a := range d.aliases {
			out[a] = name
		}
	}
	return out
}

func defaultFeatureGate() featuregate.FeatureGate { return utilfeature.DefaultFeatureGate }
