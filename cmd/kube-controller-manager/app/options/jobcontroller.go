package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// JobControllerOptions holds the job-controller flags.
type JobControllerOptions struct {
	*kcmconfig.JobControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *JobControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentJobSyncs, "concurrent-job-syncs", o.ConcurrentJobSyncs,
		"How many jobs are synced at the same time. More workers react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *JobControllerOptions) ApplyTo(cfg *kcmconfig.JobControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentJobSyncs = o.ConcurrentJobSyncs
	return nil
}

// Validate requires at least one worker.
func (o *JobControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-job-syncs", o.ConcurrentJobSyncs))
}
