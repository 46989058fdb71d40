// Package certificates tests the certificatesigningrequest-signing-controller
// against a real apiserver: approved CSRs get certificates from the
// configured CA, and requests a signer refuses are marked Failed.
package certificates

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/signer"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	waitTimeout = 30 * time.Second
	// signingDuration stands in for --cluster-signing-duration.
	signingDuration = 24 * time.Hour
)

// writeCA creates a self-signed CA, stores it as PEM files under dir and
// returns the files and the certificate.
func writeCA(t *testing.T, dir string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "integration-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// runSigners starts the signing loops the controller manager would start
// for --cluster-signing-cert-file/--cluster-signing-key-file, five workers
// each, until the test ends.
func runSigners(t *testing.T, c clientset.Interface, certFile, keyFile string) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	loops, err := signer.SignersToStart(klog.Background(), kcmconfig.CSRSigningControllerConfiguration{
		ClusterSigningCertFile: certFile,
		ClusterSigningKeyFile:  keyFile,
		ClusterSigningDuration: metav1.Duration{Duration: signingDuration},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(loops) != 4 {
		t.Fatalf("expected a loop per built-in signer, got %+v", loops)
	}
	factory := informers.NewSharedInformerFactory(c, 0)
	var controllers []*signer.Controller
	for _, l := range loops {
		sc, err := signer.NewController(ctx, l.ControllerName, l.SignerName, c,
			factory.Certificates().V1().CertificateSigningRequests(), l.CertFile, l.KeyFile, signingDuration)
		if err != nil {
			t.Fatal(err)
		}
		controllers = append(controllers, sc)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{}, len(controllers))
	for _, sc := range controllers {
		go func() { sc.Run(ctx, 5); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range controllers {
			<-done
		}
		factory.Shutdown()
	})
}

// createApprovedCSR creates a CSR for subject and approves it through the
// /approval subresource, as an administrator (or the approver) would.
func createApprovedCSR(t *testing.T, c clientset.Interface, signerName string, subject pkix.Name, usages []capi.KeyUsage, expiration *int32) string {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.CertificatesV1().CertificateSigningRequests().Create(ctx, &capi.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "signer-test-"},
		Spec: capi.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        signerName,
			Usages:            usages,
			ExpirationSeconds: expiration,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating CSR: %v", err)
	}
	t.Cleanup(func() {
		_ = c.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), obj.Name, metav1.DeleteOptions{})
	})
	obj.Status.Conditions = append(obj.Status.Conditions, capi.CertificateSigningRequestCondition{
		Type:    capi.CertificateApproved,
		Status:  v1.ConditionTrue,
		Reason:  "IntegrationTest",
		Message: "approved by the test",
	})
	if _, err := c.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, obj.Name, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving CSR: %v", err)
	}
	return obj.Name
}

func TestKubeletClientCSRIsSigned(t *testing.T) {
	c := framework.Shared(t).Client(t)
	certFile, keyFile, ca := writeCA(t, t.TempDir())
	runSigners(t, c, certFile, keyFile)

	name := createApprovedCSR(t, c, capi.KubeAPIServerClientKubeletSignerName,
		pkix.Name{CommonName: "system:node:node-a", Organization: []string{"system:nodes"}},
		[]capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth},
		csr.DurationToExpirationSeconds(time.Hour))

	var issued *capi.CertificateSigningRequest
	framework.Eventually(t, waitTimeout, "the certificate", func(ctx context.Context) (bool, error) {
		got, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		issued = got
		return err == nil && len(got.Status.Certificate) > 0, nil
	})
	for _, cond := range issued.Status.Conditions {
		if cond.Type == capi.CertificateFailed {
			t.Fatalf("issued CSR also failed: %+v", cond)
		}
	}

	block, rest := pem.Decode(issued.Status.Certificate)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("status.certificate is not one PEM certificate: %q", issued.Status.Certificate)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("certificate does not chain to the test CA for client auth: %v", err)
	}
	if cert.Subject.CommonName != "system:node:node-a" || !reflect.DeepEqual(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v", cert.Subject)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature || !reflect.DeepEqual(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("usages = %v %v", cert.KeyUsage, cert.ExtKeyUsage)
	}
	if cert.IsCA {
		t.Error("issued a CA certificate")
	}
	// expirationSeconds (1h) wins over the 24h signing duration; the start
	// is backdated 5 minutes and a short-lived end is not.
	if life := cert.NotAfter.Sub(cert.NotBefore); life != time.Hour+5*time.Minute {
		t.Errorf("validity %v to %v (%v), want 1h5m", cert.NotBefore, cert.NotAfter, life)
	}
}

func TestAPIServerClientCSRGetsSigningDuration(t *testing.T) {
	c := framework.Shared(t).Client(t)
	certFile, keyFile, ca := writeCA(t, t.TempDir())
	runSigners(t, c, certFile, keyFile)

	// Any subject will do for this signer; asking for more than the
	// signing duration gets the signing duration.
	name := createApprovedCSR(t, c, capi.KubeAPIServerClientSignerName,
		pkix.Name{CommonName: "alice", Organization: []string{"devs"}},
		[]capi.KeyUsage{capi.UsageClientAuth},
		csr.DurationToExpirationSeconds(48*time.Hour))

	var certPEM []byte
	framework.Eventually(t, waitTimeout, "the certificate", func(ctx context.Context) (bool, error) {
		got, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, nil
	})
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Fatalf("not signed by the test CA: %v", err)
	}
	// Long-lived: backdated at both ends, so exactly the signing duration.
	if life := cert.NotAfter.Sub(cert.NotBefore); life != signingDuration {
		t.Errorf("validity %v, want %v", life, signingDuration)
	}
}

func TestDisallowedUsageFails(t *testing.T) {
	c := framework.Shared(t).Client(t)
	certFile, keyFile, _ := writeCA(t, t.TempDir())
	runSigners(t, c, certFile, keyFile)

	// A kubelet client certificate may not be used for serving.
	name := createApprovedCSR(t, c, capi.KubeAPIServerClientKubeletSignerName,
		pkix.Name{CommonName: "system:node:node-b", Organization: []string{"system:nodes"}},
		[]capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth, capi.UsageServerAuth}, nil)

	var failed capi.CertificateSigningRequestCondition
	var got *capi.CertificateSigningRequest
	framework.Eventually(t, waitTimeout, "the Failed condition", func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == capi.CertificateFailed {
				failed = cond
				return true, nil
			}
		}
		return false, nil
	})
	if failed.Status != v1.ConditionTrue || failed.Reason != "SignerValidationFailure" ||
		failed.Message != "usages did not match [client auth digital signature key encipherment]" {
		t.Fatalf("Failed condition %+v", failed)
	}
	if len(got.Status.Certificate) != 0 {
		t.Fatal("a refused CSR got a certificate")
	}
}
