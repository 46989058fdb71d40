// Package features registers every feature gate kube-controller-manager
// knows into the process-wide gate k8s.io/apiserver/pkg/util/feature
// DefaultMutableFeatureGate, so --feature-gates accepts exactly what upstream
// accepts. Import it for its side effect before building flags.
package features

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	// The generic apiserver and zpages gates register themselves when this
	// package initialises; our dependency table refers to them.
	_ "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	metricsfeatures "k8s.io/component-base/metrics/features"
)

func init() {
	runtime.Must(Register(utilfeature.DefaultMutableFeatureGate))
	// client-go consults its own gate object; point it at ours so that
	// --feature-gates also drives client-go features.
	clientfeatures.ReplaceFeatureGates(&clientGates{gate: utilfeature.DefaultMutableFeatureGate})
}

// Register adds the client-go, Kubernetes, logging and metrics feature gates
// and the Kubernetes gate dependencies to gate. Adding the same specs twice is
// allowed, so calling it again is harmless.
func Register(gate featuregate.MutableVersionedFeatureGate) error {
	if err := clientfeatures.AddVersionedFeaturesToExistingFeatureGates(&clientGates{gate: gate}); err != nil {
		return fmt.Errorf("client-go feature gates: %w", err)
	}
	specs, err := KubeFeatureSpecs()
	if err != nil {
		return err
	}
	if err := gate.AddVersioned(specs); err != nil {
		return fmt.Errorf("kubernetes feature gates: %w", err)
	}
	deps := make(map[featuregate.Feature][]featuregate.Feature, len(kubeFeatureDependencies))
	for name, on := range kubeFeatureDependencies {
		// AddDependencies sorts the slices in place; keep our table intact.
		deps[name] = append([]featuregate.Feature(nil), on...)
	}
	if err := gate.AddDependencies(deps); err != nil {
		return fmt.Errorf("kubernetes feature gate dependencies: %w", err)
	}
	if err := logsapi.AddFeatureGates(gate); err != nil {
		return fmt.Errorf("logging feature gates: %w", err)
	}
	if err := metricsfeatures.AddFeatureGates(gate); err != nil {
		return fmt.Errorf("metrics feature gates: %w", err)
	}
	return nil
}

// KubeFeatureSpecs returns the Kubernetes-owned gates with their versioned
// specs, parsed from kubeFeatureHistory.
func KubeFeatureSpecs() (map[featuregate.Feature]featuregate.VersionedSpecs, error) {
	out := make(map[featuregate.Feature]featuregate.VersionedSpecs, len(kubeFeatureHistory))
	for name, history := range kubeFeatureHistory {
		specs, err := parseHistory(history)
		if err != nil {
			return nil, fmt.Errorf("feature gate %s: %w", name, err)
		}
		out[name] = specs
	}
	return out, nil
}

// stages maps a stage word to a spec carrying that stage; the stage type
// itself is unexported by component-base.
var stages = map[string]featuregate.FeatureSpec{
	"Alpha":      {PreRelease: featuregate.Alpha},
	"Beta":       {PreRelease: featuregate.Beta},
	"GA":         {PreRelease: featuregate.GA},
	"Deprecated": {PreRelease: featuregate.Deprecated},
}

// parseHistory reads the step notation described at kubeFeatureHistory.
func parseHistory(history string) (featuregate.VersionedSpecs, error) {
	var specs featuregate.VersionedSpecs
	for _, step := range strings.Split(history, "|") {
		words := strings.Fields(step)
		if len(words) < 3 {
			return nil, fmt.Errorf("step %q: want \"<version> <stage> <on|off>\"", step)
		}
		ver, err := version.Parse(words[0])
		if err != nil {
			return nil, fmt.Errorf("step %q: %w", step, err)
		}
		spec, ok := stages[words[1]]
		if !ok {
			return nil, fmt.Errorf("step %q: unknown stage %q", step, words[1])
		}
		spec.Version = ver
		switch words[2] {
		case "on":
			spec.Default = true
		case "off":
		default:
			return nil, fmt.Errorf("step %q: default must be on or off", step)
		}
		for _, extra := range words[3:] {
			switch {
			case extra == "locked":
				spec.LockToDefault = true
			case strings.HasPrefix(extra, "min="):
				minVer, err := version.Parse(strings.TrimPrefix(extra, "min="))
				if err != nil {
					return nil, fmt.Errorf("step %q: %w", step, err)
				}
				spec.MinCompatibilityVersion = minVer
			default:
				return nil, fmt.Errorf("step %q: unknown word %q", step, extra)
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// clientGates lets client-go register its gates into, and read them from, a
// component-base gate. client-go mirrors the component-base types to avoid an
// import cycle, so every field is translated here.
type clientGates struct {
	gate featuregate.MutableVersionedFeatureGate
}

var (
	_ clientfeatures.Gates             = &clientGates{}
	_ clientfeatures.VersionedRegistry = &clientGates{}
)

func (c *clientGates) Enabled(name clientfeatures.Feature) bool {
	return c.gate.Enabled(featuregate.Feature(name))
}

func (c *clientGates) AddVersioned(in map[clientfeatures.Feature]clientfeatures.VersionedSpecs) error {
	out := make(map[featuregate.Feature]featuregate.VersionedSpecs, len(in))
	for name, specs := range in {
		converted := make(featuregate.VersionedSpecs, 0, len(specs))
		for _, s := range specs {
			spec, err := fromClientSpec(s)
			if err != nil {
				return fmt.Errorf("client-go feature %s: %w", name, err)
			}
			converted = append(converted, spec)
		}
		out[featuregate.Feature(name)] = converted
	}
	return c.gate.AddVersioned(out)
}

// Set lets client-go's test helpers flip a client-go gate.
func (c *clientGates) Set(name clientfeatures.Feature, enabled bool) error {
	return c.gate.SetFromMap(map[string]bool{string(name): enabled})
}

func fromClientSpec(s clientfeatures.FeatureSpec) (featuregate.FeatureSpec, error) {
	out := featuregate.FeatureSpec{Version: s.Version, Default: s.Default, LockToDefault: s.LockToDefault}
	switch s.PreRelease {
	case clientfeatures.Alpha:
		out.PreRelease = featuregate.Alpha
	case clientfeatures.Beta:
		out.PreRelease = featuregate.Beta
	case clientfeatures.GA:
		out.PreRelease = featuregate.GA
	case clientfeatures.Deprecated:
		out.PreRelease = featuregate.Deprecated
	default:
		return out, fmt.Errorf("unknown stage %q", s.PreRelease)
	}
	return out, nil
}
