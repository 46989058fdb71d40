package options

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

// atLeastOne reports a worker count flag below one.
func atLeastOne(flag string, v int32) error {
	if v < 1 {
		return fmt.Errorf("--%s must be greater than 0, got %d", flag, v)
	}
	return nil
}

// inRange reports a flag outside [lo, hi].
func inRange(flag string, v, lo, hi int32) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s must be between %d and %d, got %d", flag, lo, hi, v)
	}
	return nil
}

// collect drops nil errors.
func collect(errs ...error) []error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// negativeWorkerCounts rejects a negative value for any --concurrent-* or
// --mirroring-concurrent-* flag. Upstream silently runs no workers for some
// of them; a negative count is always a typo worth failing on.
func negativeWorkerCounts(fss *cliflag.NamedFlagSets) []error {
	if fss == nil {
		return nil
	}
	var errs []error
	for _, name := range fss.Order {
		fss.FlagSets[name].VisitAll(func(f *pflag.Flag) {
			if !strings.HasPrefix(f.Name, "concurrent") && !strings.HasPrefix(f.Name, "mirroring-concurrent") {
				return
			}
			if v, err := strconv.ParseInt(f.Value.String(), 10, 64); err == nil && v < 0 {
				errs = append(errs, fmt.Errorf("--%s must not be negative, got %d", f.Name, v))
			}
		})
	}
	return errs
}
