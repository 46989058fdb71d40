package bootstrap

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
	testingclock "k8s.io/utils/clock/testing"
)

const kubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n"

func clusterInfo(data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespacePublic, Name: bootstrapapi.ConfigMapClusterInfo, ResourceVersion: "1"},
		Data:       data,
	}
}

// newSigner returns a signer whose caches hold objs and whose clock is
// testNow; its queue records AddAfter.
func newSigner(t *testing.T, objs ...runtime.Object) (*Signer, *fake.Clientset, *recordingQueue) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := NewSigner(client, factory.Core().V1().Secrets(), factory.Core().V1().ConfigMaps(), DefaultSignerOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Secret:
			err = factory.Core().V1().Secrets().Informer().GetIndexer().Add(o)
		case *v1.ConfigMap:
			err = factory.Core().V1().ConfigMaps().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s.clock = testingclock.NewFakePassiveClock(testNow)
	q := newRecordingQueue()
	s.queue = q
	return s, client, q
}

// updatedData returns the data of the single write, a ConfigMap update.
func updatedData(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	w := writes(client)
	if len(w) != 1 {
		t.Fatalf("expected one write, got %v", w)
	}
	u, ok := w[0].(clienttesting.UpdateAction)
	if !ok || u.GetSubresource() != "" {
		t.Fatalf("expected a ConfigMap update, got %v", w[0])
	}
	cm := u.GetObject().(*v1.ConfigMap)
	if cm.Namespace != metav1.NamespacePublic || cm.Name != bootstrapapi.ConfigMapClusterInfo {
		t.Fatalf("updated %s/%s", cm.Namespace, cm.Name)
	}
	return cm.Data
}

func TestSignConfigMap(t *testing.T) {
	sigA := mustSign(t, kubeconfig, "aaaaaa", "secret-a")
	sigB := mustSign(t, kubeconfig, "bbbbbb", "secret-b")
	notSigning := tokenSecret("cccccc", "secret-c")
	delete(notSigning.Data, bootstrapapi.BootstrapTokenUsageSigningKey)
	otherNamespace := tokenSecret("dddddd", "secret-d")
	otherNamespace.Namespace = "default"
	wrongType := tokenSecret("eeeeee", "secret-e")
	wrongType.Type = v1.SecretTypeOpaque
	expired := withExpiration(tokenSecret("ffffff", "secret-f"), testNow.Add(-time.Minute).Format(time.RFC3339))
	ignored := []runtime.Object{notSigning, otherNamespace, wrongType, expired}

	cases := []struct {
		name    string
		cm      *v1.ConfigMap
		secrets []runtime.Object
		want    map[string]string // nil: no write expected
	}{
		{
			name:    "adds a signature per signing token and ignores the rest",
			cm:      clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "other": "kept"}),
			secrets: append([]runtime.Object{tokenSecret("aaaaaa", "secret-a"), tokenSecret("bbbbbb", "secret-b")}, ignored...),
			want:    map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "other": "kept", "jws-kubeconfig-aaaaaa": sigA, "jws-kubeconfig-bbbbbb": sigB},
		},
		{
			name:    "nothing to do when signatures are current",
			cm:      clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": sigA}),
			secrets: append([]runtime.Object{tokenSecret("aaaaaa", "secret-a")}, ignored...),
		},
		{
			name:    "replaces a stale signature",
			cm:      clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": "stale"}),
			secrets: []runtime.Object{tokenSecret("aaaaaa", "secret-a")},
			want:    map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": sigA},
		},
		{
			name:    "removes signatures of tokens that are gone, expired or no longer signing",
			cm:      clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": sigA, "jws-kubeconfig-zzzzzz": "x", "jws-kubeconfig-cccccc": "y", "jws-kubeconfig-ffffff": "z"}),
			secrets: append([]runtime.Object{tokenSecret("aaaaaa", "secret-a")}, ignored...),
			want:    map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": sigA},
		},
		{
			name: "removes every signature when no token signs",
			cm:   clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-aaaaaa": sigA}),
			want: map[string]string{bootstrapapi.KubeConfigKey: kubeconfig},
		},
		{
			name:    "no kubeconfig, nothing to sign",
			cm:      clusterInfo(map[string]string{"jws-kubeconfig-aaaaaa": "old"}),
			secrets: []runtime.Object{tokenSecret("aaaaaa", "secret-a")},
		},
		{
			name:    "no ConfigMap",
			secrets: []runtime.Object{tokenSecret("aaaaaa", "secret-a")},
		},
		{
			name:    "an empty kubeconfig is still signed",
			cm:      clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: ""}),
			secrets: []runtime.Object{tokenSecret("aaaaaa", "secret-a")},
			want:    map[string]string{bootstrapapi.KubeConfigKey: "", "jws-kubeconfig-aaaaaa": mustSign(t, "", "aaaaaa", "secret-a")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.secrets
			if tc.cm != nil {
				objs = append([]runtime.Object{tc.cm}, objs...)
			}
			s, client, _ := newSigner(t, objs...)
			if err := s.signConfigMap(testCtx(t), s.configMapKey()); err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if w := writes(client); len(w) != 0 {
					t.Fatalf("expected no writes, got %v", w)
				}
				return
			}
			if got := updatedData(t, client); !maps.Equal(got, tc.want) {
				t.Fatalf("data = %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestSignConfigMapDoesNotMutateCache(t *testing.T) {
	cm := clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig, "jws-kubeconfig-zzzzzz": "x"})
	s, _, _ := newSigner(t, cm, tokenSecret("aaaaaa", "secret-a"))
	if err := s.signConfigMap(testCtx(t), s.configMapKey()); err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 2 || cm.Data["jws-kubeconfig-zzzzzz"] != "x" {
		t.Fatalf("cached ConfigMap changed: %v", cm.Data)
	}
}

