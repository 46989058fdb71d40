// Package leadermigration decides, during a leader migration, which
// controllers a component runs under its main Lease, which under the
// migration Lease, and which it leaves to another component.
package leadermigration

import (
	"sync"

	"github.com/kcmclone/controller-manager/config"
)

// FilterResult is where a controller runs.
type FilterResult int32

const (
	// ControllerUnowned controllers are another component's: not run here.
	ControllerUnowned FilterResult = iota
	// ControllerMigrated controllers run under the migration Lease.
	ControllerMigrated
	// ControllerNonMigrated controllers run under the main Lease.
	ControllerNonMigrated
)

// FilterFunc classifies a controller by its canonical name.
type FilterFunc func(controllerName string) FilterResult

// LeaderMigrator holds a component's view of a migration.
type LeaderMigrator struct {
	// FilterFunc classifies controllers.
	FilterFunc FilterFunc

	ready     chan struct{}
	readyOnce sync.Once
}

// Enabled reports whether migration applies: it needs leader election.
func Enabled(c *config.GenericControllerManagerConfiguration) bool {
	return c.LeaderElection.LeaderElect && c.LeaderMigrationEnabled
}

// NewLeaderMigrator classifies controllers for component: a listed
// controller is migrated when its component is component or "*", unowned
// otherwise; an unlisted one stays under the main Lease.
func NewLeaderMigrator(c *config.LeaderMigrationConfiguration, component string) *LeaderMigrator {
	runsHere := make(map[string]bool, len(c.ControllerLeaders))
	for _, l := range c.ControllerLeaders {
		runsHere[l.Name] = l.Component == component || l.Component == "*"
	}
	return &LeaderMigrator{
		ready: make(chan struct{}),
		FilterFunc: func(name string) FilterResult {
			here, listed := runsHere[name]
			switch {
			case !listed:
				return ControllerNonMigrated
			case here:
				return ControllerMigrated
			default:
				return ControllerUnowned
			}
		},
	}
}

// MarkReady says the main Lease's controllers are starting, so the
// migration Lease may be sought. Safe to call more than once.
func (m *LeaderMigrator) MarkReady() { m.readyOnce.Do(func() { close(m.ready) }) }

// Ready is closed by MarkReady.
func (m *LeaderMigrator) Ready() <-chan struct{} { return m.ready }
