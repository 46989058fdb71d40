package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// CronJobControllerOptions holds the cronjob-controller flags.
type CronJobControllerOptions struct {
	*kcmconfig.CronJobControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *CronJobControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentCronJobSyncs, "concurrent-cron-job-syncs", o.ConcurrentCronJobSyncs,
		"How many cron jobs are synced at the same time. More workers react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *CronJobControllerOptions) ApplyTo(cfg *kcmconfig.CronJobControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentCronJobSyncs = o.ConcurrentCronJobSyncs
	return nil
}

// Validate requires at least one worker.
func (o *CronJobControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-cron-job-syncs", o.ConcurrentCronJobSyncs))
}
