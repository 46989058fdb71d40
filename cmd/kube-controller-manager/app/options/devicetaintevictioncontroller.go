package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// DeviceTaintEvictionControllerOptions holds the device-taint-eviction-controller flags.
type DeviceTaintEvictionControllerOptions struct {
	*kcmconfig.DeviceTaintEvictionControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *DeviceTaintEvictionControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentSyncs, "concurrent-device-taint-eviction-syncs", o.ConcurrentSyncs,
		"How many operations (pod evictions, DeviceTaintRule status updates) run at the same time. More react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *DeviceTaintEvictionControllerOptions) ApplyTo(cfg *kcmconfig.DeviceTaintEvictionControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentSyncs = o.ConcurrentSyncs
	return nil
}

// Validate requires at least one worker.
func (o *DeviceTaintEvictionControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-device-taint-eviction-syncs", o.ConcurrentSyncs))
}
