// Package podcertificaterequest tests the
// podcertificaterequest-cleaner-controller against a real apiserver serving
// certificates.k8s.io/v1 PodCertificateRequests.
package podcertificaterequest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"testing"
	"time"

	certsv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/podcertificaterequestcleaner"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

func stubPKCS10(t *testing.T) []byte {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newPCR(t *testing.T, name string) *certsv1.PodCertificateRequest {
	return &certsv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certsv1.PodCertificateRequestSpec{
			SignerName:           "example.com/signer",
			PodName:              "pod-1",
			PodUID:               "pod-uid-1",
			ServiceAccountName:   "sa-1",
			ServiceAccountUID:    "sa-uid-1",
			NodeName:             "node-1",
			NodeUID:              "node-uid-1",
			MaxExpirationSeconds: ptr.To[int32](86400),
			StubPKCS10Request:    stubPKCS10(t),
		},
	}
}

// runCleaner runs the cleaner in-process with a clock fixed at now, the
// upstream threshold and a short polling interval.
func runCleaner(t *testing.T, c clientset.Interface, now time.Time) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	cleaner := podcertificaterequestcleaner.NewController(c,
		factory.Certificates().V1().PodCertificateRequests(),
		testingclock.NewFakePassiveClock(now),
		podcertificaterequestcleaner.DefaultThreshold,
		100*time.Millisecond)
	factory.Start(ctx.Done())
	go cleaner.Run(ctx, 1)
}

// TestCleaner: requests created at least the threshold before the
// cleaner's clock are deleted, pending and denied alike, and a younger one
// listed in the same sweep is kept.
func TestCleaner(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "pcr-cleaner")
	ctx := context.Background()
	pcrs := c.CertificatesV1().PodCertificateRequests(ns)

	pending, err := pcrs.Create(ctx, newPCR(t, "pending"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating PodCertificateRequest (is certificates.k8s.io/v1 served?): %v", err)
	}
	denied, err := pcrs.Create(ctx, newPCR(t, "denied"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	denied.Status.Conditions = []metav1.Condition{{
		Type: certsv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: "Nope", Message: "denied by test", LastTransitionTime: metav1.Now(),
	}}
	if _, err := pcrs.UpdateStatus(ctx, denied, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("denying: %v", err)
	}
	oldest := pending.CreationTimestamp.Time
	if denied.CreationTimestamp.After(oldest) {
		oldest = denied.CreationTimestamp.Time
	}

	// creationTimestamp has one-second resolution: recreate "young" until
	// it is stamped strictly later than the old ones.
	var young *certsv1.PodCertificateRequest
	framework.Eventually(t, 30*time.Second, "a request stamped after the old ones", func(ctx context.Context) (bool, error) {
		p, err := pcrs.Create(ctx, newPCR(t, "young"), metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if p.CreationTimestamp.After(oldest) {
			young = p
			return true, nil
		}
		return false, pcrs.Delete(ctx, p.Name, metav1.DeleteOptions{})
	})

	// Exactly the threshold after the old ones: they are due, young is not.
	runCleaner(t, c, oldest.Add(podcertificaterequestcleaner.DefaultThreshold))

	framework.Eventually(t, 30*time.Second, "old requests deleted", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"pending", "denied"} {
			_, err := pcrs.Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	// All three were in the informer's initial list, so the sweep that
	// deleted the old ones also judged the young one.
	got, err := pcrs.Get(ctx, "young", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("young request: %v", err)
	}
	if got.UID != young.UID {
		t.Errorf("young request was replaced")
	}
}
