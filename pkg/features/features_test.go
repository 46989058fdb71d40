package features

import (
	"strings"
	"testing"

	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
)

func TestKubeFeatureSpecsParse(t *testing.T) {
	specs, err := KubeFeatureSpecs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != len(kubeFeatureHistory) {
		t.Fatalf("parsed %d gates, want %d", len(specs), len(kubeFeatureHistory))
	}
	for name := range kubeFeatureDependencies {
		if _, ok := specs[name]; !ok && !isGeneric(name) {
			t.Errorf("dependency table names unknown gate %s", name)
		}
	}
}

func isGeneric(name featuregate.Feature) bool {
	_, ok := utilfeature.DefaultMutableFeatureGate.GetAll()[name]
	return ok
}

func TestParseHistoryErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"1.30 Alpha",
		"x.y Alpha off",
		"1.30 Gamma off",
		"1.30 Alpha maybe",
		"1.30 Alpha off sticky",
		"1.30 Beta on min=z",
	} {
		if _, err := parseHistory(bad); err == nil {
			t.Errorf("parseHistory(%q): want error", bad)
		}
	}
	specs, err := parseHistory("1.30 Beta off | 1.30 Beta on min=1.30 | 1.33 GA on locked")
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[1].MinCompatibilityVersion.String() != "1.30" || !specs[2].LockToDefault || specs[2].PreRelease != featuregate.GA {
		t.Errorf("unexpected specs %+v", specs)
	}
}

// The defaults below are the effective values at emulation version 1.37.
func TestDefaultsAt137(t *testing.T) {
	gate := utilfeature.DefaultFeatureGate
	all := gate.(featuregate.MutableVersionedFeatureGate).GetAll()
	cases := []struct {
		name    featuregate.Feature
		enabled bool
		stage   featuregate.FeatureSpec
		locked  bool
	}{
		{DynamicResourceAllocation, true, featuregate.FeatureSpec{PreRelease: featuregate.GA}, true},
		{ClusterTrustBundle, true, featuregate.FeatureSpec{PreRelease: featuregate.GA}, false},
		{CSIVolumeHealth, false, featuregate.FeatureSpec{PreRelease: featuregate.Alpha}, false},
		{AllowDNSOnlyNodeCSR, false, featuregate.FeatureSpec{PreRelease: featuregate.Deprecated}, false},
		{GenericWorkload, false, featuregate.FeatureSpec{PreRelease: featuregate.Beta}, false},
		{SELinuxChangePolicy, true, featuregate.FeatureSpec{PreRelease: featuregate.GA}, true},
		{DRAResourcePoolStatus, false, featuregate.FeatureSpec{PreRelease: featuregate.Alpha}, false},
		{ControllerManagerReleaseLeaderElectionLockOnExit, false, featuregate.FeatureSpec{PreRelease: featuregate.Alpha}, false},
	}
	for _, tc := range cases {
		spec, ok := all[tc.name]
		if !ok {
			t.Errorf("%s not registered", tc.name)
			continue
		}
		if got := gate.Enabled(tc.name); got != tc.enabled {
			t.Errorf("%s enabled=%v, want %v", tc.name, got, tc.enabled)
		}
		if spec.PreRelease != tc.stage.PreRelease || spec.LockToDefault != tc.locked {
			t.Errorf("%s: stage %s locked %v, want %s locked %v", tc.name, spec.PreRelease, spec.LockToDefault, tc.stage.PreRelease, tc.locked)
		}
	}
}

func TestOtherGateFamiliesRegistered(t *testing.T) {
	all := utilfeature.DefaultMutableFeatureGate.GetAll()
	for _, name := range []featuregate.Feature{
		genericfeatures.APIServerIdentity,
		featuregate.Feature(clientfeatures.WatchListClient),
		featuregate.Feature(clientfeatures.AtomicFIFO),
		logsapi.LoggingBetaOptions,
		logsapi.ContextualLogging,
		metricsfeatures.NativeHistograms,
		CRDValidationRatcheting,
		CloudControllerManagerWebhook,
		"ComponentFlagz",
	} {
		if _, ok := all[name]; !ok {
			t.Errorf("%s not registered", name)
		}
	}
}

func TestSetRejectsUnknownAndLocked(t *testing.T) {
	// A failed Set leaves its input behind, so each case gets a fresh copy.
	fresh := utilfeature.DefaultMutableFeatureGate.DeepCopy
	if err := fresh().Set("NoSuchGate=true"); err == nil || !strings.Contains(err.Error(), "unrecognized feature gate") {
		t.Errorf("unknown gate: got %v", err)
	}
	if err := fresh().Set(string(DynamicResourceAllocation) + "=false"); err == nil {
		t.Errorf("locked gate: want error")
	}
	if err := fresh().Set(string(CSIVolumeHealth) + "=maybe"); err == nil {
		t.Errorf("bad value: want error")
	}
	if err := fresh().Set(string(CSIVolumeHealth) + "=true"); err != nil {
		t.Errorf("alpha gate: %v", err)
	}
}

func TestRegisterIsIdempotent(t *testing.T) {
	gate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := Register(gate); err != nil {
		t.Fatal(err)
	}
}

func TestClientGoReadsOurGate(t *testing.T) {
	want := utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(clientfeatures.WatchListClient))
	if got := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient); got != want {
		t.Errorf("client-go sees WatchListClient=%v, our gate says %v", got, want)
	}
}
