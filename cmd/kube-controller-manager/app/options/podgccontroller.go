package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// PodGCControllerOptions holds the pod-garbage-collector-controller flags.
type PodGCControllerOptions struct {
	*kcmconfig.PodGCControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *PodGCControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", o.TerminatedPodGCThreshold,
		"How many terminated pods may exist before the terminated pod garbage collector starts deleting them. Zero or less turns that collector off.")
}

// ApplyTo copies the options into cfg.
func (o *PodGCControllerOptions) ApplyTo(cfg *kcmconfig.PodGCControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.TerminatedPodGCThreshold = o.TerminatedPodGCThreshold
	return nil
}

// Validate accepts any value: zero or less switches the collector off.
func (o *PodGCControllerOptions) Validate() []error {
	return nil
}
