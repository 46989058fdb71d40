package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// Bounds upstream enforces on the endpointslice-controller flags.
const (
	minConcurrentServiceEndpointSyncs = 1
	maxConcurrentServiceEndpointSyncs = 50
	minMaxEndpointsPerSlice           = 1
	maxMaxEndpointsPerSlice           = 1000
)

// EndpointSliceControllerOptions holds the endpointslice-controller flags.
type EndpointSliceControllerOptions struct {
	*kcmconfig.EndpointSliceControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *EndpointSliceControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentServiceEndpointSyncs, "concurrent-service-endpoint-syncs", o.ConcurrentServiceEndpointSyncs,
		"How many service endpoint syncs run at the same time. More update endpoint slices faster but use more CPU and network. Defaults to 5.")
	fs.Int32Var(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", o.MaxEndpointsPerSlice,
		"The most endpoints put in one EndpointSlice. More per slice means fewer but bigger slices. Defaults to 100.")
	fs.DurationVar(&o.EndpointUpdatesBatchPeriod.Duration, "endpointslice-updates-batch-period", o.EndpointUpdatesBatchPeriod.Duration,
		"How long pod changes are held back so that later changes join the same endpoint slice update. Longer means slower endpoint programming but fewer endpoints revisions.")
}

// ApplyTo copies the options into cfg.
func (o *EndpointSliceControllerOptions) ApplyTo(cfg *kcmconfig.EndpointSliceControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentServiceEndpointSyncs = o.ConcurrentServiceEndpointSyncs
	cfg.MaxEndpointsPerSlice = o.MaxEndpointsPerSlice
	cfg.EndpointUpdatesBatchPeriod = o.EndpointUpdatesBatchPeriod
	return nil
}

// Validate keeps the worker count and slice size within upstream's bounds.
func (o *EndpointSliceControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(
		inRange("concurrent-service-endpoint-syncs", o.ConcurrentServiceEndpointSyncs, minConcurrentServiceEndpointSyncs, maxConcurrentServiceEndpointSyncs),
		inRange("max-endpoints-per-slice", o.MaxEndpointsPerSlice, minMaxEndpointsPerSlice, maxMaxEndpointsPerSlice),
	)
}
