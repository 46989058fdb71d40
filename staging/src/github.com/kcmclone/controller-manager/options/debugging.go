package options

import (
	"github.com/spf13/pflag"
	componentbaseconfig "k8s.io/component-base/config"
)

// DebuggingOptions holds the profiling flags.
type DebuggingOptions struct {
	*componentbaseconfig.DebuggingConfiguration
}

// RecommendedDebuggingOptions turns profiling on, as every kube binary does.
func RecommendedDebuggingOptions() *DebuggingOptions {
	return &DebuggingOptions{
		DebuggingConfiguration: &componentbaseconfig.DebuggingConfiguration{EnableProfiling: true},
	}
}

// AddFlags binds --profiling and --contention-profiling.
func (o *DebuggingOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.BoolVar(&o.EnableProfiling, "profiling", o.EnableProfiling,
		"Serve profiling data at host:port/debug/pprof/")
	fs.BoolVar(&o.EnableContentionProfiling, "contention-profiling", o.EnableContentionProfiling,
		"Also collect block (contention) profiles when --profiling is on")
}

// ApplyTo copies the options into cfg.
func (o *DebuggingOptions) ApplyTo(cfg *componentbaseconfig.DebuggingConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.EnableProfiling = o.EnableProfiling
	cfg.EnableContentionProfiling = o.EnableContentionProfiling
	return nil
}

// Validate accepts every combination, as upstream does.
func (o *DebuggingOptions) Validate() []error {
	return nil
}
