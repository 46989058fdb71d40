package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ResourceQuotaControllerOptions holds the resourcequota-controller flags.
type ResourceQuotaControllerOptions struct {
	*kcmconfig.ResourceQuotaControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *ResourceQuotaControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.DurationVar(&o.ResourceQuotaSyncPeriod.Duration, "resource-quota-sync-period", o.ResourceQuotaSyncPeriod.Duration,
		"How often quota usage is recomputed across the system.")
	fs.Int32Var(&o.ConcurrentResourceQuotaSyncs, "concurrent-resource-quota-syncs", o.ConcurrentResourceQuotaSyncs,
		"How many resource quotas are synced at the same time. More manage quota faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *ResourceQuotaControllerOptions) ApplyTo(cfg *kcmconfig.ResourceQuotaControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ResourceQuotaSyncPeriod = o.ResourceQuotaSyncPeriod
	cfg.ConcurrentResourceQuotaSyncs = o.ConcurrentResourceQuotaSyncs
	return nil
}

// Validate accepts any value, as upstream does.
func (o *ResourceQuotaControllerOptions) Validate() []error {
	return nil
}
