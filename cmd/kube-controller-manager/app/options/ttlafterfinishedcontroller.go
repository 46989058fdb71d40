package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// TTLAfterFinishedControllerOptions holds the ttl-after-finished-controller flags.
type TTLAfterFinishedControllerOptions struct {
	*kcmconfig.TTLAfterFinishedControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *TTLAfterFinishedControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentTTLSyncs, "concurrent-ttl-after-finished-syncs", o.ConcurrentTTLSyncs,
		"How many ttl-after-finished-controller workers sync at the same time.")
}

// ApplyTo copies the options into cfg.
func (o *TTLAfterFinishedControllerOptions) ApplyTo(cfg *kcmconfig.TTLAfterFinishedControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentTTLSyncs = o.ConcurrentTTLSyncs
	return nil
}

// Validate accepts any value, as upstream does.
func (o *TTLAfterFinishedControllerOptions) Validate() []error {
	return nil
}
