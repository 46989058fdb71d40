package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// GarbageCollectorControllerOptions holds the garbage-collector-controller flags.
type GarbageCollectorControllerOptions struct {
	*kcmconfig.GarbageCollectorControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *GarbageCollectorControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentGCSyncs, "concurrent-gc-syncs", o.ConcurrentGCSyncs,
		"How many garbage collector workers sync at the same time.")
	fs.BoolVar(&o.EnableGarbageCollector, "enable-garbage-collector", o.EnableGarbageCollector,
		"Run the generic garbage collector. Must match the kube-apiserver flag of the same name.")
}

// ApplyTo copies the options into cfg. GCIgnoredResources has no flag.
func (o *GarbageCollectorControllerOptions) ApplyTo(cfg *kcmconfig.GarbageCollectorControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentGCSyncs = o.ConcurrentGCSyncs
	cfg.EnableGarbageCollector = o.EnableGarbageCollector
	cfg.GCIgnoredResources = append([]kcmconfig.GroupResource(nil), o.GCIgnoredResources...)
	return nil
}

// Validate accepts any value, as upstream does.
func (o *GarbageCollectorControllerOptions) Validate() []error {
	return nil
}
