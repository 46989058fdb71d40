package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := framework.InsecureHTTPClient().Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSecureServing(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ctx := context.Background()

	// The viewer may read /metrics through RBAC, as a Prometheus would.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-e2e-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-e2e-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: framework.ViewerUser}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := startKCM(t, "--leader-elect=false", "--controllers=replicaset-controller,deployment-controller")
	framework.Eventually(t, 60*time.Second, "/healthz to answer 200", func(context.Context) (bool, error) {
		code, _ := get(t, p.url("/healthz"), "")
		return code == http.StatusOK, nil
	})

	t.Run("healthz without credentials", func(t *testing.T) {
		code, body := get(t, p.url("/healthz"), "")
		if code != http.StatusOK || body != "ok" {
			t.Fatalf("/healthz = %d %q, want 200 ok", code, body)
		}
	})
	t.Run("healthz has a check per controller", func(t *testing.T) {
		framework.Eventually(t, 30*time.Second, "per-controller checks", func(context.Context) (bool, error) {
			code, body := get(t, p.url("/healthz?verbose"), "")
			return code == http.StatusOK && strings.Contains(body, "[+]deployment-controller ok") && strings.Contains(body, "[+]replicaset-controller ok"), nil
		})
		// Only the bare paths are always allowed, as upstream.
		if code, _ := get(t, p.url("/healthz/deployment-controller"), cp.Tokens[framework.AdminUser]); code != http.StatusOK {
			t.Fatalf("/healthz/deployment-controller = %d", code)
		}
	})
	t.Run("livez and readyz", func(t *testing.T) {
		for _, path := range []string{"/livez", "/readyz"} {
			framework.Eventually(t, 30*time.Second, path, func(context.Context) (bool, error) {
				code, _ := get(t, p.url(path), "")
				return code == http.StatusOK, nil
			})
		}
	})
	t.Run("metrics refused without credentials", func(t *testing.T) {
		code, _ := get(t, p.url("/metrics"), "")
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Fatalf("/metrics without credentials = %d, want 401 or 403", code)
		}
	})
	t.Run("metrics with an authorized token", func(t *testing.T) {
		var body string
		framework.Eventually(t, 30*time.Second, "/metrics 200 for the viewer", func(context.Context) (bool, error) {
			var code int
			code, body = get(t, p.url("/metrics"), cp.Tokens[framework.ViewerUser])
			return code == http.StatusOK, nil
		})
		for _, m := range []string{"workqueue_adds_total", "rest_client_requests_total"} {
			if !strings.Contains(body, m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
	})
	// /flagz and /statusz sit behind the same delegated authorization as
	// /metrics: the viewer may read /metrics only, until a role grants them.
	t.Run("flagz and statusz authorized as metrics", func(t *testing.T) {
		want := map[string]string{
			"/flagz":   "replicaset-controller,deployment-controller",
			"/statusz": "kube-controller-manager statusz",
		}
		for path, content := range want {
			if code, _ := get(t, p.url(path), ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Errorf("%s without credentials = %d, want 401 or 403", path, code)
			}
			if code, _ := get(t, p.url(path), cp.Tokens[framework.ViewerUser]); code != http.StatusForbidden {
				t.Errorf("%s for the viewer without a grant = %d, want 403", path, code)
			}
			code, body := get(t, p.url(path), cp.Tokens[framework.AdminUser])
			if code != http.StatusOK || !strings.Contains(body, content) {
				t.Errorf("%s for admin = %d, want 200 with %q: %s", path, code, content, tail(body, 400))
			}
		}
		zrole := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "kcm-e2e-zpages-reader"},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/flagz", "/statusz"}, Verbs: []string{"get"}}},
		}
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, zrole, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		zbinding := binding.DeepCopy()
		zbinding.Name, zbinding.RoleRef.Name = zrole.Name, zrole.Name
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, zbinding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for path, content := range want {
			framework.Eventually(t, 30*time.Second, path+" 200 for the viewer once granted", func(context.Context) (bool, error) {
				code, body := get(t, p.url(path), cp.Tokens[framework.ViewerUser])
				return code == http.StatusOK && strings.Contains(body, content), nil
			})
		}
	})
	t.Run("configz for admin", func(t *testing.T) {
		code, body := get(t, p.url("/configz"), cp.Tokens[framework.AdminUser])
		if code != http.StatusOK || !strings.Contains(body, `"kubecontrollermanager.config.k8s.io"`) || !strings.Contains(body, "ConcurrentDeploymentSyncs") {
			t.Fatalf("/configz = %d %s", code, tail(body, 400))
		}
	})
}
