package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLeaderMigrationConfiguration(t *testing.T) {
	leaders := []ControllerLeaderConfiguration{
		{Name: "route-controller", Component: "kube-controller-manager"},
		{Name: "service-controller", Component: "*"},
	}
	for _, tc := range []struct {
		name    string
		file    string
		want    *LeaderMigrationConfiguration
		wantErr string
	}{
		{
			name: "v1 always locks with leases",
			file: `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: migration-lease
controllerLeaders:
- name: route-controller
  component: kube-controller-manager
- name: service-controller
  component: "*"
`,
			want: &LeaderMigrationConfiguration{LeaderName: "migration-lease", ResourceLock: "leases", ControllerLeaders: leaders},
		},
		{
			name: "v1beta1 names its lock",
			file: `{"apiVersion": "controllermanager.config.k8s.io/v1beta1", "kind": "LeaderMigrationConfiguration",
"leaderName": "migration-lease", "resourceLock": "endpoints",
"controllerLeaders": [{"name": "route-controller", "component": "kube-controller-manager"}, {"name": "service-controller", "component": "*"}]}`,
			want: &LeaderMigrationConfiguration{LeaderName: "migration-lease", ResourceLock: "endpoints", ControllerLeaders: leaders},
		},
		{
			name: "v1alpha1",
			file: `apiVersion: controllermanager.config.k8s.io/v1alpha1
kind: LeaderMigrationConfiguration
leaderName: old
resourceLock: leases
`,
			want: &LeaderMigrationConfiguration{LeaderName: "old", ResourceLock: "leases"},
		},
		{
			name: "v1 has no resourceLock",
			file: `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: x
resourceLock: leases
`,
			wantErr: "resourceLock",
		},
		{
			name: "unknown field",
			file: `apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: x
controllerLeaders:
- name: route-controller
  component: kube-controller-manager
  lease: y
`,
			wantErr: "lease",
		},
		{
			name:    "other group",
			file:    "apiVersion: kubecontrollermanager.config.k8s.io/v1alpha1\nkind: LeaderMigrationConfiguration\nleaderName: x\n",
			wantErr: "want kind LeaderMigrationConfiguration",
		},
		{
			name:    "other kind",
			file:    "apiVersion: controllermanager.config.k8s.io/v1\nkind: KubeControllerManagerConfiguration\n",
			wantErr: "want kind LeaderMigrationConfiguration",
		},
		{
			name:    "unknown version",
			file:    "apiVersion: controllermanager.config.k8s.io/v2\nkind: LeaderMigrationConfiguration\nleaderName: x\n",
			wantErr: "unsupported version",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadLeaderMigrationConfiguration(writeFile(t, tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := ReadLeaderMigrationConfiguration(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "unable to read") {
		t.Errorf("missing file: %v", err)
	}
}
