package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// DeploymentControllerOptions holds the deployment-controller flags.
type DeploymentControllerOptions struct {
	*kcmconfig.DeploymentControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *DeploymentControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentDeploymentSyncs, "concurrent-deployment-syncs", o.ConcurrentDeploymentSyncs,
		"How many deployments are synced at the same time. More workers react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *DeploymentControllerOptions) ApplyTo(cfg *kcmconfig.DeploymentControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentDeploymentSyncs = o.ConcurrentDeploymentSyncs
	return nil
}

// Validate accepts any value: upstream runs no workers for zero or less.
func (o *DeploymentControllerOptions) Validate() []error {
	return nil
}
