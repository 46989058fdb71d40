package options

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/kcmclone/controller-manager/config"
)

func newTestOptions() (*GenericControllerManagerConfigurationOptions, *cliflag.NamedFlagSets) {
	cfg := config.NewRecommendedGenericControllerManagerConfiguration()
	cfg.LeaderElection.ResourceName = "kube-controller-manager"
	cfg.LeaderElection.ResourceNamespace = "kube-system"
	o := NewGenericControllerManagerConfigurationOptions(&cfg)
	fss := &cliflag.NamedFlagSets{}
	o.AddFlags(fss, testControllers, []string{"bootstrap-signer-controller"}, testAliases)
	return o, fss
}

func parse(t *testing.T, fss *cliflag.NamedFlagSets, args ...string) {
	t.Helper()
	for _, name := range fss.Order {
		fs := fss.FlagSets[name]
		// Each section only knows its own flags; ignore the rest here.
		fs.ParseErrorsAllowlist.UnknownFlags = true
		if err := fs.Parse(args); err != nil {
			t.Fatalf("parse %v: %v", args, err)
		}
	}
}

func TestGenericFlagsAndDefaults(t *testing.T) {
	_, fss := newTestOptions()
	want := map[string]string{
		"profiling":                       "true",
		"contention-profiling":            "false",
		"enable-leader-migration":         "false",
		"leader-migration-config":         "",
		"min-resync-period":               "12h0m0s",
		"kube-api-content-type":           "application/vnd.kubernetes.protobuf",
		"kube-api-qps":                    "50",
		"kube-api-burst":                  "100",
		"controller-start-interval":       "0s",
		"controllers":                     "[*]",
		"leader-elect":                    "true",
		"leader-elect-lease-duration":     "15s",
		"leader-elect-renew-deadline":     "10s",
		"leader-elect-retry-period":       "2s",
		"leader-elect-resource-lock":      "leases",
		"leader-elect-resource-name":      "kube-controller-manager",
		"leader-elect-resource-namespace": "kube-system",
	}
	got := map[string]string{}
	for _, name := range fss.Order {
		fss.FlagSets[name].VisitAll(func(f *pflag.Flag) { got[f.Name] = f.DefValue })
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags/defaults:\n got %v\nwant %v", got, want)
	}
	if !reflect.DeepEqual(fss.Order, []string{"debugging", "leader-migration", "generic"}) {
		t.Errorf("section order %v", fss.Order)
	}
}

func TestGenericApplyTo(t *testing.T) {
	o, fss := newTestOptions()
	parse(t, fss, "--controllers=*,-deployment,bootstrapsigner", "--kube-api-qps=7", "--kube-api-burst=9",
		"--leader-elect=false", "--min-resync-period=1h", "--controller-start-interval=2s", "--contention-profiling")
	var cfg config.GenericControllerManagerConfiguration
	if err := o.ApplyTo(&cfg, testControllers, nil, testAliases); err != nil {
		t.Fatal(err)
	}
	if want := []string{"*", "-deployment-controller", "bootstrap-signer-controller"}; !reflect.DeepEqual(cfg.Controllers, want) {
		t.Errorf("Controllers = %v, want %v", cfg.Controllers, want)
	}
	if cfg.ClientConnection.QPS != 7 || cfg.ClientConnection.Burst != 9 || cfg.LeaderElection.LeaderElect ||
		cfg.MinResyncPeriod.Duration != time.Hour || cfg.ControllerStartInterval.Duration != 2*time.Second ||
		!cfg.Debugging.EnableContentionProfiling || !cfg.Debugging.EnableProfiling || cfg.Address != "0.0.0.0" {
		t.Errorf("unexpected config %+v", cfg)
	}
	if cfg.LeaderMigrationEnabled {
		t.Errorf("leader migration should be off")
	}
}

