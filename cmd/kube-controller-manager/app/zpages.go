package app

import (
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/statusz"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	zpagesfeatures "k8s.io/component-base/zpages/features"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
)

// installZPages serves /flagz and /statusz when their gates are on (beta,
// on by default), behind the same authorization as /metrics. Call it after
// every other path is installed: /statusz lists the paths served.
func installZPages(m *mux.PathRecorderMux, c *config.CompletedConfig) {
	if m == nil {
		return
	}
	if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentFlagz) && c.Flagz != nil {
		flagz.Install(m, componentName, c.Flagz)
	}
	if utilfeature.DefaultFeatureGate.Enabled(zpagesfeatures.ComponentStatusz) && c.ComponentGlobalsRegistry != nil {
		statusz.Install(m, componentName, statusz.NewRegistry(
			c.ComponentGlobalsRegistry.EffectiveVersionFor(basecompatibility.DefaultKubeComponent),
			statusz.WithListedPaths(m.ListedPaths()),
		))
	}
}
