package app

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/options"
)

// The component metrics upstream publishes at start: build info, every
// known gate (ours included) and the effective version.
func TestRegisterComponentMetrics(t *testing.T) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		t.Fatal(err)
	}
	registerComponentMetrics((&config.Config{ComponentGlobalsRegistry: s.ComponentGlobalsRegistry}).Complete())
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, f := range families {
		for _, m := range f.GetMetric() {
			text.WriteString(f.GetName())
			for _, l := range m.GetLabel() {
				text.WriteString(" " + l.GetName() + "=\"" + l.GetValue() + "\"")
			}
			text.WriteString("\n")
		}
	}
	for _, want := range []string{
		`kubernetes_feature_enabled name="ControllerManagerReleaseLeaderElectionLockOnExit" stage="ALPHA"`,
		`kubernetes_build_info`, `version_info`,
		"apiserver_kube_aggregator_x509_missing_san_total", "apiserver_cel_compilation_duration_seconds",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("gathered metrics lack %s", want)
		}
	}
}
