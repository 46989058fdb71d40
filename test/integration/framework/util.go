package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
)

func insecureTransport() *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed test apiserver
}

// InsecureHTTPClient talks to servers with self-signed certificates.
func InsecureHTTPClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: insecureTransport()}
}

var shared *ControlPlane

// Main runs a package's tests against one shared control plane, started
// before and stopped after them. Call it from TestMain.
func Main(m *testing.M) { MainWithOptions(m, Options{}) }

// MainWithOptions is Main for packages that need a differently started
// control plane (feature gates or APIs off by default).
func MainWithOptions(m *testing.M, opts Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cp, err := StartControlPlaneWithOptions(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration control plane:", err)
		os.Exit(1)
	}
	shared = cp
	code := m.Run()
	cp.Stop()
	os.Exit(code)
}

// Shared returns the package's control plane started by Main.
func Shared(t testing.TB) *ControlPlane {
	t.Helper()
	if shared == nil {
		t.Fatal("no control plane: call framework.Main from TestMain")
	}
	return shared
}

// Client is an admin clientset for the control plane.
func (cp *ControlPlane) Client(t testing.TB) clientset.Interface {
	t.Helper()
	c, err := clientset.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CreateNamespace makes a fresh namespace for one test and deletes it when
// the test ends.
func CreateNamespace(t testing.TB, c clientset.Interface, prefix string) string {
	t.Helper()
	name := strings.ToLower(prefix)
	if len(name) > 40 {
		name = name[:40]
	}
	ns, err := c.CoreV1().Namespaces().Create(context.Background(),
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Eventually polls cond every 100ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// InformerStarter is what RunController needs of an informer factory.
type InformerStarter interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// RunController starts factory's informers and run(ctx) in the background
// for the rest of the test; at cleanup it cancels ctx, waits for run to
// return and shuts the informers down.
func RunController(t testing.TB, ctx context.Context, cancel context.CancelFunc, factory InformerStarter, run func(context.Context)) {
	t.Helper()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}
