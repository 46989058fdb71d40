package options

import (
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/sets"
	cliflag "k8s.io/component-base/cli/flag"
)

// Flag sections named after the controller reading them; the names are the
// canonical controller names, as upstream uses them.
const (
	sectionAttachDetach           = "persistentvolume-attach-detach-controller"
	sectionCSRSigning             = "certificatesigningrequest-signing-controller"
	sectionDeployment             = "deployment-controller"
	sectionDisruption             = "disruption-controller"
	sectionDeviceTaintEviction    = "device-taint-eviction-controller"
	sectionResourceClaim          = "resourceclaim-controller"
	sectionStatefulSet            = "statefulset-controller"
	sectionDaemonSet              = "daemonset-controller"
	sectionEndpoints              = "endpoints-controller"
	sectionEndpointSlice          = "endpointslice-controller"
	sectionEndpointSliceMirroring = "endpointslice-mirroring-controller"
	sectionEphemeralVolume        = "ephemeral-volume-controller"
	sectionGarbageCollector       = "garbage-collector-controller"
	sectionHPA                    = "horizontal-pod-autoscaler-controller"
	sectionJob                    = "job-controller"
	sectionCronJob                = "cronjob-controller"
	sectionLegacySATokenCleaner   = "legacy-serviceaccount-token-cleaner-controller"
	sectionNamespace              = "namespace-controller"
	sectionNodeIPAM               = "node-ipam-controller"
	sectionNodeLifecycle          = "node-lifecycle-controller"
	sectionPVBinder               = "persistentvolume-binder-controller"
	sectionPodGC                  = "pod-garbage-collector-controller"
	sectionReplicaSet             = "replicaset-controller"
	sectionReplicationController  = "replicationcontroller-controller"
	sectionResourceQuota          = "resourcequota-controller"
	sectionServiceAccount         = "serviceaccount-controller"
	sectionTTLAfterFinished       = "ttl-after-finished-controller"
	sectionVAPStatus              = "validatingadmissionpolicy-status-controller"
)

// NotYetUsedSuffix ends the usage of flags we accept and validate but whose
// controller does not exist yet.
const NotYetUsedSuffix = " (accepted, not yet used)"

// controllersReadingFlags are the controllers that exist and read their
// flags. Add a controller here when it lands so its flags lose the
// NotYetUsedSuffix.
var controllersReadingFlags = sets.New(
	sectionDeployment,
	sectionReplicaSet,
	sectionReplicationController,
	// --concurrent-serviceaccount-token-syncs, --root-ca-file and
	// --service-account-private-key-file live here.
	sectionServiceAccount,
	sectionNamespace,
	sectionNodeLifecycle,
	sectionGarbageCollector,
	sectionJob,
	sectionTTLAfterFinished,
	sectionPodGC,
	sectionCronJob,
	sectionEndpoints,
	sectionEndpointSlice,
	sectionCSRSigning,
	sectionLegacySATokenCleaner,
	sectionStatefulSet,
	sectionDisruption,
	sectionResourceQuota,
	sectionDaemonSet,
	sectionEndpointSliceMirroring,
	sectionEphemeralVolume,
	sectionNodeIPAM,
	sectionHPA,
	sectionAttachDetach,
	sectionPVBinder,
	sectionVAPStatus,
	sectionResourceClaim,
	sectionDeviceTaintEviction,
)

// controllerSections are the sections named after a controller.
var controllerSections = sets.New(
	sectionAttachDetach, sectionCSRSigning, sectionDeployment, sectionDisruption,
	sectionDeviceTaintEviction, sectionResourceClaim, sectionStatefulSet, sectionDaemonSet,
	sectionEndpoints, sectionEndpointSlice, sectionEndpointSliceMirroring, sectionEphemeralVolume,
	sectionGarbageCollector, sectionHPA, sectionJob, sectionCronJob, sectionLegacySATokenCleaner,
	sectionNamespace, sectionNodeIPAM, sectionNodeLifecycle, sectionPVBinder, sectionPodGC,
	sectionReplicaSet, sectionReplicationController, sectionResourceQuota, sectionServiceAccount,
	sectionTTLAfterFinished, sectionVAPStatus,
)

// genericFlagReaders lists generic flags that only some controllers read;
// they count as used once any of those controllers exists. Upstream's
// kube-controller-manager no longer runs the cloud route controller, so the
// route flags name the controllers that consult the cloud settings.
var genericFlagReaders = map[string][]string{
	"allocate-node-cidrs":          {sectionNodeIPAM},
	"cidr-allocator-type":          {sectionNodeIPAM},
	"cluster-cidr":                 {sectionNodeIPAM},
	"configure-cloud-routes":       {sectionNodeIPAM},
	"route-reconciliation-period":  {sectionNodeIPAM},
	"cloud-config":                 {sectionNodeIPAM, sectionPVBinder, sectionAttachDetach},
	"external-cloud-volume-plugin": {sectionNodeIPAM, sectionPVBinder, sectionAttachDetach},
	"cluster-name":                 {sectionPVBinder, sectionAttachDetach, sectionNodeIPAM},
}

// markNotYetUsed appends NotYetUsedSuffix to the usage of every flag no
// existing controller reads.
func markNotYetUsed(fss *cliflag.NamedFlagSets) {
	for name, fs := range fss.FlagSets {
		if !controllerSections.Has(name) || controllersReadingFlags.Has(name) {
			continue
		}
		fs.VisitAll(appendSuffix)
	}
	if fs, ok := fss.FlagSets["generic"]; ok {
		for flagName, readers := range genericFlagReaders {
			if !controllersReadingFlags.HasAny(readers...) {
				appendSuffix(fs.Lookup(flagName))
			}
		}
	}
}

func appendSuffix(f *pflag.Flag) {
	if f != nil && !strings.HasSuffix(f.Usage, NotYetUsedSuffix) {
		f.Usage += NotYetUsedSuffix
	}
}
