package config

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Resource lock kinds a leader migration file may name.
const (
	ResourceLockLeases    = "leases"
	ResourceLockEndpoints = "endpoints"
)

// LeaderMigrationKind is the kind of a leader migration file.
const LeaderMigrationKind = "LeaderMigrationConfiguration"

// DefaultLeaderMigrationConfiguration is used when leader migration is on
// but no file is given: it moves the cloud controllers.
func DefaultLeaderMigrationConfiguration() *LeaderMigrationConfiguration {
	return &LeaderMigrationConfiguration{
		LeaderName:   "cloud-provider-extraction-migration",
		ResourceLock: ResourceLockLeases,
		ControllerLeaders: []ControllerLeaderConfiguration{
			{Name: "route-controller", Component: "*"},
			{Name: "service-controller", Component: "*"},
			{Name: "cloud-node-lifecycle-controller", Component: "*"},
		},
	}
}

// leaderMigrationV1 is the v1 file shape: it has no resourceLock, which is
// always leases.
type leaderMigrationV1 struct {
	APIVersion        string                          `json:"apiVersion"`
	Kind              string                          `json:"kind"`
	LeaderName        string                          `json:"leaderName"`
	ControllerLeaders []ControllerLeaderConfiguration `json:"controllerLeaders"`
}

// leaderMigrationBeta is the v1alpha1 and v1beta1 file shape.
type leaderMigrationBeta struct {
	APIVersion        string                          `json:"apiVersion"`
	Kind              string                          `json:"kind"`
	LeaderName        string                          `json:"leaderName"`
	ResourceLock      string                          `json:"resourceLock"`
	ControllerLeaders []ControllerLeaderConfiguration `json:"controllerLeaders"`
}

// ReadLeaderMigrationConfiguration reads a YAML or JSON leader migration
// file of group controllermanager.config.k8s.io, version v1, v1beta1 or
// v1alpha1. Unknown fields are errors. The result is not validated.
func ReadLeaderMigrationConfiguration(path string) (*LeaderMigrationConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("unable to read leader migration configuration from %q: %w", path, err)
	}
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("leader migration configuration %q: %w", path, err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(jsonData, &head); err != nil {
		return nil, fmt.Errorf("leader migration configuration %q: %w", path, err)
	}
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("leader migration configuration %q: %w", path, err)
	}
	if gv.Group != GroupName || head.Kind != LeaderMigrationKind {
		return nil, fmt.Errorf("leader migration configuration %q: want kind %s of group %s, got kind %q apiVersion %q",
			path, LeaderMigrationKind, GroupName, head.Kind, head.APIVersion)
	}
	out := &LeaderMigrationConfiguration{}
	switch gv.Version {
	case "v1":
		var v leaderMigrationV1
		if err := yaml.UnmarshalStrict(data, &v); err != nil {
			return nil, fmt.Errorf("leader migration configuration %q: %w", path, err)
		}
		out.LeaderName, out.ResourceLock, out.ControllerLeaders = v.LeaderName, ResourceLockLeases, v.ControllerLeaders
	case "v1beta1", "v1alpha1":
		var v leaderMigrationBeta
		if err := yaml.UnmarshalStrict(data, &v); err != nil {
			return nil, fmt.Errorf("leader migration configuration %q: %w", path, err)
		}
		out.LeaderName, out.ResourceLock, out.ControllerLeaders = v.LeaderName, v.ResourceLock, v.ControllerLeaders
	default:
		return nil, fmt.Errorf("leader migration configuration %q: unsupported version %q", path, head.APIVersion)
	}
	return out, nil
}

// ValidateLeaderMigrationConfiguration reports missing names and lock kinds
// other than leases or endpoints.
func ValidateLeaderMigrationConfiguration(c *LeaderMigrationConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.LeaderName == "" {
		errs = append(errs, field.Required(field.NewPath("leaderName"), "leaderName must be set for LeaderMigrationConfiguration"))
	}
	if c.ResourceLock != ResourceLockLeases && c.ResourceLock != ResourceLockEndpoints {
		errs = append(errs, field.Invalid(field.NewPath("resourceLock"), c.ResourceLock, "resource Lock must be one of 'leases' or 'endpoints'"))
	}
	leaders := field.NewPath("controllerLeaders")
	for i, l := range c.ControllerLeaders {
		if l.Component == "" {
			errs = append(errs, field.Required(leaders.Index(i).Child("component"), ""))
		}
		if l.Name == "" {
			errs = append(errs, field.Required(leaders.Index(i).Child("name"), ""))
		}
	}
	return errs
}