func TestGenericValidate(t *testing.T) {
	cases := []struct {
		args []string
		want string // substring of the error; empty means valid
	}{
		{nil, ""},
		{[]string{"--leader-elect=false", "--leader-elect-resource-lock=endpoints"}, ""},
		{[]string{"--kube-api-qps=-1"}, ""},
		{[]string{"--leader-elect-resource-lock=endpoints"}, "--leader-elect-resource-lock"},
		{[]string{"--leader-elect-renew-deadline=20s"}, "must be less than --leader-elect-lease-duration"},
		{[]string{"--leader-elect-renew-deadline=15s"}, "must be less than --leader-elect-lease-duration"},
		{[]string{"--leader-elect-renew-deadline=0s"}, "--leader-elect-renew-deadline must be greater than zero"},
		{[]string{"--leader-elect-lease-duration=0s"}, "--leader-elect-lease-duration must be greater than zero"},
		{[]string{"--leader-elect-retry-period=0s"}, "--leader-elect-retry-period"},
		{[]string{"--leader-elect-resource-name="}, "--leader-elect-resource-name"},
		{[]string{"--leader-elect-resource-namespace="}, "--leader-elect-resource-namespace"},
		{[]string{"--kube-api-burst=-1"}, "--kube-api-burst"},
		{[]string{"--kube-api-qps=NaN"}, "--kube-api-qps"},
		{[]string{"--controllers=*,nope"}, `unknown controller "nope"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, fss := newTestOptions()
			parse(t, fss, tc.args...)
			errs := o.Validate(testControllers, nil, testAliases)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Errorf("unexpected errors %v", errs)
				}
				return
			}
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("errors %q do not contain %q", all, tc.want)
			}
		})
	}
}

func TestLeaderMigrationOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		opts    *LeaderMigrationOptions
		want    *config.LeaderMigrationConfiguration
		enabled bool
		wantErr bool
	}{
		{name: "nil options", opts: nil},
		{name: "off", opts: &LeaderMigrationOptions{}},
		{name: "default config", opts: &LeaderMigrationOptions{Enabled: true}, enabled: true, want: config.DefaultLeaderMigrationConfiguration()},
		{
			name: "v1alpha1 file", enabled: true,
			opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: write("a.yaml", `
apiVersion: controllermanager.config.k8s.io/v1alpha1
kind: LeaderMigrationConfiguration
leaderName: test-leader-migration
resourceLock: leases
controllerLeaders: []
`)},
			want: &config.LeaderMigrationConfiguration{LeaderName: "test-leader-migration", ResourceLock: "leases", ControllerLeaders: []config.ControllerLeaderConfiguration{}},
		},
		{
			name: "v1 file defaults the lock", enabled: true,
			opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: write("v1.yaml", `
apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: lm
controllerLeaders:
  - name: route-controller
    component: "*"
`)},
			want: &config.LeaderMigrationConfiguration{LeaderName: "lm", ResourceLock: "leases", ControllerLeaders: []config.ControllerLeaderConfiguration{{Name: "route-controller", Component: "*"}}},
		},
		{
			name: "v1 rejects resourceLock", enabled: true, wantErr: true,
			opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: write("v1bad.yaml", `
apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: lm
resourceLock: leases
controllerLeaders: []
`)},
		},
		{
			name: "invalid content", enabled: true, wantErr: true,
			opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: write("bad.yaml", `
apiVersion: controllermanager.config.k8s.io/v1beta1
kind: LeaderMigrationConfiguration
resourceLock: configmaps
controllerLeaders:
  - name: ""
`)},
		},
		{
			name: "wrong kind", enabled: true, wantErr: true,
			opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: write("kind.yaml", "apiVersion: controllermanager.config.k8s.io/v1\nkind: Pod\n")},
		},
		{name: "missing file", enabled: true, wantErr: true, opts: &LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: filepath.Join(dir, "none")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg config.GenericControllerManagerConfiguration
			err := tc.opts.ApplyTo(&cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if cfg.LeaderMigrationEnabled != tc.enabled {
				t.Errorf("enabled = %v", cfg.LeaderMigrationEnabled)
			}
			if tc.want != nil && !reflect.DeepEqual(&cfg.LeaderMigration, tc.want) {
				t.Errorf("got %#v, want %#v", cfg.LeaderMigration, *tc.want)
			}
		})
	}
}
