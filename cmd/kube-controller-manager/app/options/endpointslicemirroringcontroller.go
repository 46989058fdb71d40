package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// Bounds upstream enforces on the endpointslice-mirroring-controller flags.
const (
	mirroringMinConcurrentServiceEndpointSyncs = 1
	mirroringMaxConcurrentServiceEndpointSyncs = 50
	mirroringMinMaxEndpointsPerSubset          = 1
	mirroringMaxMaxEndpointsPerSubset          = 1000
)

// EndpointSliceMirroringControllerOptions holds the
// endpointslice-mirroring-controller flags.
type EndpointSliceMirroringControllerOptions struct {
	*kcmconfig.EndpointSliceMirroringControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *EndpointSliceMirroringControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.MirroringConcurrentServiceEndpointSyncs, "mirroring-concurrent-service-endpoint-syncs", o.MirroringConcurrentServiceEndpointSyncs,
		"How many service endpoint syncs the endpointslice-mirroring-controller runs at the same time. More update endpoint slices faster but use more CPU and network. Defaults to 5.")
	fs.Int32Var(&o.MirroringMaxEndpointsPerSubset, "mirroring-max-endpoints-per-subset", o.MirroringMaxEndpointsPerSubset,
		"The most endpoints the endpointslice-mirroring-controller puts in one EndpointSlice. More per slice means fewer but bigger slices. Defaults to 1000.")
	fs.DurationVar(&o.MirroringEndpointUpdatesBatchPeriod.Duration, "mirroring-endpointslice-updates-batch-period", o.MirroringEndpointUpdatesBatchPeriod.Duration,
		"How long the endpointslice-mirroring-controller holds back EndpointSlice changes so that later changes join the same update. Longer means slower endpoint programming but fewer endpoints revisions.")
}

// ApplyTo copies the options into cfg.
func (o *EndpointSliceMirroringControllerOptions) ApplyTo(cfg *kcmconfig.EndpointSliceMirroringControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.MirroringConcurrentServiceEndpointSyncs = o.MirroringConcurrentServiceEndpointSyncs
	cfg.MirroringMaxEndpointsPerSubset = o.MirroringMaxEndpointsPerSubset
	cfg.MirroringEndpointUpdatesBatchPeriod = o.MirroringEndpointUpdatesBatchPeriod
	return nil
}

// Validate keeps the worker count and subset size within upstream's bounds.
func (o *EndpointSliceMirroringControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(
		inRange("mirroring-concurrent-service-endpoint-syncs", o.MirroringConcurrentServiceEndpointSyncs, mirroringMinConcurrentServiceEndpointSyncs, mirroringMaxConcurrentServiceEndpointSyncs),
		inRange("mirroring-max-endpoints-per-subset", o.MirroringMaxEndpointsPerSubset, mirroringMinMaxEndpointsPerSubset, mirroringMaxMaxEndpointsPerSubset),
	)
}
