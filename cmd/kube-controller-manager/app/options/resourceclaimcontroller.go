package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ResourceClaimControllerOptions holds the resourceclaim-controller flags.
type ResourceClaimControllerOptions struct {
	*kcmconfig.ResourceClaimControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *ResourceClaimControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-resourceclaim-syncs", o.ConcurrentSyncs,
		"How many ResourceClaim creations or deletions run at the same time. More react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *ResourceClaimControllerOptions) ApplyTo(cfg *kcmconfig.ResourceClaimControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentSyncs = o.ConcurrentSyncs
	return nil
}

// Validate requires at least one worker.
func (o *ResourceClaimControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-resourceclaim-syncs", o.ConcurrentSyncs))
}
