package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// SAControllerOptions holds the serviceaccount-controller flags.
type SAControllerOptions struct {
	*kcmconfig.SAControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *SAControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.StringVar(&o.ServiceAccountKeyFile, "service-account-private-key-file", o.ServiceAccountKeyFile,
		"Turns on legacy secret-based tokens: PEM file with the RSA or ECDSA private key that signs service account tokens.")
	fs.Int32Var(&o.ConcurrentSATokenSyncs, "concurrent-serviceaccount-token-syncs", o.ConcurrentSATokenSyncs,
		"How many service account tokens are synced at the same time. More generate tokens faster but use more CPU and network.")
	fs.StringVar(&o.RootCAFile, "root-ca-file", o.RootCAFile,
		"PEM CA bundle added to service account token secrets when set.")
}

// ApplyTo copies the options into cfg.
func (o *SAControllerOptions) ApplyTo(cfg *kcmconfig.SAControllerConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.SAControllerConfiguration
	return nil
}

// Validate accepts any value, as upstream does.
func (o *SAControllerOptions) Validate() []error {
	return nil
}
