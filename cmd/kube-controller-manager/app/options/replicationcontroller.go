package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ReplicationControllerOptions holds the replicationcontroller-controller flags.
type ReplicationControllerOptions struct {
	*kcmconfig.ReplicationControllerConfiguration
}

// AddFlags binds the flags to fs. Upstream spells the flag
// concurrent_rc_syncs and relies on the command's word-separator
// normalisation; we register the normalised name, which accepts both.
func (o *ReplicationControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentRCSyncs, "concurrent-rc-syncs", o.ConcurrentRCSyncs,
		"How many replication controllers are synced at the same time. More workers manage replicas faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *ReplicationControllerOptions) ApplyTo(cfg *kcmconfig.ReplicationControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentRCSyncs = o.ConcurrentRCSyncs
	return nil
}

// Validate accepts any value: upstream runs no workers for zero or less.
func (o *ReplicationControllerOptions) Validate() []error {
	return nil
}
