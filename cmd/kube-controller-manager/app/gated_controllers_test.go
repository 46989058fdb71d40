package app

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kcmclone/controller-manager/clientbuilder"
	cmhealthz "github.com/kcmclone/controller-manager/healthz"
	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/names"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// The controllers behind feature gates that are off by default start when
// named in --controllers with their gates on, and each gets its named
// /healthz check; with a gate off they are skipped.
func TestGatedControllersHealthz(t *testing.T) {
	gated := map[string][]featuregate.Feature{
		names.PodGroupProtectionController:             {"GenericWorkload"},
		names.StorageVersionGarbageCollectorController: {"APIServerIdentity", "StorageVersionAPI"},
		names.ResourcePoolStatusRequestController:      {"DRAResourcePoolStatus"},
	}
	for name, gates := range gated {
		t.Run(name, func(t *testing.T) {
			for _, on := range []bool{false, true} {
				if on {
					for _, g := range gates {
						featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, g, true)
					}
				}
				ctrls, h := buildOne(t, name, []string{name})
				if !on {
					if len(ctrls) != 0 {
						t.Fatalf("built with its gates off")
					}
					continue
				}
				if len(ctrls) != 1 || ctrls[0].Name() != name {
					t.Fatalf("built %v", ctrls)
				}
				expectHealthy(t, h, name)
			}
		})
	}
}

// The SELinux warning controller's gate is locked on, so what keeps it from
// running is being off by default: "*" skips it, naming it starts it.
func TestSELinuxWarningControllerOffByDefault(t *testing.T) {
	name := names.SELinuxWarningController
	for _, controllers := range [][]string{{"*"}, {"*", name}} {
		ctrls, h := buildOne(t, name, controllers)
		if len(controllers) == 1 {
			if len(ctrls) != 0 {
				t.Fatalf("built with --controllers=*: %v", ctrls)
			}
			continue
		}
		if len(ctrls) != 1 || ctrls[0].Name() != name {
			t.Fatalf("built %v", ctrls)
		}
		expectHealthy(t, h, name)
	}
}

// buildOne runs BuildControllers for the descriptor of name alone, with
// --controllers set to controllers, on a fake client, and returns what was
// built and the health checks registered.
func buildOne(t *testing.T, name string, controllers []string) ([]Controller, *fakeHealth) {
	t.Helper()
	client := fake.NewClientset()
	cfg := kcmconfig.NewDefaultKubeControllerManagerConfiguration()
	cfg.Generic.Controllers = controllers
	cc := ControllerContext{
		ClientBuilder:    clientbuilder.Simple{ClientConfig: &rest.Config{Host: "https://127.0.0.1:1"}},
		InformerFactory:  informers.NewSharedInformerFactory(client, 0),
		ComponentConfig:  cfg,
		InformersStarted: make(chan struct{}),
	}
	h := &fakeHealth{}
	descs := NewControllerDescriptors()
	ctrls, err := BuildControllers(context.Background(), cc, map[string]*ControllerDescriptor{name: descs[name]}, nil, h)
	if err != nil {
		t.Fatal(err)
	}
	return ctrls, h
}

// expectHealthy fails the test unless /healthz?verbose lists name's check
// as passing.
func expectHealthy(t *testing.T, h *fakeHealth, name string) {
	t.Helper()
	rec := httptest.NewRecorder()
	cmhealthz.NewMutableHandler("/healthz", h.checks...).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz?verbose", nil))
	if !strings.Contains(rec.Body.String(), "[+]"+name+" ok") {
		t.Fatalf("healthz body: %s", rec.Body.String())
	}
}
