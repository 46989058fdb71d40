package app

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"

	cmhealthz "github.com/kcmclone/controller-manager/healthz"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

func TestRunControllersStopsWithinTimeout(t *testing.T) {
	var stopped atomic.Int32
	polite := newControllerLoop("polite", func(ctx context.Context) { <-ctx.Done(); stopped.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- RunControllers(ctx, ControllerContext{}, []Controller{polite}, 0, time.Second) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if ok := <-done; !ok || stopped.Load() != 1 {
		t.Fatalf("RunControllers = %v, stopped %d; want true, 1", ok, stopped.Load())
	}
}

func TestRunControllersReportsShutdownTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stubborn := newControllerLoop("stubborn", func(context.Context) { <-release })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if RunControllers(ctx, ControllerContext{}, []Controller{stubborn}, 0, 200*time.Millisecond) {
		// The controller may not even have started before ctx ended; then it
		// never runs and shutdown is clean, which is also correct.
		return
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("shutdown timeout not honoured")
	}
}

type fakeHealth struct{ checks []healthz.HealthChecker }

func (f *fakeHealth) AddHealthChecker(c ...healthz.HealthChecker) { f.checks = append(f.checks, c...) }

// Disabled and unimplemented controllers are skipped; each built one gets
// a named health check.
func TestBuildControllersRegistersChecks(t *testing.T) {
	built := map[string]bool{}
	mk := func(name string, disabledByDefault bool) *ControllerDescriptor {
		return &ControllerDescriptor{name: name, disabledByDefault: disabledByDefault, init: func(ctx context.Context, cc ControllerContext, n string) (Controller, error) {
			built[n] = true
			return newControllerLoop(n, func(context.Context) {}), nil
		}}
	}
	descs := map[string]*ControllerDescriptor{
		"a-controller":    mk("a-controller", false),
		"b-controller":    mk("b-controller", false),
		"off-controller":  mk("off-controller", true),
		"todo-controller": {name: "todo-controller"},
	}
	cfg := kcmconfig.NewDefaultKubeControllerManagerConfiguration()
	cfg.Generic.Controllers = []string{"*", "-b-controller"}
	h := &fakeHealth{}
	ctrls, err := BuildControllers(context.Background(), ControllerContext{ComponentConfig: cfg}, descs, nil, h)
	if err != nil {
		t.Fatal(err)
	}
	if len(ctrls) != 1 || !built["a-controller"] || built["b-controller"] || built["off-controller"] {
		t.Fatalf("built %v", built)
	}
	handler := cmhealthz.NewMutableHandler("/healthz", h.checks...)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz?verbose", nil))
	if !strings.Contains(rec.Body.String(), "[+]a-controller ok") {
		t.Fatalf("healthz body: %s", rec.Body.String())
	}
}

// The token controller is built whatever --controllers says, as upstream;
// its own init decides (a missing signing key skips it).
func TestBuildControllersIgnoresControllersFlagForTokenController(t *testing.T) {
	for _, controllers := range [][]string{{"-serviceaccount-token-controller"}, {"a-controller"}, {"*", "-serviceaccount-token-controller"}} {
		built := map[string]bool{}
		mk := func(name string, special bool) *ControllerDescriptor {
			return &ControllerDescriptor{name: name, requiresSpecialHandling: special, init: func(ctx context.Context, cc ControllerContext, n string) (Controller, error) {
				built[n] = true
				return newControllerLoop(n, func(context.Context) {}), nil
			}}
		}
		descs := map[string]*ControllerDescriptor{
			"a-controller":                    mk("a-controller", false),
			"serviceaccount-token-controller": mk("serviceaccount-token-controller", true),
		}
		cfg := kcmconfig.NewDefaultKubeControllerManagerConfiguration()
		cfg.Generic.Controllers = controllers
		ctrls, err := BuildControllers(context.Background(), ControllerContext{ComponentConfig: cfg}, descs, nil, &fakeHealth{})
		if err != nil {
			t.Fatal(err)
		}
		if !built["serviceaccount-token-controller"] {
			t.Errorf("--controllers=%v: token controller not built", controllers)
		}
		wantA := controllers[0] != "-serviceaccount-token-controller"
		if built["a-controller"] != wantA || len(ctrls) != len(built) {
			t.Errorf("--controllers=%v: built %v", controllers, built)
		}
	}
}
