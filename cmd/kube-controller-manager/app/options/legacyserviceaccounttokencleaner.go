package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// LegacySATokenCleanerOptions holds the
// legacy-serviceaccount-token-cleaner-controller flags.
type LegacySATokenCleanerOptions struct {
	*kcmconfig.LegacySATokenCleanerConfiguration
}

// AddFlags binds the flags to fs.
func (o *LegacySATokenCleanerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.DurationVar(&o.CleanUpPeriod.Duration, "legacy-service-account-token-clean-up-period", o.CleanUpPeriod.Duration,
		"How long a legacy service account token must go unused before it may be deleted.")
}

// ApplyTo copies the options into cfg.
func (o *LegacySATokenCleanerOptions) ApplyTo(cfg *kcmconfig.LegacySATokenCleanerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.CleanUpPeriod = o.CleanUpPeriod
	return nil
}

// Validate accepts any value, as upstream does.
func (o *LegacySATokenCleanerOptions) Validate() []error {
	return nil
}
