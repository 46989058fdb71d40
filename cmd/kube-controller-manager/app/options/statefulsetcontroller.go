package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// StatefulSetControllerOptions holds the statefulset-controller flags.
type StatefulSetControllerOptions struct {
	*kcmconfig.StatefulSetControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *StatefulSetControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentStatefulSetSyncs, "concurrent-statefulset-syncs", o.ConcurrentStatefulSetSyncs,
		"How many stateful sets are synced at the same time. More workers react faster but use more CPU and network.")
}

// ApplyTo copies the options into cfg.
func (o *StatefulSetControllerOptions) ApplyTo(cfg *kcmconfig.StatefulSetControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentStatefulSetSyncs = o.ConcurrentStatefulSetSyncs
	return nil
}

// Validate requires at least one worker.
func (o *StatefulSetControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-statefulset-syncs", o.ConcurrentStatefulSetSyncs))
}
