package signer

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	capiv1beta1 "k8s.io/api/certificates/v1beta1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/certificate/csr"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var (
	clientUsages  = []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth}
	servingUsages = []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageServerAuth}
)

// newController builds a controller for signerName with ca's files and a
// fake clock at testNow.
func newController(t *testing.T, signerName string, ca *testCA, ttl time.Duration, objs ...runtime.Object) (*Controller, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	certFile, keyFile := ca.write(t, t.TempDir())
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(testCtx(t), "csrsigning-test", signerName, client,
		factory.Certificates().V1().CertificateSigningRequests(), certFile, keyFile, ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.clock = testingclock.NewFakePassiveClock(testNow)
	return c, client, factory
}

// statusUpdate returns the CSR of the single write, which must be an
// update of the status subresource.
func statusUpdate(t *testing.T, client *fake.Clientset) *capi.CertificateSigningRequest {
	t.Helper()
	w := testutil.AllWrites(client)
	if len(w) != 1 {
		t.Fatalf("expected one write, got %v", w)
	}
	u, ok := w[0].(clienttesting.UpdateAction)
	if !ok || u.GetSubresource() != "status" || u.GetResource().Resource != "certificatesigningrequests" {
		t.Fatalf("expected an update of certificatesigningrequests/status, got %v", w[0])
	}
	return u.GetObject().(*capi.CertificateSigningRequest)
}

func verifyChain(t *testing.T, ca *testCA, cert *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Fatalf("certificate does not verify against the CA: %v", err)
	}
}

func TestHandleSigns(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(10*365*24*time.Hour))
	req := newCSR("node-csr", capi.KubeAPIServerClientKubeletSignerName, kubeletClientRequest.pem(t), clientUsages, approved())
	req.Spec.ExpirationSeconds = csr.DurationToExpirationSeconds(time.Hour)
	c, client, _ := newController(t, capi.KubeAPIServerClientKubeletSignerName, ca, 24*time.Hour, req)

	if err := c.handle(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	got := statusUpdate(t, client)
	if len(got.Status.Conditions) != 1 {
		t.Errorf("conditions changed: %v", got.Status.Conditions)
	}
	cert := parseCertPEM(t, got.Status.Certificate)
	verifyChain(t, ca, cert, x509.ExtKeyUsageClientAuth)
	if cert.Subject.CommonName != "system:node:node-1" || !reflect.DeepEqual(cert.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v", cert.Subject)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature || !reflect.DeepEqual(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("usages = %v %v", cert.KeyUsage, cert.ExtKeyUsage)
	}
	// expirationSeconds (1h) is below the 24h cap; short, so not backdated at the end.
	if !cert.NotBefore.Equal(testNow.Add(-5*time.Minute)) || !cert.NotAfter.Equal(testNow.Add(time.Hour)) {
		t.Errorf("validity = [%v, %v]", cert.NotBefore, cert.NotAfter)
	}
}

func TestHandleCapsAtCAExpiry(t *testing.T) {
	caEnd := testNow.Add(30 * time.Minute)
	ca := newTestCA(t, "ca", caEnd)
	req := newCSR("x", capiv1beta1.LegacyUnknownSignerName, request{cn: "anything"}.pem(t), servingUsages, approved())
	c, client, _ := newController(t, capiv1beta1.LegacyUnknownSignerName, ca, 365*24*time.Hour, req)
	if err := c.handle(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if cert := parseCertPEM(t, statusUpdate(t, client).Status.Certificate); !cert.NotAfter.Equal(caEnd) {
		t.Fatalf("NotAfter = %v, want the CA's %v", cert.NotAfter, caEnd)
	}
}

func TestHandleSkips(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(365*24*time.Hour))
	reqPEM := kubeletClientRequest.pem(t)
	signer := capi.KubeAPIServerClientKubeletSignerName
	cases := []struct {
		name  string
		csr   *capi.CertificateSigningRequest
		signs bool
	}{
		{"pending", newCSR("a", signer, reqPEM, clientUsages), false},
		{"denied", newCSR("a", signer, reqPEM, clientUsages, condition(capi.CertificateDenied, v1.ConditionTrue)), false},
		{"approved and denied", newCSR("a", signer, reqPEM, clientUsages, approved(), condition(capi.CertificateDenied, v1.ConditionTrue)), false},
		{"approved but failed", newCSR("a", signer, reqPEM, clientUsages, approved(), condition(capi.CertificateFailed, v1.ConditionTrue)), false},
		{"approved but failed without status", newCSR("a", signer, reqPEM, clientUsages, approved(), condition(capi.CertificateFailed, "")), false},
		{"another signer", newCSR("a", capi.KubeletServingSignerName, reqPEM, clientUsages, approved()), false},
		{"a custom signer", newCSR("a", "example.com/signer", reqPEM, clientUsages, approved()), false},
		// A Failed condition that is not True does not stop signing.
		{"approved, failed false", newCSR("a", signer, reqPEM, clientUsages, approved(), condition(capi.CertificateFailed, v1.ConditionFalse)), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, client, _ := newController(t, signer, ca, time.Hour, tc.csr)
			if err := c.handle(testCtx(t), tc.csr); err != nil {
				t.Fatal(err)
			}
			if signed := len(testutil.AllWrites(client)) > 0; signed != tc.signs {
				t.Fatalf("wrote %v, want a signature: %v", testutil.AllWrites(client), tc.signs)
			}
		})
	}
}

