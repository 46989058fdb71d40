// Package clustertrustbundle tests the
// kube-apiserver-serving-clustertrustbundle-publisher-controller against a
// real apiserver: the kube-apiserver-serving bundle is published, restored
// after deletion and edits, other bundles of the signer are removed, and a
// changed CA replaces the bundle.
package clustertrustbundle

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/clustertrustbundlepublisher"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const timeout = 30 * time.Second

func newCAPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: cn}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: cert.CertificateBlockType, Bytes: c.Raw})
}

// runPublisher runs a publisher for signer, picking the API version as the
// controller manager does, until the test ends.
func runPublisher(t *testing.T, signer string, ca clustertrustbundlepublisher.CAContentProvider) {
	t.Helper()
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	cfg.UserAgent = "kube-apiserver-serving-clustertrustbundle-publisher"
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if served, err := clustertrustbundlepublisher.ClusterTrustBundlesAvailable(client, certificatesv1.SchemeGroupVersion); err != nil || !served {
		t.Fatalf("certificates.k8s.io/v1 clustertrustbundles not served: %v", err)
	}
	p, err := clustertrustbundlepublisher.NewForServedVersion(signer, ca, client)
	if err != nil || p == nil {
		t.Fatalf("publisher %v: %v", p, err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func expectedName(signer string, bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return fmt.Sprintf("%s:%x", strings.ReplaceAll(signer, "/", ":"), sum[:12])
}

// waitSingleBundle waits until signer has exactly one bundle, name with
// content, and returns it.
func waitSingleBundle(t *testing.T, c clientset.Interface, signer, name string, content []byte) *certificatesv1.ClusterTrustBundle {
	t.Helper()
	var out *certificatesv1.ClusterTrustBundle
	framework.Eventually(t, timeout, "a single bundle "+name, func(ctx context.Context) (bool, error) {
		l, err := c.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=" + signer})
		if err != nil || len(l.Items) != 1 {
			return false, nil
		}
		b := l.Items[0]
		if b.Name != name || b.Spec.TrustBundle != string(content) {
			return false, nil
		}
		out = &b
		return true, nil
	})
	return out
}

func TestKubeAPIServerServingBundle(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ctx := context.Background()
	signer := clustertrustbundlepublisher.KubeAPIServerServingSignerName
	if signer != "kubernetes.io/kube-apiserver-serving" {
		t.Fatalf("signer %q", signer)
	}
	caPEM := newCAPEM(t, "kube-apiserver-serving-ca")
	ca, err := clustertrustbundlepublisher.NewStaticCAContent(clustertrustbundlepublisher.KubeAPIServerServingCAName, caPEM)
	if err != nil {
		t.Fatal(err)
	}

	// Bundles already there: a stale one of the signer, and another signer's.
	unrelatedPEM := newCAPEM(t, "unrelated")
	for _, b := range []*certificatesv1.ClusterTrustBundle{
		{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes.io:kube-apiserver-serving:stale"},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: string(newCAPEM(t, "stale"))}},
		{ObjectMeta: metav1.ObjectMeta{Name: "example.com:unrelated:one"},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/unrelated", TrustBundle: string(unrelatedPEM)}},
	} {
		if _, err := c.CertificatesV1().ClusterTrustBundles().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.CertificatesV1().ClusterTrustBundles().Delete(ctx, "example.com:unrelated:one", metav1.DeleteOptions{})
	})

	runPublisher(t, signer, ca)
	name := expectedName(signer, caPEM)

	t.Log("published, stale bundle removed")
	b := waitSingleBundle(t, c, signer, name, caPEM)
	if len(b.Labels) != 0 || len(b.Annotations) != 0 || len(b.OwnerReferences) != 0 {
		t.Fatalf("bundle metadata %+v", b.ObjectMeta)
	}

	t.Log("another bundle of the signer is removed")
	if _, err := c.CertificatesV1().ClusterTrustBundles().Create(ctx, &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes.io:kube-apiserver-serving:extra"},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: string(caPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "extra bundle deleted", func(ctx context.Context) (bool, error) {
		_, err := c.CertificatesV1().ClusterTrustBundles().Get(ctx, "kubernetes.io:kube-apiserver-serving:extra", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	t.Log("restored after deletion")
	if err := c.CertificatesV1().ClusterTrustBundles().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated := waitSingleBundle(t, c, signer, name, caPEM)
	if recreated.UID == b.UID {
		t.Fatal("bundle not recreated")
	}

	t.Log("restored after an edit")
	edited := recreated.DeepCopy()
	edited.Spec.TrustBundle = string(newCAPEM(t, "intruder"))
	if _, err := c.CertificatesV1().ClusterTrustBundles().Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := waitSingleBundle(t, c, signer, name, caPEM)
	if restored.UID != recreated.UID {
		t.Fatal("edited bundle was replaced instead of updated")
	}

	t.Log("another signer's bundle is untouched")
	u, err := c.CertificatesV1().ClusterTrustBundles().Get(ctx, "example.com:unrelated:one", metav1.GetOptions{})
	if err != nil || u.Spec.TrustBundle != string(unrelatedPEM) {
		t.Fatalf("unrelated bundle: %v %v", u, err)
	}

	if total := syncTotal(t); total <= 0 {
		t.Fatalf("clustertrustbundle_publisher_sync_total = %v", total)
	}
}

// syncTotal sums clustertrustbundle_publisher_sync_total over codes.
func syncTotal(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "clustertrustbundle_publisher_sync_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// rotatingCA is CA content that changes, telling the publisher.
type rotatingCA struct {
	mu        sync.Mutex
	content   []byte
	listeners []clustertrustbundlepublisher.Listener
}

func (r *rotatingCA) CurrentCABundleContent() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.content
}

func (r *rotatingCA) AddListener(l clustertrustbundlepublisher.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, l)
}

func (r *rotatingCA) rotate(content []byte) {
	r.mu.Lock()
	r.content = content
	ls := append([]clustertrustbundlepublisher.Listener(nil), r.listeners...)
	r.mu.Unlock()
	for _, l := range ls {
		l.Enqueue()
	}
}

// A CA that changes gets a bundle of its own name; the old one goes.
func TestChangedCAReplacesBundle(t *testing.T) {
	c := framework.Shared(t).Client(t)
	signer := "example.com/rotating"
	first := newCAPEM(t, "first")
	ca := &rotatingCA{content: first}
	runPublisher(t, signer, ca)
	t.Cleanup(func() {
		l, _ := c.CertificatesV1().ClusterTrustBundles().List(context.Background(), metav1.ListOptions{FieldSelector: "spec.signerName=" + signer})
		if l == nil {
			return
		}
		for _, b := range l.Items {
			_ = c.CertificatesV1().ClusterTrustBundles().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		}
	})
	waitSingleBundle(t, c, signer, expectedName(signer, first), first)

	second := append(newCAPEM(t, "second"), first...)
	ca.rotate(second)
	waitSingleBundle(t, c, signer, expectedName(signer, second), second)
}
