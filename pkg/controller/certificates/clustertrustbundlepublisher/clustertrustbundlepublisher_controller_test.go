package clustertrustbundlepublisher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1alpha1 "k8s.io/api/certificates/v1alpha1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/cert"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	ctrltestutil "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const testSigner = "example.com/test-signer"

// newCAPEM returns a fresh self-signed CA certificate in PEM.
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

// changingCA is a CAContentProvider whose content tests replace.
type changingCA struct {
	mu        sync.Mutex
	content   []byte
	listeners []Listener
}

func (c *changingCA) CurrentCABundleContent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.content
}

func (c *changingCA) AddListener(l Listener) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, l)
}

func (c *changingCA) set(content []byte) {
	c.mu.Lock()
	c.content = content
	ls := append([]Listener(nil), c.listeners...)
	c.mu.Unlock()
	for _, l := range ls {
		l.Enqueue()
	}
}

func v1Bundle(name, signer, content string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: content},
	}
}

// newTestPublisher returns a v1 publisher whose informer cache holds
// cached (not run: tests call sync directly), and the fake client, which
// holds the same objects.
func newTestPublisher(t *testing.T, ca CAContentProvider, cached ...*certificatesv1.ClusterTrustBundle) (*publisher[certificatesv1.ClusterTrustBundle], *fake.Clientset) {
	t.Helper()
	objs := make([]runtime.Object, 0, len(cached))
	for _, b := range cached {
		objs = append(objs, b)
	}
	client := fake.NewClientset(objs...)
	r, err := NewGAClusterTrustBundlePublisher(testSigner, ca, client)
	if err != nil {
		t.Fatal(err)
	}
	p := r.(*publisher[certificatesv1.ClusterTrustBundle])
	for _, b := range cached {
		if err := p.informer.GetIndexer().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return p, client
}

func TestBundleName(t *testing.T) {
	// sha256("abc") starts with ba7816bf8f01cfea414140de.
	got := bundleName("kubernetes.io/kube-apiserver-serving", []byte("abc"))
	if want := "kubernetes.io:kube-apiserver-serving:ba7816bf8f01cfea414140de"; got != want {
		t.Fatalf("bundleName = %q, want %q", got, want)
	}
}

func TestSync(t *testing.T) {
	caPEM := newCAPEM(t, "ca")
	ca, err := NewStaticCAContent(KubeAPIServerServingCAName, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	want := bundleName(testSigner, caPEM)

	tests := []struct {
		name    string
		cached  []*certificatesv1.ClusterTrustBundle
		react   func(*fake.Clientset)
		verbs   []string // expected write verbs, in order, with the object name
		wantErr bool
	}{
		{
			name:  "no bundle: created",
			verbs: []string{"create " + want},
		},
		{
			name:   "bundle up to date: nothing written",
			cached: []*certificatesv1.ClusterTrustBundle{v1Bundle(want, testSigner, string(caPEM))},
		},
		{
			name:   "bundle edited: content restored",
			cached: []*certificatesv1.ClusterTrustBundle{v1Bundle(want, testSigner, "edited")},
			verbs:  []string{"update " + want},
		},
		{
			name: "stale bundles of the signer deleted",
			cached: []*certificatesv1.ClusterTrustBundle{
				v1Bundle(want, testSigner, string(caPEM)),
				v1Bundle("example.com:test-signer:old", testSigner, "old"),
				v1Bundle("example.com:test-signer:older", testSigner, "older"),
			},
			verbs: []string{"delete example.com:test-signer:old", "delete example.com:test-signer:older"},
		},
		{
			name:   "stale bundle already gone: not an error",
			cached: []*certificatesv1.ClusterTrustBundle{v1Bundle(want, testSigner, string(caPEM)), v1Bundle("example.com:test-signer:gone", testSigner, "x")},
			react: func(c *fake.Clientset) {
				c.PrependReactor("delete", "clustertrustbundles", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), "gone")
				})
			},
			verbs: []string{"delete example.com:test-signer:gone"},
		},
		{
			name: "failed deletion does not stop the others but fails the sync",
			cached: []*certificatesv1.ClusterTrustBundle{
				v1Bundle(want, testSigner, string(caPEM)),
				v1Bundle("example.com:test-signer:a", testSigner, "a"),
				v1Bundle("example.com:test-signer:b", testSigner, "b"),
			},
			react: func(c *fake.Clientset) {
				c.PrependReactor("delete", "clustertrustbundles", func(a clienttesting.Action) (bool, runtime.Object, error) {
					if a.(clienttesting.DeleteAction).GetName() == "example.com:test-signer:a" {
						return true, nil, apierrors.NewForbidden(certificatesv1.Resource("clustertrustbundles"), "a", errors.New("no"))
					}
					return false, nil, nil
				})
			},
			verbs:   []string{"delete example.com:test-signer:a", "delete example.com:test-signer:b"},
			wantErr: true,
		},
		{
			name:   "failed create: no deletion attempted",
			cached: []*certificatesv1.ClusterTrustBundle{v1Bundle("example.com:test-signer:old", testSigner, "old")},
			react: func(c *fake.Clientset) {
				c.PrependReactor("create", "clustertrustbundles", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("boom")
				})
			},
			verbs:   []string{"create " + want},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, client := newTestPublisher(t, ca, tc.cached...)
			if tc.react != nil {
				tc.react(client)
			}
			err := p.sync(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error = %v, wantErr %v", err, tc.wantErr)
			}
			var got []string
			for _, a := range client.Actions() {
				switch a.GetVerb() {
				case "create":
					b := a.(clienttesting.CreateAction).GetObject().(*certificatesv1.ClusterTrustBundle)
					got = append(got, "create "+b.Name)
					if b.Spec.SignerName != testSigner || b.Spec.TrustBundle != string(caPEM) || len(b.Labels) != 0 || len(b.Annotations) != 0 {
						t.Errorf("created bundle %+v", b)
					}
				case "update":
					b := a.(clienttesting.UpdateAction).GetObject().(*certificatesv1.ClusterTrustBundle)
					got = append(got, "update "+b.Name)
					if b.Spec.TrustBundle != string(caPEM) || b.Spec.SignerName != testSigner {
						t.Errorf("updated bundle %+v", b)
					}
				case "delete":
					got = append(got, "delete "+a.(clienttesting.DeleteAction).GetName())
				}
			}
			// Deletions follow the cache's (unordered) listing.
			slices.Sort(got)
			if strings.Join(got, ",") != strings.Join(tc.verbs, ",") {
				t.Fatalf("writes %v, want %v", got, tc.verbs)
			}
		})
	}
}

