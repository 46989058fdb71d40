package approver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func csrPEM(t *testing.T, cn string, orgs []string, dns []string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: cn, Organization: orgs},
		DNSNames: dns,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

type csrOpt func(*capi.CertificateSigningRequest)

func newCSR(t *testing.T, opts ...csrOpt) *capi.CertificateSigningRequest {
	csr := &capi.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec: capi.CertificateSigningRequestSpec{
			Request:    csrPEM(t, "system:node:n1", []string{"system:nodes"}, nil),
			SignerName: capi.KubeAPIServerClientKubeletSignerName,
			Usages:     []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageKeyEncipherment, capi.UsageClientAuth},
			Username:   "system:bootstrap:abcdef",
			Groups:     []string{"system:bootstrappers"},
			Extra:      map[string]capi.ExtraValue{"k": {"v"}},
		},
	}
	for _, o := range opts {
		o(csr)
	}
	return csr
}

func TestRecognizers(t *testing.T) {
	tests := []struct {
		name           string
		csr            *capi.CertificateSigningRequest
		self, nodeCert bool
	}{
		{name: "bootstrap node client", csr: newCSR(t), nodeCert: true},
		{name: "self node client", csr: newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.Username = "system:node:n1" }), self: true, nodeCert: true},
		{name: "no key encipherment", csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
			c.Spec.Usages = []capi.KeyUsage{capi.UsageClientAuth, capi.UsageDigitalSignature}
		}), nodeCert: true},
		{name: "extra usage", csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, capi.UsageServerAuth)
		})},
		{name: "wrong signer", csr: newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = capi.KubeAPIServerClientSignerName })},
		{name: "wrong org", csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, "system:node:n1", []string{"system:nodes", "x"}, nil)
		})},
		{name: "wrong cn", csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, "n1", []string{"system:nodes"}, nil)
		})},
		{name: "dns san", csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
			c.Spec.Request = csrPEM(t, "system:node:n1", []string{"system:nodes"}, []string{"n1"})
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := parseCSR(tc.csr.Spec.Request)
			if err != nil {
				t.Fatal(err)
			}
			if got := isNodeClientCert(tc.csr, req); got != tc.nodeCert {
				t.Errorf("isNodeClientCert = %v, want %v", got, tc.nodeCert)
			}
			if got := isSelfNodeClientCert(tc.csr, req); got != tc.self {
				t.Errorf("isSelfNodeClientCert = %v, want %v", got, tc.self)
			}
		})
	}
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name string
		csr  *capi.CertificateSigningRequest
		// allowed lists the subresources the SAR allows.
		allowed     map[string]bool
		sarErr      error
		wantSARs    []string
		wantMessage string
		wantErr     bool
		ignorable   bool
	}{
		{
			name:        "bootstrap allowed nodeclient",
			csr:         newCSR(t),
			allowed:     map[string]bool{"nodeclient": true},
			wantSARs:    []string{"nodeclient"},
			wantMessage: "Auto approving kubelet client certificate after SubjectAccessReview.",
		},
		{
			name:        "self renewal allowed selfnodeclient",
			csr:         newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.Username = "system:node:n1" }),
			allowed:     map[string]bool{"selfnodeclient": true},
			wantSARs:    []string{"selfnodeclient"},
			wantMessage: "Auto approving self kubelet client certificate after SubjectAccessReview.",
		},
		{
			name:        "self renewal falls back to nodeclient",
			csr:         newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.Username = "system:node:n1" }),
			allowed:     map[string]bool{"nodeclient": true},
			wantSARs:    []string{"selfnodeclient", "nodeclient"},
			wantMessage: "Auto approving kubelet client certificate after SubjectAccessReview.",
		},
		{
			name:      "recognized but denied",
			csr:       newCSR(t),
			wantSARs:  []string{"nodeclient"},
			wantErr:   true,
			ignorable: true,
		},
		{
			name:     "sar error",
			csr:      newCSR(t),
			sarErr:   errors.New("boom"),
			wantSARs: []string{"nodeclient"},
			wantErr:  true,
		},
		{
			name: "not recognized",
			csr:  newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.SignerName = "example.com/x" }),
		},
		{
			name: "already approved",
			csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
				c.Status.Conditions = []capi.CertificateSigningRequestCondition{{Type: capi.CertificateApproved, Status: corev1.ConditionTrue}}
			}),
		},
		{
			name: "already denied",
			csr: newCSR(t, func(c *capi.CertificateSigningRequest) {
				c.Status.Conditions = []capi.CertificateSigningRequestCondition{{Type: capi.CertificateDenied, Status: corev1.ConditionTrue}}
			}),
		},
		{
			name: "already issued",
			csr:  newCSR(t, func(c *capi.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }),
		},
		{
			name:    "unparseable",
			csr:     newCSR(t, func(c *capi.CertificateSigningRequest) { c.Spec.Request = []byte("junk") }),
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.csr.DeepCopy())
			var sars []string
			client.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
				sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
				ra := sar.Spec.ResourceAttributes
				if ra.Group != "certificates.k8s.io" || ra.Resource != "certificatesigningrequests" || ra.Verb != "create" || ra.Version != "*" {
					t.Errorf("unexpected attributes %+v", ra)
				}
				if sar.Spec.User != tc.csr.Spec.Username || len(sar.Spec.Groups) != len(tc.csr.Spec.Groups) || sar.Spec.Extra["k"][0] != "v" {
					t.Errorf("unexpected SAR spec %+v", sar.Spec)
				}
				sars = append(sars, ra.Subresource)
				if tc.sarErr != nil {
					return true, nil, tc.sarErr
				}
				sar.Status.Allowed = tc.allowed[ra.Subresource]
				return true, sar, nil
			})
			a := &Controller{client: client, recognizers: recognizers()}
			err := a.handle(context.Background(), tc.csr.DeepCopy())
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			var ig ignorableError
			if got := errors.As(err, &ig); got != tc.ignorable {
				t.Errorf("ignorable = %v, want %v (%v)", got, tc.ignorable, err)
			}
			if len(sars) != len(tc.wantSARs) {
				t.Fatalf("SARs %v, want %v", sars, tc.wantSARs)
			}
			for i := range sars {
				if sars[i] != tc.wantSARs[i] {
					t.Fatalf("SARs %v, want %v", sars, tc.wantSARs)
				}
			}
			var approvals []clienttesting.UpdateAction
			for _, act := range client.Actions() {
				if act.Matches("update", "certificatesigningrequests") && act.GetSubresource() == "approval" {
					approvals = append(approvals, act.(clienttesting.UpdateAction))
				}
			}
			if tc.wantMessage == "" {
				if len(approvals) != 0 {
					t.Fatalf("unexpected approvals %v", approvals)
				}
				return
			}
			if len(approvals) != 1 {
				t.Fatalf("want 1 approval, got %v", client.Actions())
			}
			conds := approvals[0].GetObject().(*capi.CertificateSigningRequest).Status.Conditions
			if len(conds) != 1 {
				t.Fatalf("conditions %+v", conds)
			}
			c := conds[0]
			if c.Type != capi.CertificateApproved || c.Status != corev1.ConditionTrue || c.Reason != "AutoApproved" || c.Message != tc.wantMessage {
				t.Errorf("condition %+v", c)
			}
		})
	}
}

func TestRunApproves(t *testing.T) {
	client := fake.NewClientset(newCSR(t))
	client.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = true
		return true, sar, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	a := NewController(ctx, client, factory.Certificates().V1().CertificateSigningRequests())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { a.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr", metav1.GetOptions{})
		if err == nil && len(csr.Status.Conditions) == 1 && csr.Status.Conditions[0].Reason == "AutoApproved" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("csr not approved: %+v", csr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
