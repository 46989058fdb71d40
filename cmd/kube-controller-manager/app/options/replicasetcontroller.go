package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ReplicaSetControllerOptions holds the replicaset-controller flags.
type ReplicaSetControllerOptions struct {
	*kcmconfig.ReplicaSetControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *ReplicaSetControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentRSSyncs, "concurrent-replicaset-syncs", o.ConcurrentRSSyncs,
		"How many replica sets are synced at the same time. More workers manage replicas faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *ReplicaSetControllerOptions) ApplyTo(cfg *kcmconfig.ReplicaSetControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentRSSyncs = o.ConcurrentRSSyncs
	return nil
}

// Validate accepts any value: upstream runs no workers for zero or less.
func (o *ReplicaSetControllerOptions) Validate() []error {
	return nil
}
