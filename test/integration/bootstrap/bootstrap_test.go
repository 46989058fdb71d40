// Package bootstrap tests bootstrap-signer-controller and
// token-cleaner-controller against a real apiserver: cluster-info carries
// a verifiable signature per signing token, and expired tokens go away.
package bootstrap

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/bootstrap"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const waitTimeout = 30 * time.Second

// runControllers runs both controllers with the controller manager's
// options until the test ends.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)
	signer, err := bootstrap.NewSigner(c, factory.Core().V1().Secrets(), factory.Core().V1().ConfigMaps(), bootstrap.DefaultSignerOptions())
	if err != nil {
		t.Fatal(err)
	}
	cleaner, err := bootstrap.NewTokenCleaner(c, factory.Core().V1().Secrets(), bootstrap.DefaultTokenCleanerOptions())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	runs := []func(context.Context){signer.Run, cleaner.Run}
	done := make(chan struct{}, len(runs))
	for _, run := range runs {
		go func() { run(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			<-done
		}
		factory.Shutdown()
	})
}

// createToken creates the Secret of bootstrap token id.secret in
// kube-system; extra adds or overrides data keys.
func createToken(t *testing.T, c clientset.Interface, id, secret string, extra map[string]string) *v1.Secret {
	t.Helper()
	data := map[string][]byte{
		"token-id":                       []byte(id),
		"token-secret":                   []byte(secret),
		"usage-bootstrap-authentication": []byte("true"),
	}
	for k, v := range extra {
		data[k] = []byte(v)
	}
	s, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Create(context.Background(), &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id},
		Type:       "bootstrap.kubernetes.io/token",
		Data:       data,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating token %s: %v", id, err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
	})
	return s
}

// verifyJWS checks a detached compact JWS the way a joining node does,
// independently of the controller's code: the protected header names
// HS256 and the token ID, and the HMAC-SHA256 of "<header>.<payload>"
// under the token secret matches.
func verifyJWS(t *testing.T, jws, content, id, secret string) {
	t.Helper()
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[1] != "" {
		t.Fatalf("%q is not a detached compact JWS", jws)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatalf("header: %v", err)
	}
	var header map[string]interface{}
	if err := json.Unmarshal(raw, &header); err != nil {
		t.Fatalf("header %s: %v", raw, err)
	}
	if len(header) != 2 || header["alg"] != "HS256" || header["kid"] != id {
		t.Fatalf("header %s, want alg HS256 and kid %s", raw, id)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(content))))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		t.Fatalf("signature %q does not verify", jws)
	}
}

func TestClusterInfoSigning(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runControllers(t, c)
	ctx := context.Background()

	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: \"\"\n  cluster:\n    server: https://127.0.0.1:6443\n"
	if _, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Create(ctx, &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info"},
		Data:       map[string]string{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().ConfigMaps(metav1.NamespacePublic).Delete(context.Background(), "cluster-info", metav1.DeleteOptions{})
	})
	clusterInfo := func(ctx context.Context) map[string]string {
		cm, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return cm.Data
	}

	// Created first, so any pass that sees the signing token sees these.
	createToken(t, c, "nosign", "0123456789abcdef", map[string]string{"usage-bootstrap-signing": "false"})
	createToken(t, c, "expird", "0123456789abcdef", map[string]string{
		"usage-bootstrap-signing": "true",
		"expiration":              time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
	})
	token := createToken(t, c, "sign01", "f395accd246ae52d", map[string]string{"usage-bootstrap-signing": "true"})

	var data map[string]string
	framework.Eventually(t, waitTimeout, "the signature of the signing token", func(ctx context.Context) (bool, error) {
		data = clusterInfo(ctx)
		return data["jws-kubeconfig-sign01"] != "", nil
	})
	verifyJWS(t, data["jws-kubeconfig-sign01"], kubeconfig, "sign01", "f395accd246ae52d")
	for k := range data {
		if k != "kubeconfig" && k != "jws-kubeconfig-sign01" {
			t.Errorf("unexpected key %s in cluster-info", k)
		}
	}

	// A new kubeconfig gets signed again.
	updated := kubeconfig + "current-context: \"\"\n"
	cm, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["kubeconfig"] = updated
	if _, err := c.CoreV1().ConfigMaps(metav1.NamespacePublic).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "a signature of the new kubeconfig", func(ctx context.Context) (bool, error) {
		data = clusterInfo(ctx)
		return data["kubeconfig"] == updated && data["jws-kubeconfig-sign01"] != cm.Data["jws-kubeconfig-sign01"], nil
	})
	verifyJWS(t, data["jws-kubeconfig-sign01"], updated, "sign01", "f395accd246ae52d")

	// Deleting the token removes its signature.
	if err := c.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, token.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the signature to be removed", func(ctx context.Context) (bool, error) {
		data = clusterInfo(ctx)
		_, signed := data["jws-kubeconfig-sign01"]
		return data != nil && !signed, nil
	})
	if data["kubeconfig"] != updated {
		t.Fatalf("kubeconfig changed: %q", data["kubeconfig"])
	}
}

func TestExpiredTokensAreDeleted(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runControllers(t, c)

	keep := createToken(t, c, "keep01", "0123456789abcdef", nil)
	expired := createToken(t, c, "gone01", "0123456789abcdef", map[string]string{
		"expiration": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
	})
	// Still valid when created: the cleaner must come back for it.
	soon := createToken(t, c, "soon01", "0123456789abcdef", map[string]string{
		"expiration": time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339),
	})
	for _, s := range []*v1.Secret{expired, soon} {
		framework.Eventually(t, waitTimeout, s.Name+" to be deleted", func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, s.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	// The token without an expiration was there all along and stays.
	if _, err := c.CoreV1().Secrets(metav1.NamespaceSystem).Get(context.Background(), keep.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("token without expiration: %v", err)
	}
}
