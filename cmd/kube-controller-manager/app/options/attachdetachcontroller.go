package options

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// AttachDetachControllerOptions holds the persistentvolume-attach-detach-controller flags.
type AttachDetachControllerOptions struct {
	*kcmconfig.AttachDetachControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *AttachDetachControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.BoolVar(&o.DisableAttachDetachReconcilerSync, "disable-attach-detach-reconcile-sync", false,
		"Turn off the attach/detach reconciler's sync. Volumes may then no longer match pods; use with care.")
	fs.DurationVar(&o.ReconcilerSyncLoopPeriod.Duration, "attach-detach-reconcile-sync-period", o.ReconcilerSyncLoopPeriod.Duration,
		"How long the attach/detach reconciler waits between syncs. Must be more than one second; raising it from the default may leave volumes not matching pods.")
	fs.BoolVar(&o.DisableForceDetachOnTimeout, "disable-force-detach-on-timeout", false,
		"Never force-detach volumes because of the maximum unmount time or the node status. When set, recovering from a node failure needs the non-graceful node shutdown feature. See https://k8s.io/docs/storage-disable-force-detach-on-timeout/.")
}

// ApplyTo copies the options into cfg.
func (o *AttachDetachControllerOptions) ApplyTo(cfg *kcmconfig.AttachDetachControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.DisableAttachDetachReconcilerSync = o.DisableAttachDetachReconcilerSync
	cfg.ReconcilerSyncLoopPeriod = o.ReconcilerSyncLoopPeriod
	cfg.DisableForceDetachOnTimeout = o.DisableForceDetachOnTimeout
	return nil
}

// Validate requires a sync period of at least one second.
func (o *AttachDetachControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	if o.ReconcilerSyncLoopPeriod.Duration < time.Second {
		return []error{fmt.Errorf("--attach-detach-reconcile-sync-period must be at least 1s, got %s", o.ReconcilerSyncLoopPeriod.Duration)}
	}
	return nil
}
