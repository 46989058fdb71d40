package app

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"

	"github.com/kcmclone/controller-manager/clientbuilder"
	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// The root CA publisher and the token controller list and watch only the
// objects they manage: a field selector keeps every other ConfigMap and
// Secret of the cluster out of the controller manager's memory.
func TestSelectiveControllersListWithFieldSelectors(t *testing.T) {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "kube-root-ca.crt"}},
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "big"}},
	)
	var mu sync.Mutex
	selectors := map[string][]string{}
	client.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		selectors[a.GetResource().Resource] = append(selectors[a.GetResource().Resource], a.(clienttesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	cc := ControllerContext{
		ClientBuilder:    clientbuilder.Simple{ClientConfig: &rest.Config{Host: "https://127.0.0.1:1"}},
		InformerFactory:  informers.NewSharedInformerFactory(client, 0),
		ComponentConfig:  kcmconfig.KubeControllerManagerConfiguration{},
		InformersStarted: make(chan struct{}),
		filtered:         newFilteredInformers(client, 0, InformerTransform),
	}
	cc.ComponentConfig.SAController.RootCAFile = writeTestCA(t)
	if _, err := newRootCACertificatePublisherController(context.Background(), cc, "root-ca-certificate-publisher-controller"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	cc.filtered.start(ctx.Done())
	cc.filtered.waitForCacheSync(ctx.Done())
	defer func() {
		cancel()
		cc.filtered.shutdown()
	}()

	mu.Lock()
	defer mu.Unlock()
	if got := selectors["configmaps"]; len(got) != 1 || got[0] != "metadata.name=kube-root-ca.crt" {
		t.Errorf("configmap lists used field selectors %q, want only metadata.name=kube-root-ca.crt", got)
	}
}

func writeTestCA(t *testing.T) string {
	t.Helper()
	certPEM, _, err := certutil.GenerateSelfSignedCertKey("test-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFilteredInformerFactoryIsSharedPerSelector(t *testing.T) {
	f := newFilteredInformers(fake.NewClientset(), 0, InformerTransform)
	if f.factory("", "type=x") != f.factory("", "type=x") {
		t.Error("same selector: want the same factory")
	}
	if f.factory("", "type=x") == f.factory("ns", "type=x") {
		t.Error("another namespace: want another factory")
	}
}
