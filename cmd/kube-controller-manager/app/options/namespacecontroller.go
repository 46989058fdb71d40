package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// NamespaceControllerOptions holds the namespace-controller flags.
type NamespaceControllerOptions struct {
	*kcmconfig.NamespaceControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *NamespaceControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.DurationVar(&o.NamespaceSyncPeriod.Duration, "namespace-sync-period", o.NamespaceSyncPeriod.Duration,
		"How often namespace life-cycle updates are resynced.")
	fs.Int32Var(&o.ConcurrentNamespaceSyncs, "concurrent-namespace-syncs", o.ConcurrentNamespaceSyncs,
		"How many namespaces are synced at the same time. More terminate namespaces faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *NamespaceControllerOptions) ApplyTo(cfg *kcmconfig.NamespaceControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.NamespaceSyncPeriod = o.NamespaceSyncPeriod
	cfg.ConcurrentNamespaceSyncs = o.ConcurrentNamespaceSyncs
	return nil
}

// Validate accepts any value, as upstream does.
func (o *NamespaceControllerOptions) Validate() []error {
	return nil
}
