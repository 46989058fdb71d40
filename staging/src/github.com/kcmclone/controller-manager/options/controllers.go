package options

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
)

// IsControllerEnabled reports whether --controllers turns name on. "name"
// enables and "-name" disables it; "*" enables every controller not in
// disabledByDefaultControllers. The first entry that names the controller
// wins; without one, only "*" can enable it.
func IsControllerEnabled(name string, disabledByDefaultControllers sets.Set[string], controllers []string) bool {
	star := false
	for _, c := range controllers {
		switch c {
		case name:
			return true
		case "-" + name:
			return false
		case "*":
			star = true
		}
	}
	return star && !disabledByDefaultControllers.Has(name)
}

// CanonicalControllers rewrites every entry of controllers that uses a
// legacy alias to the canonical name, keeping a leading "-".
func CanonicalControllers(controllers []string, controllerAliases map[string]string) []string {
	if controllers == nil {
		return nil
	}
	out := make([]string, len(controllers))
	for i, entry := range controllers {
		name, disable := strings.CutPrefix(entry, "-")
		if canonical, ok := controllerAliases[name]; ok {
			name = canonical
		}
		if disable {
			name = "-" + name
		}
		out[i] = name
	}
	return out
}

// ValidateControllers checks that each --controllers entry is "*", a known
// controller name or alias, or one of those prefixed with "-". All unknown
// entries are reported in one error that lists the valid names.
func ValidateControllers(controllers, allControllers []string, controllerAliases map[string]string) error {
	known := sets.New(allControllers...)
	var unknown []string
	for _, entry := range controllers {
		if entry == "*" {
			continue
		}
		name := strings.TrimPrefix(entry, "-")
		if canonical, ok := controllerAliases[name]; ok {
			name = canonical
		}
		if !known.Has(name) {
			unknown = append(unknown, fmt.Sprintf("%q", strings.TrimPrefix(entry, "-")))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	valid := append([]string(nil), allControllers...)
	sort.Strings(valid)
	noun := "controller"
	if len(unknown) > 1 {
		noun = "controllers"
	}
	return fmt.Errorf("--controllers: unknown %s %s; use \"*\", a name, or \"-name\" to disable it; names: %s (legacy aliases are also accepted)",
		noun, strings.Join(unknown, ", "), strings.Join(valid, ", "))
}
