package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// EndpointControllerOptions holds the endpoints-controller flags.
type EndpointControllerOptions struct {
	*kcmconfig.EndpointControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *EndpointControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentEndpointSyncs, "concurrent-endpoint-syncs", o.ConcurrentEndpointSyncs,
		"How many endpoints syncs run at the same time. More update endpoints faster but use more CPU and network.")
	fs.DurationVar(&o.EndpointUpdatesBatchPeriod.Duration, "endpoint-updates-batch-period", o.EndpointUpdatesBatchPeriod.Duration,
		"How long pod changes are held back so that later changes join the same endpoints update. Longer means slower endpoint programming but fewer endpoints revisions.")
}

// ApplyTo copies the options into cfg.
func (o *EndpointControllerOptions) ApplyTo(cfg *kcmconfig.EndpointControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentEndpointSyncs = o.ConcurrentEndpointSyncs
	cfg.EndpointUpdatesBatchPeriod = o.EndpointUpdatesBatchPeriod
	return nil
}

// Validate accepts any value, as upstream does.
func (o *EndpointControllerOptions) Validate() []error {
	return nil
}