func TestHandleMarksRefusedRequestFailed(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(365*24*time.Hour))
	req := newCSR("bad-usage", capi.KubeAPIServerClientKubeletSignerName, kubeletClientRequest.pem(t), servingUsages, approved())
	c, client, _ := newController(t, capi.KubeAPIServerClientKubeletSignerName, ca, time.Hour, req)
	if err := c.handle(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	got := statusUpdate(t, client)
	if len(got.Status.Certificate) != 0 {
		t.Error("a refused request got a certificate")
	}
	want := capi.CertificateSigningRequestCondition{
		Type:           capi.CertificateFailed,
		Status:         v1.ConditionTrue,
		Reason:         "SignerValidationFailure",
		Message:        "usages did not match [client auth digital signature key encipherment]",
		LastUpdateTime: metav1.NewTime(testNow),
	}
	if len(got.Status.Conditions) != 2 || !reflect.DeepEqual(got.Status.Conditions[1], want) {
		t.Fatalf("conditions = %+v, want approved then %+v", got.Status.Conditions, want)
	}
}

func TestHandleErrors(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(365*24*time.Hour))
	signer := capi.KubeAPIServerClientSignerName

	t.Run("unparseable request is retried", func(t *testing.T) {
		c, client, _ := newController(t, signer, ca, time.Hour)
		err := c.handle(testCtx(t), newCSR("junk", signer, []byte("not a csr"), clientUsages, approved()))
		if err == nil || !strings.Contains(err.Error(), `unable to parse csr "junk"`) {
			t.Fatalf("error = %v", err)
		}
		if len(testutil.AllWrites(client)) != 0 {
			t.Fatalf("wrote %v", testutil.AllWrites(client))
		}
	})
	t.Run("failed status update is retried", func(t *testing.T) {
		c, client, _ := newController(t, signer, ca, time.Hour)
		client.PrependReactor("update", "certificatesigningrequests", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
		err := c.handle(testCtx(t), newCSR("a", signer, request{cn: "alice"}.pem(t), clientUsages, approved()))
		if err == nil || !strings.Contains(err.Error(), "error updating signature for csr") {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestDuration(t *testing.T) {
	c := &Controller{certTTL: 24 * time.Hour}
	secs := func(d time.Duration) *int32 { return csr.DurationToExpirationSeconds(d) }
	cases := []struct {
		requested *int32
		want      time.Duration
	}{
		{nil, 24 * time.Hour},
		{secs(48 * time.Hour), 24 * time.Hour},
		{secs(24 * time.Hour), 24 * time.Hour},
		{secs(3 * time.Hour), 3 * time.Hour},
		{secs(10 * time.Minute), 10 * time.Minute},
		{secs(9 * time.Minute), 10 * time.Minute},
		{secs(0), 10 * time.Minute},
	}
	for _, tc := range cases {
		if got := c.duration(tc.requested); got != tc.want {
			t.Errorf("duration(%v) = %v, want %v", tc.requested, got, tc.want)
		}
	}
	// The cap wins over the minimum, as upstream.
	tiny := &Controller{certTTL: 5 * time.Minute}
	if got := tiny.duration(secs(time.Hour)); got != 5*time.Minute {
		t.Errorf("duration above a 5m cap = %v", got)
	}
}

func TestSyncSkipsIssuedAndDeleted(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(365*24*time.Hour))
	signer := capi.KubeAPIServerClientSignerName
	issued := newCSR("issued", signer, request{cn: "alice"}.pem(t), clientUsages, approved())
	issued.Status.Certificate = []byte("already")
	c, client, factory := newController(t, signer, ca, time.Hour, issued)
	if err := factory.Certificates().V1().CertificateSigningRequests().Informer().GetIndexer().Add(issued); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"issued", "gone"} {
		if err := c.sync(testCtx(t), key); err != nil {
			t.Fatalf("sync %s: %v", key, err)
		}
	}
	if len(testutil.AllWrites(client)) != 0 {
		t.Fatalf("wrote %v", testutil.AllWrites(client))
	}
	// The cache is never handed out for mutation.
	pending := newCSR("pending", signer, request{cn: "alice"}.pem(t), clientUsages, approved())
	_ = factory.Certificates().V1().CertificateSigningRequests().Informer().GetIndexer().Add(pending)
	if _, err := client.CertificatesV1().CertificateSigningRequests().Create(testCtx(t), pending, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(testCtx(t), "pending"); err != nil {
		t.Fatal(err)
	}
	if len(pending.Status.Certificate) != 0 {
		t.Fatal("sync mutated the cached CSR")
	}
}

func TestNewCSRSigningControllerErrors(t *testing.T) {
	ca := newTestCA(t, "ca", testNow.Add(time.Hour))
	other := newTestCA(t, "other", testNow.Add(time.Hour))
	dir := t.TempDir()
	certFile, keyFile := ca.write(t, dir)
	mismatchedKey := filepath.Join(dir, "other.key")
	writeFile(t, mismatchedKey, other.keyPEM)
	bundle := filepath.Join(dir, "bundle.crt")
	writeFile(t, bundle, append(append([]byte(nil), ca.certPEM...), other.certPEM...))

	cases := []struct {
		name, signer, cert, key, wantErr string
	}{
		{"unknown signer", "example.com/x", certFile, keyFile, `unrecognized signerName: "example.com/x"`},
		{"missing cert", capi.KubeletServingSignerName, filepath.Join(dir, "nope"), keyFile, "error reading CA cert file"},
		{"no key file", capi.KubeletServingSignerName, certFile, "", "error reading CA cert file"},
		{"key does not match", capi.KubeletServingSignerName, certFile, mismatchedKey, "error reading CA cert file"},
		{"two certificates", capi.KubeletServingSignerName, bundle, keyFile, "expected 1 certificate, found 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			_, err := NewController(testCtx(t), "x", tc.signer, fake.NewClientset(),
				factory.Certificates().V1().CertificateSigningRequests(), tc.cert, tc.key, time.Hour)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

// TestCAReload rotates the CA files under a running signer: the new CA is
// used for the next certificate; a half-finished rotation keeps the old one.
func TestCAReload(t *testing.T) {
	caEnd := testNow.Add(365 * 24 * time.Hour)
	first, second, third := newTestCA(t, "first", caEnd), newTestCA(t, "second", caEnd), newTestCA(t, "third", caEnd)
	signer := capi.KubeAPIServerClientSignerName
	c, _, _ := newController(t, signer, first, time.Hour)
	certFile, keyFile := c.ca.certFile, c.ca.keyFile
	reqDER := request{cn: "alice"}.der(t)

	issuer := func() string {
		t.Helper()
		certPEM, err := c.sign(testCtx(t), reqDER, clientUsages, nil)
		if err != nil {
			t.Fatal(err)
		}
		return parseCertPEM(t, certPEM).Issuer.CommonName
	}
	if got := issuer(); got != "first" {
		t.Fatalf("issuer = %q", got)
	}

	second.write(t, filepath.Dir(certFile))
	if got := issuer(); got != "second" {
		t.Fatalf("after rotation issuer = %q, want second", got)
	}

	// Cert replaced but key not yet: keep signing with the second CA.
	writeFile(t, certFile, third.certPEM)
	if got := issuer(); got != "second" {
		t.Fatalf("mid-rotation issuer = %q, want second", got)
	}
	// Files gone: still the second CA.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if got := issuer(); got != "second" {
		t.Fatalf("with the key missing issuer = %q, want second", got)
	}
	writeFile(t, keyFile, third.keyPEM)
	if got := issuer(); got != "third" {
		t.Fatalf("after completing rotation issuer = %q, want third", got)
	}

	// A matching pair that is no CA we can use stops signing.
	writeFile(t, certFile, append(append([]byte(nil), third.certPEM...), first.certPEM...))
	if _, err := c.sign(testCtx(t), reqDER, clientUsages, nil); err == nil || !strings.Contains(err.Error(), "expected 1 certificate, found 2") {
		t.Fatalf("error = %v", err)
	}
}

// TestRun drives the controller through its informer: an approved CSR
// created in the API gets a certificate, and one approved later does too.
func TestRun(t *testing.T) {
	ca := newTestCA(t, "ca", time.Now().Add(24*time.Hour))
	signer := capi.KubeAPIServerClientKubeletSignerName
	early := newCSR("early", signer, kubeletClientRequest.pem(t), clientUsages, approved())
	late := newCSR("late", signer, kubeletClientRequest.pem(t), clientUsages)
	c, client, factory := newController(t, signer, ca, time.Hour, early, late)
	c.clock = testingclock.NewFakePassiveClock(time.Now())

	ctx, cancel := context.WithCancel(testCtx(t))
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, 2) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	waitForCert := func(name string) {
		t.Helper()
		testutil.WaitUntil(t, fmt.Sprintf("%s signed", name), func(ctx context.Context) (bool, error) {
			got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			return err == nil && len(got.Status.Certificate) > 0, nil
		})
	}
	waitForCert("early")

	late.Status.Conditions = []capi.CertificateSigningRequestCondition{approved()}
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, "late", late, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForCert("late")
}