func TestEmptySignerName(t *testing.T) {
	ca := &changingCA{content: []byte("x")}
	if _, err := NewGAClusterTrustBundlePublisher("", ca, fake.NewClientset()); err == nil || err.Error() != "signerName cannot be empty" {
		t.Fatalf("error = %v", err)
	}
}

func TestNewStaticCAContent(t *testing.T) {
	if _, err := NewStaticCAContent("kube-apiserver-serving", nil); err == nil || err.Error() != `missing content for CA bundle "kube-apiserver-serving"` {
		t.Errorf("empty bundle: %v", err)
	}
	if _, err := NewStaticCAContent("kube-apiserver-serving", []byte("not pem")); err == nil || !strings.HasPrefix(err.Error(), `error loading CA bundle for "kube-apiserver-serving": `) {
		t.Errorf("garbage bundle: %v", err)
	}
	caPEM := newCAPEM(t, "ca")
	ca, err := NewStaticCAContent("kube-apiserver-serving", caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if string(ca.CurrentCABundleContent()) != string(caPEM) {
		t.Error("content changed")
	}
}

// Each API version writes through its own client.
func TestAPIVersions(t *testing.T) {
	ca, _ := NewStaticCAContent("ca", newCAPEM(t, "ca"))
	for _, tc := range []struct {
		version string
		new     func(string, CAContentProvider, *fake.Clientset) (PublisherRunner, error)
		check   func(runtime.Object) bool
	}{
		{"v1", func(s string, c CAContentProvider, k *fake.Clientset) (PublisherRunner, error) {
			return NewGAClusterTrustBundlePublisher(s, c, k)
		}, func(o runtime.Object) bool { _, ok := o.(*certificatesv1.ClusterTrustBundle); return ok }},
		{"v1beta1", func(s string, c CAContentProvider, k *fake.Clientset) (PublisherRunner, error) {
			return NewBetaClusterTrustBundlePublisher(s, c, k)
		}, func(o runtime.Object) bool { _, ok := o.(*certificatesv1beta1.ClusterTrustBundle); return ok }},
		{"v1alpha1", func(s string, c CAContentProvider, k *fake.Clientset) (PublisherRunner, error) {
			return NewAlphaClusterTrustBundlePublisher(s, c, k)
		}, func(o runtime.Object) bool { _, ok := o.(*certificatesv1alpha1.ClusterTrustBundle); return ok }},
	} {
		t.Run(tc.version, func(t *testing.T) {
			client := fake.NewClientset()
			r, err := tc.new(testSigner, ca, client)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go r.Run(ctx)
			ctrltestutil.WaitFor(t, "bundle created", func() bool {
				for _, a := range client.Actions() {
					if c, ok := a.(clienttesting.CreateAction); ok && a.GetVerb() == "create" {
						if c.GetResource().Version != tc.version || !tc.check(c.GetObject()) {
							t.Fatalf("created %T through %v", c.GetObject(), c.GetResource())
						}
						return true
					}
				}
				return false
			})
			// The informer lists only the signer's bundles.
			for _, a := range client.Actions() {
				if l, ok := a.(clienttesting.ListAction); ok {
					if fs := l.GetListRestrictions().Fields.String(); fs != "spec.signerName="+testSigner {
						t.Errorf("list field selector %q", fs)
					}
				}
			}
		})
	}
}

func TestNewForServedVersion(t *testing.T) {
	ca, _ := NewStaticCAContent("ca", newCAPEM(t, "ca"))
	served := func(gvs ...string) *fake.Clientset {
		c := fake.NewClientset()
		for _, gv := range gvs {
			c.Discovery().(*fakediscovery.FakeDiscovery).Resources = append(c.Discovery().(*fakediscovery.FakeDiscovery).Resources,
				&metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "clustertrustbundles"}}})
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		client *fake.Clientset
		want   string
	}{
		{"all served: v1", served("certificates.k8s.io/v1alpha1", "certificates.k8s.io/v1beta1", "certificates.k8s.io/v1"), "v1"},
		{"beta and alpha: v1beta1", served("certificates.k8s.io/v1alpha1", "certificates.k8s.io/v1beta1"), "v1beta1"},
		{"alpha only", served("certificates.k8s.io/v1alpha1"), "v1alpha1"},
		{"none", served(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewForServedVersion(testSigner, ca, tc.client)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch r.(type) {
			case *publisher[certificatesv1.ClusterTrustBundle]:
				got = "v1"
			case *publisher[certificatesv1beta1.ClusterTrustBundle]:
				got = "v1beta1"
			case *publisher[certificatesv1alpha1.ClusterTrustBundle]:
				got = "v1alpha1"
			}
			if got != tc.want {
				t.Fatalf("publisher for %q, want %q", got, tc.want)
			}
		})
	}
}

