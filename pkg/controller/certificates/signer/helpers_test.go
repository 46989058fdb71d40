package signer

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// testNow is second-aligned because certificates store whole seconds.
var testNow = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// testCA is a self-signed CA and the PEM it is stored as.
type testCA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

func newTestCA(t *testing.T, cn string, notAfter time.Time) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             testNow.Add(-24 * time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}
}

// write stores the CA in dir as ca.crt/ca.key and returns the paths.
func (ca *testCA) write(t *testing.T, dir string) (string, string) {
	t.Helper()
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	writeFile(t, certFile, ca.certPEM)
	writeFile(t, keyFile, ca.keyPEM)
	return certFile, keyFile
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// request describes the x509 CSR to generate.
type request struct {
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	emails []string
	uris   []*url.URL
}

func (r request) der(t *testing.T) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:        pkix.Name{CommonName: r.cn, Organization: r.orgs},
		DNSNames:       r.dns,
		IPAddresses:    r.ips,
		EmailAddresses: r.emails,
		URIs:           r.uris,
	}, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func (r request) parsed(t *testing.T) *x509.CertificateRequest {
	t.Helper()
	cr, err := x509.ParseCertificateRequest(r.der(t))
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

func (r request) pem(t *testing.T) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: r.der(t)})
}

var kubeletClientRequest = request{cn: "system:node:node-1", orgs: []string{"system:nodes"}}

func condition(t capi.RequestConditionType, status v1.ConditionStatus) capi.CertificateSigningRequestCondition {
	return capi.CertificateSigningRequestCondition{Type: t, Status: status}
}

func approved() capi.CertificateSigningRequestCondition {
	return condition(capi.CertificateApproved, v1.ConditionTrue)
}

func newCSR(name, signerName string, reqPEM []byte, usages []capi.KeyUsage, conds ...capi.CertificateSigningRequestCondition) *capi.CertificateSigningRequest {
	return &capi.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: capi.CertificateSigningRequestSpec{
			Request:    reqPEM,
			SignerName: signerName,
			Usages:     usages,
		},
		Status: capi.CertificateSigningRequestStatus{Conditions: conds},
	}
}

func parseCertPEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" || len(rest) != 0 {
		t.Fatalf("expected exactly one CERTIFICATE PEM block, got %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
