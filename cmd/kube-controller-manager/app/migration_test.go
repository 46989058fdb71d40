package app

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	cmconfig "github.com/kcmclone/controller-manager/config"
	"github.com/kcmclone/controller-manager/leadermigration"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
)

func TestLeaseDescriptorsDuringMigration(t *testing.T) {
	cfg := &cmconfig.LeaderMigrationConfiguration{
		LeaderName:   "kcm-migration",
		ResourceLock: "leases",
		ControllerLeaders: []cmconfig.ControllerLeaderConfiguration{
			{Name: names.TTLController, Component: "kube-controller-manager"},
			{Name: names.CronJobController, Component: "*"},
			{Name: names.JobController, Component: "cloud-controller-manager"},
			// Listed, yet it stays under the main Lease.
			{Name: names.ServiceAccountTokenController, Component: "kube-controller-manager"},
		},
	}
	filter := leadermigration.NewLeaderMigrator(cfg, componentName).FilterFunc
	all := NewControllerDescriptors()
	main := sets.KeySet(mainLeaseDescriptors(all, filter))
	migrated := sets.KeySet(migrationLeaseDescriptors(all, filter))

	if want := sets.New(names.TTLController, names.CronJobController); !migrated.Equal(want) {
		t.Errorf("migration Lease runs %v, want %v", sets.List(migrated), sets.List(want))
	}
	for _, name := range []string{names.TTLController, names.CronJobController, names.JobController} {
		if main.Has(name) {
			t.Errorf("main Lease runs %s", name)
		}
	}
	if !main.Has(names.ServiceAccountTokenController) || !main.Has(names.DeploymentController) {
		t.Errorf("main Lease lacks the token or deployment controller: %v", sets.List(main))
	}
	if got, want := main.Len()+migrated.Len(), len(all)-1; got != want {
		t.Errorf("%d controllers under either Lease, want all %d but the job controller", got, want)
	}
}

func TestFinalVersion(t *testing.T) {
	for in, want := range map[string]string{"1.37.2-rc.1+abc": "1.37.2", "1.37": "1.37.0", "v1.37.2": "1.37.2"} {
		if got := finalVersion(mustParseVersion(t, in)); got != want {
			t.Errorf("finalVersion(%s) = %s, want %s", in, got, want)
		}
	}
}

func mustParseVersion(t *testing.T, s string) *utilversion.Version {
	t.Helper()
	v, err := utilversion.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
