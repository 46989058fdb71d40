package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// EphemeralVolumeControllerOptions holds the ephemeral-volume-controller flags.
type EphemeralVolumeControllerOptions struct {
	*kcmconfig.EphemeralVolumeControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *EphemeralVolumeControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentEphemeralVolumeSyncs, "concurrent-ephemeralvolume-syncs", o.ConcurrentEphemeralVolumeSyncs,
		"How many ephemeral volume syncs run at the same time. More update ephemeral volumes faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *EphemeralVolumeControllerOptions) ApplyTo(cfg *kcmconfig.EphemeralVolumeControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentEphemeralVolumeSyncs = o.ConcurrentEphemeralVolumeSyncs
	return nil
}

// Validate requires at least one worker.
func (o *EphemeralVolumeControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-ephemeralvolume-syncs", o.ConcurrentEphemeralVolumeSyncs))
}
