package cleaner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	certificateslisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func certPEM(t *testing.T, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

func cond(typ capi.RequestConditionType, updated metav1.Time) capi.CertificateSigningRequestCondition {
	return capi.CertificateSigningRequestCondition{Type: typ, Status: corev1.ConditionTrue, LastUpdateTime: updated}
}

func TestShouldDelete(t *testing.T) {
	valid := certPEM(t, now.Add(-time.Hour), now.Add(time.Hour))
	expired := certPEM(t, now.Add(-2*time.Hour), now.Add(-time.Minute))
	tests := []struct {
		name    string
		created time.Duration
		conds   []capi.CertificateSigningRequestCondition
		cert    []byte
		want    bool
	}{
		{name: "pending new", created: time.Hour},
		{name: "pending 23h", created: 23 * time.Hour},
		{name: "pending 25h", created: 25 * time.Hour, want: true},
		{name: "approved issued 5m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(5*time.Minute))}, cert: valid},
		{name: "approved issued 90m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(90*time.Minute))}, cert: valid, want: true},
		{name: "approved issued no update time", created: 48 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, metav1.Time{})}, cert: valid},
		{name: "approved issued expired cert", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(5*time.Minute))}, cert: expired, want: true},
		{name: "issued expired cert but not approved", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateFailed, ago(5*time.Minute))}, cert: expired},
		{name: "approved issued garbage cert", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(5*time.Minute))}, cert: []byte("junk")},
		{name: "approved unissued 90m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(90*time.Minute))}},
		{name: "approved unissued 25h", created: 26 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateApproved, ago(25*time.Hour))}, want: true},
		{name: "denied 5m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateDenied, ago(5*time.Minute))}},
		{name: "denied 90m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateDenied, ago(90*time.Minute))}, want: true},
		{name: "failed 5m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateFailed, ago(5*time.Minute))}},
		{name: "failed 90m", created: 2 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateFailed, ago(90*time.Minute))}, want: true},
		{name: "denied old creation but recent condition", created: 48 * time.Hour, conds: []capi.CertificateSigningRequestCondition{cond(capi.CertificateDenied, ago(time.Minute))}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := &capi.CertificateSigningRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "csr", CreationTimestamp: ago(tc.created)},
				Status:     capi.CertificateSigningRequestStatus{Conditions: tc.conds, Certificate: tc.cert},
			}
			client := fake.NewClientset(csr)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := indexer.Add(csr); err != nil {
				t.Fatal(err)
			}
			c := &Controller{
				csrClient: client.CertificatesV1().CertificateSigningRequests(),
				csrLister: certificateslisters.NewCertificateSigningRequestLister(indexer),
				clock:     testingclock.NewFakePassiveClock(now),
			}
			c.sweep(context.Background())
			deleted := false
			for _, a := range client.Actions() {
				if a.Matches("delete", "certificatesigningrequests") {
					deleted = true
				}
			}
			if deleted != tc.want {
				t.Errorf("deleted = %v, want %v", deleted, tc.want)
			}
		})
	}
}

func TestRunSweepsAtStart(t *testing.T) {
	old := &capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "old", CreationTimestamp: metav1.NewTime(time.Now().Add(-48 * time.Hour))}}
	fresh := &capi.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "fresh", CreationTimestamp: metav1.Now()}}
	client := fake.NewClientset(old, fresh)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(client.CertificatesV1().CertificateSigningRequests(), factory.Certificates().V1().CertificateSigningRequests())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 1); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 1 && list.Items[0].Name == "fresh" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("old CSR not cleaned: %v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
