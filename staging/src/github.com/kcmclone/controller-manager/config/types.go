// Package config holds the configuration shared by controller managers: the
// generic part of the component config and leader migration.
package config

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
)

// GroupName is the API group of the generic controller-manager config types.
const GroupName = "controllermanager.config.k8s.io"

// GenericControllerManagerConfiguration holds what every controller manager
// needs regardless of the controllers it runs.
type GenericControllerManagerConfiguration struct {
	// Port is the port of the long-removed insecure server; kept for /configz.
	Port int32
	// Address is the address of the long-removed insecure server; kept for /configz.
	Address string
	// MinResyncPeriod: informer resync periods are random in [min, 2*min).
	MinResyncPeriod metav1.Duration
	// ClientConnection configures the client talking to the apiserver.
	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	// ControllerStartInterval is the pause between starting two controllers.
	ControllerStartInterval metav1.Duration
	// LeaderElection configures the leader election client.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Controllers lists the controllers to run: "*" for all on by default,
	// "foo" to enable foo, "-foo" to disable it; the first match wins.
	Controllers []string
	// Debugging configures the profiling endpoints.
	Debugging componentbaseconfig.DebuggingConfiguration
	// LeaderMigrationEnabled turns on leader migration.
	LeaderMigrationEnabled bool
	// LeaderMigration is the leader migration configuration in use.
	LeaderMigration LeaderMigrationConfiguration
}

// genericJSON is the wire shape of GenericControllerManagerConfiguration.
// Upstream serves its v1alpha1 form on /configz, where the component-base
// parts carry lower-case JSON names; we reuse those versioned types so the
// output matches.
type genericJSON struct {
	Port                    int32
	Address                 string
	MinResyncPeriod         metav1.Duration
	ClientConnection        componentbaseconfigv1alpha1.ClientConnectionConfiguration
	ControllerStartInterval metav1.Duration
	LeaderElection          componentbaseconfigv1alpha1.LeaderElectionConfiguration
	Controllers             []string
	Debugging               componentbaseconfigv1alpha1.DebuggingConfiguration
	LeaderMigrationEnabled  bool
	LeaderMigration         LeaderMigrationConfiguration
}

// MarshalJSON renders the configuration as upstream's v1alpha1 type does.
func (c GenericControllerManagerConfiguration) MarshalJSON() ([]byte, error) {
	out := genericJSON{
		Port:                    c.Port,
		Address:                 c.Address,
		MinResyncPeriod:         c.MinResyncPeriod,
		ControllerStartInterval: c.ControllerStartInterval,
		Controllers:             c.Controllers,
		LeaderMigrationEnabled:  c.LeaderMigrationEnabled,
		LeaderMigration:         c.LeaderMigration,
	}
	if err := componentbaseconfigv1alpha1.Convert_config_ClientConnectionConfiguration_To_v1alpha1_ClientConnectionConfiguration(&c.ClientConnection, &out.ClientConnection, nil); err != nil {
		return nil, err
	}
	if err := componentbaseconfigv1alpha1.Convert_config_LeaderElectionConfiguration_To_v1alpha1_LeaderElectionConfiguration(&c.LeaderElection, &out.LeaderElection, nil); err != nil {
		return nil, err
	}
	if err := componentbaseconfigv1alpha1.Convert_config_DebuggingConfiguration_To_v1alpha1_DebuggingConfiguration(&c.Debugging, &out.Debugging, nil); err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *GenericControllerManagerConfiguration) UnmarshalJSON(data []byte) error {
	var in genericJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	out := GenericControllerManagerConfiguration{
		Port:                    in.Port,
		Address:                 in.Address,
		MinResyncPeriod:         in.MinResyncPeriod,
		ControllerStartInterval: in.ControllerStartInterval,
		Controllers:             in.Controllers,
		LeaderMigrationEnabled:  in.LeaderMigrationEnabled,
		LeaderMigration:         in.LeaderMigration,
	}
	if err := componentbaseconfigv1alpha1.Convert_v1alpha1_ClientConnectionConfiguration_To_config_ClientConnectionConfiguration(&in.ClientConnection, &out.ClientConnection, nil); err != nil {
		return err
	}
	if err := componentbaseconfigv1alpha1.Convert_v1alpha1_LeaderElectionConfiguration_To_config_LeaderElectionConfiguration(&in.LeaderElection, &out.LeaderElection, nil); err != nil {
		return err
	}
	if err := componentbaseconfigv1alpha1.Convert_v1alpha1_DebuggingConfiguration_To_config_DebuggingConfiguration(&in.Debugging, &out.Debugging, nil); err != nil {
		return err
	}
	*c = out
	return nil
}

// LeaderMigrationConfiguration names the migration lock and the controllers
// whose leadership moves between components.
type LeaderMigrationConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// LeaderName names the lock that guards the migration.
	LeaderName string `json:"leaderName"`
	// ResourceLock is the lock kind; only "leases" is still supported.
	ResourceLock string `json:"resourceLock"`
	// ControllerLeaders lists the migrating controllers.
	ControllerLeaders []ControllerLeaderConfiguration `json:"controllerLeaders"`
}

// ControllerLeaderConfiguration says which component may run a controller
// during a migration.
type ControllerLeaderConfiguration struct {
	// Name is the controller's name, e.g. route-controller.
	Name string `json:"name"`
	// Component is the component allowed to run it, or "*" for any.
	Component string `json:"component"`
}

// DeepCopy returns an independent copy.
func (c *GenericControllerManagerConfiguration) DeepCopy() *GenericControllerManagerConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	if c.Controllers != nil {
		out.Controllers = append([]string(nil), c.Controllers...)
	}
	out.LeaderMigration = *c.LeaderMigration.DeepCopy()
	return &out
}

// DeepCopy returns an independent copy.
func (c *LeaderMigrationConfiguration) DeepCopy() *LeaderMigrationConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	if c.ControllerLeaders != nil {
		out.ControllerLeaders = append([]ControllerLeaderConfiguration(nil), c.ControllerLeaders...)
	}
	return &out
}