// Running against the fake apiserver: the bundle is created, put back after
// deletion and edits, and replaced when the CA content changes.
func TestRunKeepsBundle(t *testing.T) {
	first := newCAPEM(t, "first")
	ca := &changingCA{content: first}
	client := fake.NewClientset()
	r, err := NewGAClusterTrustBundlePublisher(testSigner, ca, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	bundles := client.CertificatesV1().ClusterTrustBundles()
	has := func(name string, content []byte) func() bool {
		return func() bool {
			b, err := bundles.Get(context.Background(), name, metav1.GetOptions{})
			return err == nil && b.Spec.TrustBundle == string(content) && b.Spec.SignerName == testSigner
		}
	}
	name := bundleName(testSigner, first)
	ctrltestutil.WaitFor(t, "bundle created", has(name, first))

	if err := bundles.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrltestutil.WaitFor(t, "bundle recreated", has(name, first))

	b, _ := bundles.Get(context.Background(), name, metav1.GetOptions{})
	b.Spec.TrustBundle = "edited"
	if _, err := bundles.Update(context.Background(), b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctrltestutil.WaitFor(t, "bundle restored", has(name, first))

	second := newCAPEM(t, "second")
	ca.set(second)
	ctrltestutil.WaitFor(t, "bundle for the new CA", has(bundleName(testSigner, second), second))
	ctrltestutil.WaitFor(t, "old bundle deleted", func() bool {
		_, err := bundles.Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func TestSyncRecordsMetrics(t *testing.T) {
	ca, _ := NewStaticCAContent("ca", newCAPEM(t, "ca"))
	p, client := newTestPublisher(t, ca)
	syncCounter.Reset()
	if err := p.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("create", "clustertrustbundles", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(certificatesv1.Resource("clustertrustbundles"), "x", errors.New("no"))
	})
	// The created bundle is not in the (not running) informer: created again.
	if err := p.sync(context.Background()); err == nil {
		t.Fatal("expected an error")
	}
	for code, want := range map[string]float64{"200": 1, "403": 1} {
		if v, err := testutil.GetCounterMetricValue(syncCounter.WithLabelValues(code)); err != nil || v != want {
			t.Errorf("sync_total{code=%s} = %v, %v", code, v, err)
		}
	}
}

func TestQueueName(t *testing.T) {
	rec := ctrltestutil.RecordQueueNames()
	if _, err := NewGAClusterTrustBundlePublisher(testSigner, &changingCA{}, fake.NewClientset()); err != nil {
		t.Fatal(err)
	}
	if !rec.Has("ca_cert_publisher_cluster_trust_bundles") {
		t.Errorf("no workqueue named ca_cert_publisher_cluster_trust_bundles (have %v)", rec.Names())
	}
}
