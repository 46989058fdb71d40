// Package e2e runs the built kube-controller-manager binary against a real
// etcd + kube-apiserver: its command line, leader election and serving.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

var kcmBinary string

func TestMain(m *testing.M) {
	kcmBinary = os.Getenv("KCM_BINARY")
	if kcmBinary == "" {
		// Built as `make build` does, so version stamps are real.
		build := exec.Command("make", "build")
		build.Dir = framework.RepoRoot()
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building kube-controller-manager:", err)
			os.Exit(1)
		}
		kcmBinary = filepath.Join(framework.BinDir(), "kube-controller-manager")
	}
	framework.Main(m)
}

// kcmProcess is one running kube-controller-manager.
type kcmProcess struct {
	cmd        *exec.Cmd
	securePort int
	mu         sync.Mutex
	out        bytes.Buffer
	done       chan struct{}
	exitCode   int
}

func (p *kcmProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *kcmProcess) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startKCM runs the binary against the shared control plane with a free
// secure port and the given extra flags; it is killed when the test ends.
func startKCM(t *testing.T, extra ...string) *kcmProcess {
	t.Helper()
	return startKCMTB(t, extra...)
}

func startKCMTB(t testing.TB, extra ...string) *kcmProcess {
	t.Helper()
	return startKCMOn(t, framework.Shared(t), kcmBinary, extra...)
}

// startKCMOn runs binary against cp, as startKCM does.
func startKCMOn(t testing.TB, cp *framework.ControlPlane, binary string, extra ...string) *kcmProcess {
	t.Helper()
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &kcmProcess{securePort: port, done: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + t.TempDir(),
	}, extra...)
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(syscall.SIGKILL, 5*time.Second)
		if t.Failed() {
			t.Logf("kube-controller-manager output:\n%s", tail(p.Output(), 6000))
		}
	})
	return p
}

// stop signals the process and waits for it to exit; it returns the exit
// code (-1 when a signal ended it) and whether it exited in time. A zero
// timeout waits as long as it takes (go test's -timeout catches a hang).
func (p *kcmProcess) stop(sig syscall.Signal, timeout time.Duration) (int, bool) {
	select {
	case <-p.done:
		return p.exitCode, true
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	var expired <-chan time.Time
	if timeout > 0 {
		expired = time.After(timeout)
	}
	select {
	case <-p.done:
		return p.exitCode, true
	case <-expired:
		return 0, false
	}
}

func (p *kcmProcess) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", p.securePort, path)
}

// runKCM runs the binary to completion and returns its exit code and output.
// It waits as long as the test may run: a loaded machine is slow, and a
// hang is killed just before go test's -timeout.
func runKCM(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx := context.Background()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-10*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, kcmBinary, args...)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kube-controller-manager %v did not exit before the test deadline; output:\n%s", args, out)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
