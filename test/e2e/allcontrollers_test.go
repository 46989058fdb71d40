package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// writeCA writes a self-signed signing CA for the CSR signer.
func writeCA(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "e2e-signing-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Every implemented controller starts in one process (no duplicate index,
// metric or flag), reports healthy, and /metrics can be gathered.
func TestAllControllersStart(t *testing.T) {
	cp := framework.Shared(t)
	caCert, caKey := writeCA(t)
	p := startKCM(t, "--leader-elect=false",
		"--controllers=*,bootstrap-signer-controller,token-cleaner-controller,selinux-warning-controller",
		"--service-account-private-key-file="+cp.ServiceAccountKeyFile,
		"--root-ca-file="+caCert,
		"--cluster-signing-cert-file="+caCert, "--cluster-signing-key-file="+caKey,
		"--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16",
		"--use-service-account-credentials=false")

	var want []string
	for name, d := range app.NewControllerDescriptors() {
		if !d.Implemented() {
			continue
		}
		gated := false
		for _, g := range d.RequiredFeatureGates() {
			if !utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g)) {
				gated = true
			}
		}
		if !gated {
			want = append(want, name)
		}
	}
	var body string
	framework.Eventually(t, 90*time.Second, "every controller healthy", func(context.Context) (bool, error) {
		var code int
		code, body = get(t, p.url("/healthz?verbose"), "")
		if code != http.StatusOK {
			return false, nil
		}
		for _, name := range want {
			if !strings.Contains(body, "[+]"+name+" ok") {
				return false, nil
			}
		}
		return true, nil
	})
	code, metrics := get(t, p.url("/metrics"), cp.Tokens[framework.AdminUser])
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d: %s", code, tail(metrics, 2000))
	}
	t.Logf("queues: %v", queueNames(metrics))
	for _, m := range []string{`workqueue_depth{name="resource_claim"}`, `workqueue_depth{name="device-taint-eviction-controller"}`, `workqueue_depth{name="pvcs"}`, `workqueue_depth{name="selinux_warning"}`, "rest_client_requests_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	select {
	case <-p.done:
		t.Fatalf("kube-controller-manager exited with %d", p.exitCode)
	default:
	}
	if out := p.Output(); strings.Contains(out, "panic") || strings.Contains(out, "duplicate metrics collector") {
		t.Fatalf("output shows a panic or duplicate registration:\n%s", tail(out, 4000))
	}
	t.Logf("%d controllers healthy", len(want))
}

func queueNames(metrics string) []string {
	var names []string
	for _, line := range strings.Split(metrics, "\n") {
		if rest, ok := strings.CutPrefix(line, `workqueue_depth{name="`); ok {
			names = append(names, rest[:strings.Index(rest, `"`)])
		}
	}
	return names
}
