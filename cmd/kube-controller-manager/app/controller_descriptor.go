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

// controllerTable lists every controller of upstream v1.37.2 with its alias,
// default state and the feature gates it needs; initFuncs fills in the ones
// implemented here.
func controllerTable() []*ControllerDescriptor {
	return []*ControllerDescriptor{
		{name: names.BootstrapSignerController, aliases: []string{"bootstrapsigner"}, disabledByDefault: true},
		{name: names.CertificateSigningRequestApprovingController, aliases: []string{"csrapproving"}},
		{name: names.CertificateSigningRequestCleanerController, aliases: []string{"csrcleaner"}},
		{name: names.CertificateSigningRequestSigningController, aliases: []string{"csrsigning"}},
		{name: names.ClusterRoleAggregationController, aliases: []string{"clusterrole-aggregation"}},
		{name: names.CronJobController, aliases: []string{"cronjob"}},
		{name: names.DaemonSetController, aliases: []string{"daemonset"}},
		{name: names.DeploymentController, aliases: []string{"deployment"}},
		{name: names.DeviceTaintEvictionController, requiredFeatureGates: []string{"DynamicResourceAllocation", "DRADeviceTaints"}},
		{name: names.DisruptionController, aliases: []string{"disruption"}},
		{name: names.EndpointsController, aliases: []string{"endpoint"}},
		{name: names.EndpointSliceController, aliases: []string{"endpointslice"}},
		{name: names.EndpointSliceMirroringController, aliases: []string{"endpointslicemirroring"}},
		{name: names.EphemeralVolumeController, aliases: []string{"ephemeral-volume"}},
		{name: names.GarbageCollectorController, aliases: []string{"garbagecollector"}},
		{name: names.HorizontalPodAutoscalerController, aliases: []string{"horizontalpodautoscaling"}},
		{name: names.JobController, aliases: []string{"job"}},
		{name: names.KubeAPIServerServingClusterTrustBundlePublisherController, requiredFeatureGates: []string{"ClusterTrustBundle"}},
		{name: names.LegacyServiceAccountTokenCleanerController, aliases: []string{"legacy-service-account-token-cleaner"}},
		{name: names.NamespaceController, aliases: []string{"namespace"}},
		{name: names.NodeIPAMController, aliases: []string{"nodeipam"}},
		{name: names.NodeLifecycleController, aliases: []string{"nodelifecycle"}},
		{name: names.PersistentVolumeAttachDetachController, aliases: []string{"attachdetach"}},
		{name: names.PersistentVolumeBinderController, aliases: []string{"persistentvolume-binder"}},
		{name: names.PersistentVolumeExpanderController, aliases: []string{"persistentvolume-expander"}},
		{name: names.PersistentVolumeProtectionController, aliases: []string{"pv-protection"}},
		{name: names.PersistentVolumeClaimProtectionController, aliases: []string{"pvc-protection"}},
		{name: names.PodGarbageCollectorController, aliases: []string{"podgc"}},
		{name: names.PodCertificateRequestCleanerController, requiredFeatureGates: []string{"PodCertificateRequest"}},
		{name: names.PodGroupProtectionController, requiredFeatureGates: []string{"GenericWorkload"}},
		{name: names.ReplicaSetController, aliases: []string{"replicaset"}},
		{name: names.ReplicationControllerController, aliases: []string{"replicationcontroller"}},
		{name: names.ResourceClaimController, aliases: []string{"resource-claim-controller"}, requiredFeatureGates: []string{"DynamicResourceAllocation"}},
		{name: names.ResourcePoolStatusRequestController, requiredFeatureGates: []string{"DRAResourcePoolStatus"}},
		{name: names.ResourceQuotaController, aliases: []string{"resourcequota"}},
		{name: names.RootCACertificatePublisherController, aliases: []string{"root-ca-cert-publisher"}},
		{name: names.SELinuxWarningController, disabledByDefault: true, requiredFeatureGates: []string{"SELinuxChangePolicy"}},
		{name: names.ServiceCIDRController, requiredFeatureGates: []string{"MultiCIDRServiceAllocator"}},
		{name: names.ServiceAccountController, aliases: []string{"serviceaccount"}},
		{name: names.ServiceAccountTokenController, aliases: []string{"serviceaccount-token"}},
		{name: names.StatefulSetController, aliases: []string{"statefulset"}},
		{name: names.StorageVersionMigratorController, aliases: []string{"svm"}},
		{name: names.StorageVersionGarbageCollectorController, aliases: []string{"storage-version-gc"}, requiredFeatureGates: []string{"genericAPIServerIdentity", "genericStorageVersionAPI"}},
		{name: names.TaintEvictionController, requiredFeatureGates: []string{"SeparateTaintEvictionController"}},
		{name: names.TokenCleanerController, aliases: []string{"tokencleaner"}, disabledByDefault: true},
		{name: names.TTLAfterFinishedController, aliases: []string{"ttl-after-finished"}},
		{name: names.TTLController, aliases: []string{"ttl"}},
		{name: names.ValidatingAdmissionPolicyStatusController},
		{name: names.VolumeAttributesClassProtectionController, requiredFeatureGates: []string{"VolumeAttributesClass"}}}
}

// NewControllerDescriptors returns the descriptors keyed by canonical name.
func NewControllerDescriptors() map[string]*ControllerDescriptor {
	inits := initFuncs()
	out := map[string]*ControllerDescriptor{}
	for _, d := range controllerTable() {
		if _, dup := out[d.name]; dup {
			panic(fmt.Sprintf("controller %q listed twice", d.name))
		}
		d.init = inits[d.name]
		if d.name == names.ServiceAccountTokenController {
			d.requiresSpecialHandling = true
		}
		out[d.name] = d
	}
	for name := range inits {
		if _, ok := out[name]; !ok {
			panic(fmt.Sprintf("init func for unknown controller %q", name))
		}
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
