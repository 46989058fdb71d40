package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// Bad input exits 1 with a clear message and never a stack trace.
func TestBadInputExitsOne(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("this: [is not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	noLeaderName := filepath.Join(t.TempDir(), "migration.yaml")
	if err := os.WriteFile(noLeaderName, []byte("apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{"positional argument", []string{"extra"}, "does not take any arguments"},
		{"unknown controller", []string{"--kubeconfig=" + garbage, "--controllers=*,no-such-controller"}, "no-such-controller"},
		{"missing kubeconfig", []string{"--kubeconfig=/does/not/exist"}, "/does/not/exist"},
		{"broken kubeconfig", []string{"--kubeconfig=" + garbage}, "garbage.kubeconfig"},
		{"renew deadline not below lease duration", []string{"--leader-elect-renew-deadline=20s", "--leader-elect-lease-duration=15s"}, "renew"},
		{"negative concurrency", []string{"--concurrent-deployment-syncs=-1"}, "concurrent-deployment-syncs"},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, "NoSuchGate"},
		{"bad duration", []string{"--min-resync-period=soon"}, "min-resync-period"},
		{"invalid leader migration config", []string{"--kubeconfig=" + framework.Shared(t).Kubeconfig, "--enable-leader-migration", "--leader-migration-config=" + noLeaderName}, "leaderName"},
		{"missing leader migration config", []string{"--kubeconfig=" + framework.Shared(t).Kubeconfig, "--enable-leader-migration", "--leader-migration-config=/does/not/exist.yaml"}, "/does/not/exist.yaml"},
		{"sharded with leader migration", []string{"--leader-elect-sharded", "--enable-leader-migration"}, "--enable-leader-migration"},
		{"sharded with coordinated election", []string{"--leader-elect-sharded", "--feature-gates=CoordinatedLeaderElection=true"}, "CoordinatedLeaderElection"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runKCM(t, tc.args...)
			if code != 1 {
				t.Fatalf("exit code %d, want 1; output:\n%s", code, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output does not mention %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "goroutine ") || strings.Contains(out, "panic") {
				t.Fatalf("output has a stack trace:\n%s", out)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out := runKCM(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "Kubernetes v") {
		t.Fatalf("--version: exit %d, output %q", code, out)
	}
}

func TestHelpHasUpstreamSections(t *testing.T) {
	code, out := runKCM(t, "--help")
	if code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, section := range []string{"Generic flags:", "Secure serving flags:", "Authentication flags:", "Authorization flags:",
		"Deployment-controller flags:", "Replicaset-controller flags:", "Leader-migration flags:", "Logs flags:", "Misc flags:", "Global flags:"} {
		if !strings.Contains(out, section) {
			t.Errorf("--help lacks section %q", section)
		}
	}
}

// An apiserver that never answers is waited for about 10s, then the
// process exits 1 saying so.
func TestUnreachableAPIServerExitsOne(t *testing.T) {
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "unreachable.kubeconfig")
	if err := framework.WriteKubeconfig(kc, fmt.Sprintf("https://127.0.0.1:%d", port), "token"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out := runKCM(t, "--kubeconfig="+kc, "--secure-port=0")
	took := time.Since(start)
	if code != 1 || !strings.Contains(out, "failed to wait for apiserver being healthy") {
		t.Fatalf("exit %d after %s; output:\n%s", code, took, tail(out, 2000))
	}
	// It waited (runKCM fails the test if it never exits).
	if took < 9*time.Second {
		t.Fatalf("exited after %s, want about 10s of waiting first", took)
	}
}

// Requests carry upstream's user agent shape with this build's version:
// kube-controller-manager/<version> (<os>/<arch>) kubernetes/<commit>/<name>.
func TestUserAgent(t *testing.T) {
	agents := make(chan string, 100)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case agents <- r.UserAgent():
		default:
		}
		http.Error(w, "not ready", http.StatusInternalServerError)
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "fake.kubeconfig")
	if err := framework.WriteKubeconfig(kc, srv.URL, "token"); err != nil {
		t.Fatal(err)
	}
	code, out := runKCM(t, "--kubeconfig="+kc, "--secure-port=0")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, tail(out, 1000))
	}
	ua := <-agents
	want := regexp.MustCompile(`^kube-controller-manager/v1\.37\.\d+\S* \(` + runtime.GOOS + `/` + runtime.GOARCH + `\) kubernetes/\w+/kube-controller-manager$`)
	if !want.MatchString(ua) {
		t.Fatalf("user agent %q does not match %s", ua, want)
	}
}
