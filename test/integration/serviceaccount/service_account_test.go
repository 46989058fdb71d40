// Package serviceaccount tests the serviceaccount, serviceaccount-token and
// root-ca-certificate-publisher controllers against a real apiserver: the
// default ServiceAccount comes and comes back, legacy token Secrets get a
// token the apiserver accepts, and every namespace gets kube-root-ca.crt.
package serviceaccount

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/rootcacertpublisher"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const waitTimeout = 30 * time.Second

// rootCA is the bundle the apiserver generated for its self-signed serving
// certificate, i.e. what verifies it; the controllers publish it as
// --root-ca-file would.
func rootCA(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.Shared(t).Dir, "apiserver-certs", "apiserver.crt"))
	if err != nil {
		t.Fatalf("reading the apiserver's certificate: %v", err)
	}
	return b
}

// runControllers runs the three controllers in-process, wired as the
// controller manager wires them, until the test ends.
func runControllers(t *testing.T, c clientset.Interface, ca []byte) {
	t.Helper()
	cp := framework.Shared(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)

	sac, err := serviceaccount.NewServiceAccountsController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), c,
		serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		t.Fatal(err)
	}
	key, err := serviceaccount.PrivateKeyFromFile(cp.ServiceAccountKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, key)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := serviceaccount.NewTokensController(klog.Background(), factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), c,
		serviceaccount.TokensControllerOptions{TokenGenerator: gen, RootCA: ca})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := rootcacertpublisher.NewController(factory.Core().V1().ConfigMaps(), factory.Core().V1().Namespaces(), c, ca)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{}, 3)
	for _, run := range []func(){
		func() { sac.Run(ctx, 1) },
		func() { tc.Run(ctx, 5) },
		func() { pub.Run(ctx, 1) },
	} {
		go func() { defer func() { done <- struct{}{} }(); run() }()
	}
	t.Cleanup(func() {
		cancel()
		for range 3 {
			<-done
		}
		factory.Shutdown()
	})
}

func TestServiceAccountAutoCreate(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runControllers(t, c, rootCA(t))
	ns := framework.CreateNamespace(t, c, "sa-autocreate")

	var first *v1.ServiceAccount
	framework.Eventually(t, waitTimeout, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		sa, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		first = sa
		return err == nil, nil
	})
	if err := c.CoreV1().ServiceAccounts(ns).Delete(context.Background(), "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the default ServiceAccount to be recreated", func(ctx context.Context) (bool, error) {
		sa, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil && sa.UID != first.UID, nil
	})

	// Namespaces that existed before the controller started have one too.
	for _, existing := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem} {
		framework.Eventually(t, waitTimeout, "default ServiceAccount in "+existing, func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().ServiceAccounts(existing).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	}
}

// createToken creates a legacy token Secret for sa and waits until the
// controller has filled it.
func createToken(t *testing.T, c clientset.Interface, sa *v1.ServiceAccount, name string) *v1.Secret {
	t.Helper()
	_, err := c.CoreV1().Secrets(sa.Namespace).Create(context.Background(), &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1.ServiceAccountNameKey: sa.Name}},
		Type:       v1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var secret *v1.Secret
	framework.Eventually(t, waitTimeout, "token in secret "+name, func(ctx context.Context) (bool, error) {
		s, err := c.CoreV1().Secrets(sa.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		secret = s
		return len(s.Data[v1.ServiceAccountTokenKey]) > 0, nil
	})
	return secret
}

// tokenClient authenticates with bearer token alone.
func tokenClient(t *testing.T, token string) clientset.Interface {
	t.Helper()
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	cfg.BearerToken = token
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestServiceAccountTokenAuthentication(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ca := rootCA(t)
	runControllers(t, c, ca)
	ns := framework.CreateNamespace(t, c, "sa-token-auth")
	other := framework.CreateNamespace(t, c, "sa-token-other")
	ctx := context.Background()

	sa, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ro"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Let "ro" read ConfigMaps in its own namespace only.
	if _, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ro-reads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "ro"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	secret := createToken(t, c, sa, "ro-token")
	if string(secret.Data[v1.ServiceAccountRootCAKey]) != string(ca) {
		t.Errorf("ca.crt is not the root CA")
	}
	if string(secret.Data[v1.ServiceAccountNamespaceKey]) != ns {
		t.Errorf("namespace = %q", secret.Data[v1.ServiceAccountNamespaceKey])
	}
	if secret.Annotations[v1.ServiceAccountUIDKey] != string(sa.UID) {
		t.Errorf("uid annotation %q, want %q", secret.Annotations[v1.ServiceAccountUIDKey], sa.UID)
	}
	token := string(secret.Data[v1.ServiceAccountTokenKey])
	username := "system:serviceaccount:" + ns + ":ro"

	// The apiserver's legacy authenticator accepts the token.
	review, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != username || review.Status.User.UID != string(sa.UID) {
		t.Fatalf("token review: %+v", review.Status)
	}
	for _, g := range []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"} {
		if !slices.Contains(review.Status.User.Groups, g) {
			t.Errorf("groups %v lack %s", review.Status.User.Groups, g)
		}
	}

	// And so does a client using it.
	sc := tokenClient(t, token)
	self, err := sc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if self.Status.UserInfo.Username != username {
		t.Fatalf("SelfSubjectReview says %q, want %q", self.Status.UserInfo.Username, username)
	}
	if _, err := sc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing ConfigMaps in its namespace: %v", err)
	}
	if _, err := sc.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing ConfigMaps in another namespace: %v, want Forbidden", err)
	}

	// Deleting the Secret revokes the token.
	if err := c.CoreV1().Secrets(ns).Delete(ctx, "ro-token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the token to be rejected", func(ctx context.Context) (bool, error) {
		_, err := sc.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err), nil
	})
}

// Token Secrets die with their ServiceAccount, and are not kept for one
// that never existed.
func TestTokensDeletedWithServiceAccount(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runControllers(t, c, rootCA(t))
	ns := framework.CreateNamespace(t, c, "sa-token-cleanup")
	ctx := context.Background()

	sa, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createToken(t, c, sa, "builder-token")
	if err := c.CoreV1().ServiceAccounts(ns).Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}
	}
	framework.Eventually(t, waitTimeout, "the token Secret to be deleted", gone("builder-token"))

	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan-token", Annotations: map[string]string{v1.ServiceAccountNameKey: "nobody"}},
		Type:       v1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the orphan token Secret to be deleted", gone("orphan-token"))
}

func TestRootCACertPublisher(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ca := rootCA(t)
	runControllers(t, c, ca)
	ns := framework.CreateNamespace(t, c, "root-ca")
	ctx := context.Background()

	published := func(ns string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil && cm.Data["ca.crt"] == string(ca) && len(cm.Data) == 1 &&
				cm.Annotations["kubernetes.io/description"] == rootcacertpublisher.Description, nil
		}
	}
	framework.Eventually(t, waitTimeout, "kube-root-ca.crt", published(ns))
	framework.Eventually(t, waitTimeout, "kube-root-ca.crt in kube-system", published(metav1.NamespaceSystem))

	cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "tampered"
	cm.Data["extra"] = "x"
	if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "kube-root-ca.crt to be repaired", published(ns))

	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "kube-root-ca.crt", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "kube-root-ca.crt to be recreated", published(ns))

	// The published bundle really verifies the apiserver, under the
	// in-cluster name pods use.
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	cfg.TLSClientConfig = rest.TLSClientConfig{CAData: ca, ServerName: "kubernetes.default.svc"}
	vc, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vc.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
		t.Fatalf("the published CA does not verify the apiserver: %v", err)
	}
}