func TestSignConfigMapRequeuesAtExpiry(t *testing.T) {
	soon := withExpiration(tokenSecret("aaaaaa", "a"), testNow.Add(time.Hour).Format(time.RFC3339))
	later := withExpiration(tokenSecret("bbbbbb", "b"), testNow.Add(2*time.Hour).Format(time.RFC3339))
	forever := tokenSecret("cccccc", "c")
	s, _, q := newSigner(t, clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig}), later, forever, soon)
	if err := s.signConfigMap(testCtx(t), s.configMapKey()); err != nil {
		t.Fatal(err)
	}
	if got := q.delays(); !maps.Equal(got, map[string]time.Duration{"kube-public/cluster-info": time.Hour}) {
		t.Fatalf("AddAfter calls %v", got)
	}

	s, _, q = newSigner(t, clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig}), forever)
	if err := s.signConfigMap(testCtx(t), s.configMapKey()); err != nil {
		t.Fatal(err)
	}
	if got := q.delays(); len(got) != 0 {
		t.Fatalf("AddAfter calls %v for a token that never expires", got)
	}
}

func TestSignConfigMapUpdateErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	cases := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"conflict waits for the next event", apierrors.NewConflict(gr, bootstrapapi.ConfigMapClusterInfo, errors.New("changed")), false},
		{"not found waits for the next event", apierrors.NewNotFound(gr, bootstrapapi.ConfigMapClusterInfo), false},
		{"anything else is retried", errors.New("boom"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, client, _ := newSigner(t, clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig}), tokenSecret("aaaaaa", "a"))
			client.PrependReactor("update", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			if err := s.signConfigMap(testCtx(t), s.configMapKey()); (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

// TestSignerEventFilters: only token Secrets in kube-system (deleted ones
// included) and the cluster-info ConfigMap in kube-public trigger a pass.
func TestSignerEventFilters(t *testing.T) {
	s, _, _ := newSigner(t)
	opaque := tokenSecret("aaaaaa", "a")
	opaque.Type = v1.SecretTypeOpaque
	elsewhere := tokenSecret("bbbbbb", "b")
	elsewhere.Namespace = "default"
	otherName := clusterInfo(nil)
	otherName.Name = "other"
	otherNamespace := clusterInfo(nil)
	otherNamespace.Namespace = "default"
	cases := []struct {
		name string
		obj  interface{}
		want bool
	}{
		{"token", tokenSecret("cccccc", "c"), true},
		{"deleted token", cache.DeletedFinalStateUnknown{Key: "kube-system/bootstrap-token-cccccc", Obj: tokenSecret("cccccc", "c")}, true},
		{"an invalid token still counts", &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "x"}, Type: bootstrapapi.SecretTypeBootstrapToken}, true},
		{"opaque Secret", opaque, false},
		{"token in another namespace", elsewhere, false},
		{"cluster-info", clusterInfo(nil), true},
		{"another ConfigMap", otherName, false},
		{"cluster-info elsewhere", otherNamespace, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := unwrap(tc.obj)
			got := s.isTokenSecret(obj)
			if _, ok := obj.(*v1.ConfigMap); ok {
				got = s.isClusterInfo(obj)
			}
			if got != tc.want {
				t.Fatalf("filter = %v, want %v", got, tc.want)
			}
		})
	}
	if s.isTokenSecret(clusterInfo(nil)) || s.isClusterInfo(tokenSecret("cccccc", "c")) {
		t.Fatal("filters accept the wrong kind")
	}
}

// TestSignerRun drives the signer through informers: a signing token adds
// its signature, deleting the token removes it.
func TestSignerRun(t *testing.T) {
	client := fake.NewClientset(clusterInfo(map[string]string{bootstrapapi.KubeConfigKey: kubeconfig}))
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := NewSigner(client, factory.Core().V1().Secrets(), factory.Core().V1().ConfigMaps(), DefaultSignerOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	waitFor := func(what string, cond func(map[string]string) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cm, err := client.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
			return err == nil && cond(cm.Data), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	token := tokenSecret("abcdef", "0123456789abcdef")
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, token, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := mustSign(t, kubeconfig, "abcdef", "0123456789abcdef")
	waitFor("the signature", func(d map[string]string) bool { return d["jws-kubeconfig-abcdef"] == want })

	if err := client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, token.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the signature to go", func(d map[string]string) bool {
		_, ok := d["jws-kubeconfig-abcdef"]
		return !ok && d[bootstrapapi.KubeConfigKey] == kubeconfig
	})
}

// mustSign is the cluster-info signature a client holding the token
// expects.
func mustSign(t *testing.T, content, tokenID, tokenSecret string) string {
	t.Helper()
	sig, err := jws.ComputeDetachedSignature(content, tokenID, tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}
