package app

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
)

// upstreamControllers reads the reference table of upstream's controllers
// (a copy kept with the options tests).
func upstreamControllers(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("options", "testdata", "kcm-v1.37-controllers.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "name\t") {
			continue
		}
		rows = append(rows, strings.Split(line, "\t"))
	}
	return rows
}

func TestDescriptorsMatchUpstream(t *testing.T) {
	rows := upstreamControllers(t)
	descs := NewControllerDescriptors()
	if len(descs) != len(rows) {
		t.Errorf("%d descriptors, upstream has %d controllers", len(descs), len(rows))
	}
	aliases := ControllerAliases()
	disabled := sets.New(ControllersDisabledByDefault()...)
	for _, r := range rows {
		name, alias, def := r[0], r[1], r[2]
		d, ok := descs[name]
		if !ok {
			t.Errorf("controller %s missing", name)
			continue
		}
		if alias != "" && aliases[alias] != name {
			t.Errorf("alias %s maps to %q, want %s", alias, aliases[alias], name)
		}
		if (def == "off") != disabled.Has(name) {
			t.Errorf("%s disabled by default = %v, upstream %s", name, disabled.Has(name), def)
		}
		gates := ""
		if len(r) > 3 {
			gates = r[3]
		}
		if got := strings.Join(d.RequiredFeatureGates(), ","); got != gates {
			t.Errorf("%s feature gates %q, want %q", name, got, gates)
		}
	}
}

// Every gate a descriptor names must be registered: an unknown gate counts
// as off, which would silently keep the controller from ever starting.
func TestRequiredFeatureGatesAreKnown(t *testing.T) {
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	for name, d := range NewControllerDescriptors() {
		for _, g := range d.RequiredFeatureGates() {
			if _, ok := known[featuregate.Feature(g)]; !ok {
				t.Errorf("%s requires unknown feature gate %q", name, g)
			}
		}
	}
}

func TestImplementedControllers(t *testing.T) {
	descs := NewControllerDescriptors()
	for _, name := range []string{names.DeploymentController, names.ReplicaSetController, names.ReplicationControllerController,
		names.ServiceAccountController, names.RootCACertificatePublisherController, names.NamespaceController,
		names.NodeLifecycleController, names.TaintEvictionController, names.GarbageCollectorController,
		names.JobController, names.TTLAfterFinishedController, names.PodGarbageCollectorController, names.CronJobController,
		names.EndpointSliceController, names.EndpointsController, names.CertificateSigningRequestApprovingController,
		names.CertificateSigningRequestCleanerController, names.ClusterRoleAggregationController, names.TTLController,
		names.CertificateSigningRequestSigningController, names.BootstrapSignerController, names.TokenCleanerController,
		names.LegacyServiceAccountTokenCleanerController, names.StatefulSetController,
		names.DisruptionController, names.ResourceQuotaController,
		names.DaemonSetController, names.EndpointSliceMirroringController,
		names.PersistentVolumeClaimProtectionController, names.PersistentVolumeProtectionController, names.EphemeralVolumeController,
		names.NodeIPAMController, names.ServiceCIDRController, names.VolumeAttributesClassProtectionController,
		names.HorizontalPodAutoscalerController, names.PersistentVolumeExpanderController,
		names.PodCertificateRequestCleanerController, names.PersistentVolumeAttachDetachController, names.PersistentVolumeBinderController,
		names.ResourceClaimController, names.DeviceTaintEvictionController,
		names.StorageVersionMigratorController, names.ValidatingAdmissionPolicyStatusController,
		names.KubeAPIServerServingClusterTrustBundlePublisherController, names.PodGroupProtectionController,
		names.StorageVersionGarbageCollectorController, names.ResourcePoolStatusRequestController,
		names.ServiceAccountTokenController, names.SELinuxWarningController} {
		if !descs[name].Implemented() {
			t.Errorf("%s has no init func", name)
		}
	}
	if !descs[names.ServiceAccountTokenController].requiresSpecialHandling {
		t.Error("the ServiceAccount token controller must start before the others")
	}
}
