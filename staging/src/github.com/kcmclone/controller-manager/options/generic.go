// Package options holds the command-line options every controller manager
// shares: client connection, leader election and migration, the controller
// list, resync and start pacing, and debugging.
package options

import (
	"fmt"
	"math"
	"strings"

	cliflag "k8s.io/component-base/cli/flag"
	cboptions "k8s.io/component-base/config/options"

	"github.com/kcmclone/controller-manager/config"
)

// GenericControllerManagerConfigurationOptions holds the generic options.
// The embedded configuration is the one flags write into.
type GenericControllerManagerConfigurationOptions struct {
	*config.GenericControllerManagerConfiguration
	Debugging *DebuggingOptions
	// LeaderMigration nil means migration is off.
	LeaderMigration *LeaderMigrationOptions
}

// NewGenericControllerManagerConfigurationOptions binds options to cfg,
// whose current values become the flag defaults.
func NewGenericControllerManagerConfigurationOptions(cfg *config.GenericControllerManagerConfiguration) *GenericControllerManagerConfigurationOptions {
	debugging := RecommendedDebuggingOptions()
	debugging.EnableProfiling = cfg.Debugging.EnableProfiling
	debugging.EnableContentionProfiling = cfg.Debugging.EnableContentionProfiling
	return &GenericControllerManagerConfigurationOptions{
		GenericControllerManagerConfiguration: cfg,
		Debugging:                             debugging,
		LeaderMigration:                       DefaultLeaderMigrationOptions(),
	}
}

// AddFlags adds the "debugging", "leader-migration" and "generic" sections.
func (o *GenericControllerManagerConfigurationOptions) AddFlags(fss *cliflag.NamedFlagSets, allControllers, disabledByDefaultControllers []string, controllerAliases map[string]string) {
	if o == nil {
		return
	}
	o.Debugging.AddFlags(fss.FlagSet("debugging"))
	o.LeaderMigration.AddFlags(fss.FlagSet("leader-migration"))

	fs := fss.FlagSet("generic")
	fs.DurationVar(&o.MinResyncPeriod.Duration, "min-resync-period", o.MinResyncPeriod.Duration,
		"Reflectors resync after a random period between this value and twice this value.")
	fs.StringVar(&o.ClientConnection.ContentType, "kube-api-content-type", o.ClientConnection.ContentType,
		"Content type of the requests sent to the API server.")
	fs.Float32Var(&o.ClientConnection.QPS, "kube-api-qps", o.ClientConnection.QPS,
		"Queries per second allowed towards the API server.")
	fs.Int32Var(&o.ClientConnection.Burst, "kube-api-burst", o.ClientConnection.Burst,
		"Burst of queries allowed towards the API server above --kube-api-qps.")
	fs.DurationVar(&o.ControllerStartInterval.Duration, "controller-start-interval", o.ControllerStartInterval.Duration,
		"Pause between starting two controllers.")
	fs.StringSliceVar(&o.Controllers, "controllers", o.Controllers, fmt.Sprintf(
		"Controllers to run. '*' runs every controller that is on by default, 'foo' runs the controller "+
			"'foo' and '-foo' stops it; the first entry naming a controller decides.\nAll controllers: %s\nOff by default: %s",
		strings.Join(allControllers, ", "), strings.Join(disabledByDefaultControllers, ", ")))

	cboptions.BindLeaderElectionFlags(&o.LeaderElection, fs)
}

// ApplyTo copies the options into cfg, rewriting controller aliases in
// Controllers to canonical names.
func (o *GenericControllerManagerConfigurationOptions) ApplyTo(cfg *config.GenericControllerManagerConfiguration, allControllers, disabledByDefaultControllers []string, controllerAliases map[string]string) error {
	if o == nil {
		return nil
	}
	if err := o.Debugging.ApplyTo(&cfg.Debugging); err != nil {
		return err
	}
	if err := o.LeaderMigration.ApplyTo(cfg); err != nil {
		return err
	}
	cfg.Port = o.Port
	cfg.Address = o.Address
	cfg.MinResyncPeriod = o.MinResyncPeriod
	cfg.ClientConnection = o.ClientConnection
	cfg.ControllerStartInterval = o.ControllerStartInterval
	cfg.LeaderElection = o.LeaderElection
	cfg.Controllers = CanonicalControllers(o.Controllers, controllerAliases)
	if cfg.Controllers == nil {
		cfg.Controllers = []string{}
	}
	return nil
}

// Validate checks the generic options; each error names the flag.
func (o *GenericControllerManagerConfigurationOptions) Validate(allControllers, disabledByDefaultControllers []string, controllerAliases map[string]string) []error {
	if o == nil {
		return nil
	}
	var errs []error
	errs = append(errs, o.Debugging.Validate()...)
	errs = append(errs, o.validateLeaderElection()...)
	errs = append(errs, o.validateClientConnection()...)
	if err := ValidateControllers(o.Controllers, allControllers, controllerAliases); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (o *GenericControllerManagerConfigurationOptions) validateLeaderElection() []error {
	le := o.LeaderElection
	if !le.LeaderElect {
		return nil
	}
	var errs []error
	// Upstream dropped every other lock kind; only leases remain.
	if le.ResourceLock != config.ResourceLockLeases {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be %q (the only lock kind still supported), got %q", config.ResourceLockLeases, le.ResourceLock))
	}
	if le.LeaseDuration.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration must be greater than zero, got %s", le.LeaseDuration.Duration))
	}
	if le.RenewDeadline.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline must be greater than zero, got %s", le.RenewDeadline.Duration))
	}
	if le.RenewDeadline.Duration >= le.LeaseDuration.Duration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be less than --leader-elect-lease-duration (%s)", le.RenewDeadline.Duration, le.LeaseDuration.Duration))
	}
	if le.RetryPeriod.Duration <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period must be greater than zero, got %s", le.RetryPeriod.Duration))
	}
	if le.ResourceName == "" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-name must not be empty"))
	}
	if le.ResourceNamespace == "" {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace must not be empty"))
	}
	return errs
}

func (o *GenericControllerManagerConfigurationOptions) validateClientConnection() []error {
	var errs []error
	// A negative QPS is legal: client-go then turns rate limiting off.
	qps := float64(o.ClientConnection.QPS)
	if math.IsNaN(qps) || math.IsInf(qps, 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be a finite number, got %v", o.ClientConnection.QPS))
	}
	if o.ClientConnection.Burst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must not be negative, got %d", o.ClientConnection.Burst))
	}
	return errs
}
