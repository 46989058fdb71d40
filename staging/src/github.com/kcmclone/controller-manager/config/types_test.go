package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestGenericJSONMatchesUpstreamShape(t *testing.T) {
	c := NewRecommendedGenericControllerManagerConfiguration()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []string{
		`"Port":0`, `"Address":"0.0.0.0"`, `"MinResyncPeriod":"12h0m0s"`,
		`"ClientConnection":{"kubeconfig":"","acceptContentTypes":"","contentType":"application/vnd.kubernetes.protobuf","qps":50,"burst":100}`,
		`"ControllerStartInterval":"0s"`,
		`"LeaderElection":{"leaderElect":true,"leaseDuration":"15s","renewDeadline":"10s","retryPeriod":"2s","resourceLock":"leases","resourceName":"","resourceNamespace":""}`,
		`"Controllers":["*"]`,
		`"Debugging":{"enableProfiling":true,"enableContentionProfiling":false}`,
		`"LeaderMigrationEnabled":false`,
		`"LeaderMigration":{"leaderName":"","resourceLock":"","controllerLeaders":null}`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("JSON %s\nlacks %s", s, want)
		}
	}
	var back GenericControllerManagerConfiguration
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, c)
	}
}

func TestValidateLeaderMigrationConfiguration(t *testing.T) {
	if errs := ValidateLeaderMigrationConfiguration(DefaultLeaderMigrationConfiguration()); len(errs) != 0 {
		t.Errorf("default config invalid: %v", errs)
	}
	bad := &LeaderMigrationConfiguration{ResourceLock: "configmaps", ControllerLeaders: []ControllerLeaderConfiguration{{}}}
	if errs := ValidateLeaderMigrationConfiguration(bad); len(errs) != 4 {
		t.Errorf("want 4 errors, got %v", errs)
	}
}

func TestDeepCopy(t *testing.T) {
	c := NewRecommendedGenericControllerManagerConfiguration()
	c.LeaderMigration = *DefaultLeaderMigrationConfiguration()
	cp := c.DeepCopy()
	cp.Controllers[0] = "x"
	cp.LeaderMigration.ControllerLeaders[0].Name = "x"
	if c.Controllers[0] != "*" || c.LeaderMigration.ControllerLeaders[0].Name != "route-controller" {
		t.Errorf("copy shares memory")
	}
}
