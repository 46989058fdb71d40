package options

import (
	"errors"

	"github.com/spf13/pflag"
)

// ShardedOptions are this project's own flags for active-active replicas
// (off by default; upstream has no such mode).
type ShardedOptions struct {
	// Enabled shares the controllers among replicas, one Lease each.
	Enabled bool
	// WarmStandby starts every enabled controller's informers in every
	// replica, whether it runs the controller or not.
	WarmStandby bool
}

// NewShardedOptions returns the defaults: off, warm standby when on.
func NewShardedOptions() *ShardedOptions {
	return &ShardedOptions{WarmStandby: true}
}

// AddFlags adds the flags to fs.
func (o *ShardedOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "leader-elect-sharded", o.Enabled,
		"Not in upstream. Share the controllers among all replicas instead of running them all in the leader: "+
			"each controller gets its own Lease, <leader-elect-resource-name>-<controller>, in --leader-elect-resource-namespace, "+
			"and each replica runs about its share of them. Requires --leader-elect.")
	fs.BoolVar(&o.WarmStandby, "leader-elect-sharded-warm-standby", o.WarmStandby,
		"Not in upstream. With --leader-elect-sharded, fill the caches of every enabled controller in every replica at start, "+
			"so a controller taken over from another replica starts at once; false starts a controller's caches only when the "+
			"replica first runs it, which saves memory and makes take-overs slower.")
}

// Validate checks the flags against --leader-elect and the two upstream
// election modes a Lease per controller cannot honour: leader migration
// (other components could not see which controllers run) and coordinated
// election (the apiserver picks one leader per Lease it is told of).
func (o *ShardedOptions) Validate(leaderElect, leaderMigration, coordinated bool) []error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if !leaderElect {
		errs = append(errs, errors.New("--leader-elect-sharded requires --leader-elect=true"))
	}
	if leaderMigration {
		errs = append(errs, errors.New("--leader-elect-sharded cannot be combined with --enable-leader-migration"))
	}
	if coordinated {
		errs = append(errs, errors.New("--leader-elect-sharded cannot be combined with --feature-gates=CoordinatedLeaderElection=true"))
	}
	return errs
}
