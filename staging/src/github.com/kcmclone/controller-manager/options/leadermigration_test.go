package options

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kcmclone/controller-manager/config"
)

func TestLeaderMigrationApplyTo(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n"+
		"leaderName: kcm-migration\ncontrollerLeaders:\n- name: ttl-controller\n  component: kube-controller-manager\n")
	invalid := write("invalid.yaml", "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n"+
		"controllerLeaders:\n- name: ttl-controller\n")

	var cfg config.GenericControllerManagerConfiguration
	if err := (&LeaderMigrationOptions{ControllerMigrationConfig: good}).ApplyTo(&cfg); err != nil || cfg.LeaderMigrationEnabled {
		t.Fatalf("off: enabled=%v err=%v", cfg.LeaderMigrationEnabled, err)
	}
	if err := (&LeaderMigrationOptions{Enabled: true}).ApplyTo(&cfg); err != nil {
		t.Fatal(err)
	}
	if !cfg.LeaderMigrationEnabled || !reflect.DeepEqual(cfg.LeaderMigration, *config.DefaultLeaderMigrationConfiguration()) {
		t.Errorf("no file: %+v, want the default configuration", cfg.LeaderMigration)
	}
	if err := (&LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: good}).ApplyTo(&cfg); err != nil {
		t.Fatal(err)
	}
	want := config.LeaderMigrationConfiguration{LeaderName: "kcm-migration", ResourceLock: "leases",
		ControllerLeaders: []config.ControllerLeaderConfiguration{{Name: "ttl-controller", Component: "kube-controller-manager"}}}
	if !reflect.DeepEqual(cfg.LeaderMigration, want) {
		t.Errorf("file: %+v, want %+v", cfg.LeaderMigration, want)
	}
	err := (&LeaderMigrationOptions{Enabled: true, ControllerMigrationConfig: invalid}).ApplyTo(&cfg)
	if err == nil || !strings.Contains(err.Error(), "leaderName") || !strings.Contains(err.Error(), "controllerLeaders[0].component") {
		t.Errorf("invalid file: %v", err)
	}
}
