package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// DaemonSetControllerOptions holds the daemonset-controller flags.
type DaemonSetControllerOptions struct {
	*kcmconfig.DaemonSetControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *DaemonSetControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentDaemonSetSyncs, "concurrent-daemonset-syncs", o.ConcurrentDaemonSetSyncs,
		"How many daemon sets are synced at the same time. More workers react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *DaemonSetControllerOptions) ApplyTo(cfg *kcmconfig.DaemonSetControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentDaemonSetSyncs = o.ConcurrentDaemonSetSyncs
	return nil
}

// Validate requires at least one worker.
func (o *DaemonSetControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-daemonset-syncs", o.ConcurrentDaemonSetSyncs))
}
