package options

import (
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	basecompatibility "k8s.io/component-base/compatibility"
	baseversion "k8s.io/component-base/version"
)

// oldestEmulatedVersion is the lowest --emulated-version any kube binary of
// this release accepts.
var oldestEmulatedVersion = version.MajorMinor(1, 31)

// componentGlobalsRegistry ties the kube effective version to the
// process-wide feature gate. It is a process global, like the gate: every
// options instance shares it, and --feature-gates, --emulated-version and
// --min-compatibility-version write into it.
var componentGlobalsRegistry = basecompatibility.NewComponentGlobalsRegistry()

// ensureKubeComponentRegistered registers the kube component once.
func ensureKubeComponentRegistered(r basecompatibility.ComponentGlobalsRegistry) {
	if r.EffectiveVersionFor(basecompatibility.DefaultKubeComponent) != nil {
		return
	}
	runtime.Must(r.Register(basecompatibility.DefaultKubeComponent, newKubeEffectiveVersion(), utilfeature.DefaultMutableFeatureGate))
}

// newKubeEffectiveVersion derives the version from the linked-in build
// version; development builds without one use this release's default. The
// binary may emulate up to three minor versions back, never below 1.31.
func newKubeEffectiveVersion() basecompatibility.MutableEffectiveVersion {
	binary, err := version.Parse(baseversion.Get().String())
	fromBuild := err == nil && (binary.Major() != 0 || binary.Minor() != 0)
	if !fromBuild {
		binary = version.MustParse(baseversion.DefaultKubeBinaryVersion)
	}
	floor := binary.WithPatch(0).SubtractMinor(3)
	if floor.LessThan(oldestEmulatedVersion) {
		floor = oldestEmulatedVersion
	}
	return basecompatibility.NewEffectiveVersion(binary, fromBuild, floor, floor)
}
