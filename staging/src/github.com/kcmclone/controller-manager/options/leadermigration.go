package options

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/kcmclone/controller-manager/config"
)

// LeaderMigrationOptions holds --enable-leader-migration and
// --leader-migration-config.
type LeaderMigrationOptions struct {
	// Enabled turns leader migration on.
	Enabled bool
	// ControllerMigrationConfig is the path of a LeaderMigrationConfiguration
	// file; empty means the built-in default.
	ControllerMigrationConfig string
}

// DefaultLeaderMigrationOptions returns leader migration switched off.
func DefaultLeaderMigrationOptions() *LeaderMigrationOptions {
	return &LeaderMigrationOptions{}
}

// AddFlags binds the leader migration flags.
func (o *LeaderMigrationOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.BoolVar(&o.Enabled, "enable-leader-migration", false, "Turn on controller leader migration.")
	fs.StringVar(&o.ControllerMigrationConfig, "leader-migration-config", "",
		"File configuring controller leader migration; empty uses the controller manager's built-in default. "+
			"The file holds a LeaderMigrationConfiguration of group controllermanager.config.k8s.io, version v1alpha1.")
}

// ApplyTo sets LeaderMigrationEnabled and, when enabled, loads and checks
// the migration configuration. A nil receiver means migration is off.
func (o *LeaderMigrationOptions) ApplyTo(cfg *config.GenericControllerManagerConfiguration) error {
	if o == nil || !o.Enabled {
		cfg.LeaderMigrationEnabled = false
		return nil
	}
	cfg.LeaderMigrationEnabled = true
	if o.ControllerMigrationConfig == "" {
		cfg.LeaderMigration = *config.DefaultLeaderMigrationConfiguration()
		return nil
	}
	lmc, err := config.ReadLeaderMigrationConfiguration(o.ControllerMigrationConfig)
	if err != nil {
		return err
	}
	if errs := config.ValidateLeaderMigrationConfiguration(lmc); len(errs) != 0 {
		return fmt.Errorf("failed to parse leader migration configuration: %v", errs.ToAggregate())
	}
	cfg.LeaderMigration = *lmc
	return nil
}
