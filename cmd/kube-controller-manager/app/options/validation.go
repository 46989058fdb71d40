package options

import "fmt"

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
