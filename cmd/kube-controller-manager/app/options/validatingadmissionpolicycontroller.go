package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// ValidatingAdmissionPolicyStatusControllerOptions holds the
// validatingadmissionpolicy-status-controller flags.
type ValidatingAdmissionPolicyStatusControllerOptions struct {
	*kcmconfig.ValidatingAdmissionPolicyStatusControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *ValidatingAdmissionPolicyStatusControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentPolicySyncs, "concurrent-validating-admission-policy-status-syncs", o.ConcurrentPolicySyncs,
		"How many ValidatingAdmissionPolicyStatusController workers sync at the same time.")
}

// ApplyTo copies the options into cfg.
func (o *ValidatingAdmissionPolicyStatusControllerOptions) ApplyTo(cfg *kcmconfig.ValidatingAdmissionPolicyStatusControllerConfiguration) error {
	if o == nil {
		return nil
	}
	cfg.ConcurrentPolicySyncs = o.ConcurrentPolicySyncs
	return nil
}

// Validate requires at least one worker. Upstream defines this check but
// never calls it; we apply it.
func (o *ValidatingAdmissionPolicyStatusControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-validating-admission-policy-status-syncs", o.ConcurrentPolicySyncs))
}
