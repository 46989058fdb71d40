package leadermigration

import (
	"testing"

	"github.com/kcmclone/controller-manager/config"
)

func leaders(component string) *config.LeaderMigrationConfiguration {
	return &config.LeaderMigrationConfiguration{
		LeaderName:   "cloud-provider-extraction-migration",
		ResourceLock: "leases",
		ControllerLeaders: []config.ControllerLeaderConfiguration{
			{Name: "route-controller", Component: component},
			{Name: "service-controller", Component: component},
		},
	}
}

func TestFilterFunc(t *testing.T) {
	for _, tc := range []struct {
		name      string
		config    *config.LeaderMigrationConfiguration
		component string
		want      map[string]FilterResult
	}{
		{
			name: "listed for this component", config: leaders("kube-controller-manager"), component: "kube-controller-manager",
			want: map[string]FilterResult{"route-controller": ControllerMigrated, "service-controller": ControllerMigrated, "deployment-controller": ControllerNonMigrated},
		},
		{
			name: "listed for another component", config: leaders("cloud-controller-manager"), component: "kube-controller-manager",
			want: map[string]FilterResult{"route-controller": ControllerUnowned, "service-controller": ControllerUnowned, "deployment-controller": ControllerNonMigrated},
		},
		{
			name: "wildcard component", config: leaders("*"), component: "cloud-controller-manager",
			want: map[string]FilterResult{"route-controller": ControllerMigrated, "cloud-node-controller": ControllerNonMigrated},
		},
		{
			name: "default configuration", config: config.DefaultLeaderMigrationConfiguration(), component: "kube-controller-manager",
			want: map[string]FilterResult{"route-controller": ControllerMigrated, "service-controller": ControllerMigrated,
				"cloud-node-lifecycle-controller": ControllerMigrated, "ttl-controller": ControllerNonMigrated},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewLeaderMigrator(tc.config, tc.component)
			for name, want := range tc.want {
				if got := m.FilterFunc(name); got != want {
					t.Errorf("%s: got %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestEnabledNeedsLeaderElection(t *testing.T) {
	c := config.NewRecommendedGenericControllerManagerConfiguration()
	if Enabled(&c) {
		t.Fatal("enabled without --enable-leader-migration")
	}
	c.LeaderMigrationEnabled = true
	if !Enabled(&c) {
		t.Fatal("not enabled with --enable-leader-migration and --leader-elect")
	}
	c.LeaderElection.LeaderElect = false
	if Enabled(&c) {
		t.Fatal("enabled without --leader-elect")
	}
}

func TestMarkReadyTwice(t *testing.T) {
	m := NewLeaderMigrator(leaders("*"), "kube-controller-manager")
	select {
	case <-m.Ready():
		t.Fatal("ready before MarkReady")
	default:
	}
	m.MarkReady()
	m.MarkReady()
	<-m.Ready()
}
