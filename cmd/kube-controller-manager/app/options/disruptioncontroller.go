package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// DisruptionControllerOptions holds the disruption-controller flags.
type DisruptionControllerOptions struct {
	*kcmconfig.DisruptionControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *DisruptionControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentDisruptionSyncs, "concurrent-disruption-syncs", o.ConcurrentDisruptionSyncs,
		"How many pod disruption budgets are synced at the same time. More workers update PDBs faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *DisruptionControllerOptions) ApplyTo(cfg *kcmconfig.DisruptionControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentDisruptionSyncs = o.ConcurrentDisruptionSyncs
	return nil
}

// Validate accepts any value, as upstream does.
func (o *DisruptionControllerOptions) Validate() []error {
	return nil
}
