package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// debugControllers is the part of /debug/controllers' JSON the test reads.
type debugControllers struct {
	Controllers []struct {
		Name            string   `json:"name"`
		Running         bool     `json:"running"`
		Workers         int      `json:"workers"`
		Queues          []string `json:"queues"`
		QueueDepth      *int     `json:"queueDepth"`
		InformersSynced *bool    `json:"informersSynced"`
		LastError       *struct {
			Key     string `json:"key"`
			Message string `json:"message"`
		} `json:"lastError"`
	} `json:"controllers"`
}

func getJSON(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := framework.InsecureHTTPClient().Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDebugControllers(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ctx := context.Background()

	started := []string{"replicaset-controller", "deployment-controller", "resourcequota-controller", "garbage-collector-controller"}
	p := startKCM(t, "--leader-elect=false", "--controllers="+strings.Join(started, ","))

	// A ReplicaSet whose pods a quota forbids: every sync of it fails.
	ns, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "debug-controllers-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quota := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec:       v1.ResourceQuotaSpec{Hard: v1.ResourceList{v1.ResourcePods: resource.MustParse("0")}},
	}
	if _, err := c.CoreV1().ResourceQuotas(ns.Name).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the quota controller has computed its status, quota admission
	// refuses every pod of the namespace.
	framework.Eventually(t, 120*time.Second, "the quota's status", func(ctx context.Context) (bool, error) {
		q, err := c.CoreV1().ResourceQuotas(ns.Name).Get(ctx, quota.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := q.Status.Hard[v1.ResourcePods]
		return ok, nil
	})
	labels := map[string]string{"app": "forbidden"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "forbidden"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	if _, err := c.AppsV1().ReplicaSets(ns.Name).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rsKey := ns.Name + "/" + rs.Name

	page := p.url("/debug/controllers")
	var (
		view debugControllers
		last string
	)
	defer func() {
		if t.Failed() {
			t.Logf("last /debug/controllers:\n%s", tail(last, 6000))
		}
	}()
	framework.Eventually(t, 120*time.Second, "every started controller running with synced informers, and the ReplicaSet's error", func(context.Context) (bool, error) {
		code, body := getJSON(t, page, cp.Tokens[framework.AdminUser])
		last = body
		if code != http.StatusOK {
			return false, nil
		}
		view = debugControllers{}
		if err := json.Unmarshal([]byte(body), &view); err != nil {
			return false, fmt.Errorf("decoding %s: %w", tail(body, 400), err)
		}
		seen := map[string]bool{}
		for _, ctrl := range view.Controllers {
			if ctrl.Running && ctrl.InformersSynced != nil && *ctrl.InformersSynced && ctrl.QueueDepth != nil {
				seen[ctrl.Name] = true
			}
			if ctrl.Name == "replicaset-controller" && (ctrl.LastError == nil || ctrl.LastError.Key != rsKey) {
				return false, nil
			}
		}
		for _, name := range started {
			if !seen[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if len(view.Controllers) != len(started) {
		t.Errorf("page lists %d controllers, want the %d started: %+v", len(view.Controllers), len(started), view.Controllers)
	}
	for _, ctrl := range view.Controllers {
		if ctrl.Name == "replicaset-controller" {
			if !strings.Contains(ctrl.LastError.Message, "forbidden") || ctrl.Workers == 0 || len(ctrl.Queues) == 0 {
				t.Errorf("replicaset-controller row = %+v, want workers, queues and the quota's refusal", ctrl)
			}
		}
	}

	t.Run("authorized as metrics", func(t *testing.T) {
		if code, _ := get(t, page, ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("without credentials = %d, want 401 or 403", code)
		}
		// The viewer is authenticated but may not read /debug/controllers.
		if code, _ := get(t, page, cp.Tokens[framework.ViewerUser]); code != http.StatusForbidden {
			t.Errorf("viewer without a grant = %d, want 403", code)
		}
		if code, body := get(t, page, cp.Tokens[framework.AdminUser]); code != http.StatusOK || !strings.Contains(body, "<table>") {
			t.Errorf("admin, HTML = %d %s", code, tail(body, 300))
		}
	})

	t.Run("rendered by headless chromium", func(t *testing.T) {
		renderInChromium(t, p, cp.Tokens[framework.AdminUser], rsKey)
	})
}

// renderInChromium opens the page in headless Chromium through a local
// proxy that adds the bearer token (a browser has no flag for it), checks
// the rendered DOM and keeps a screenshot in _output/debug-controllers.png.
func renderInChromium(t *testing.T, p *kcmProcess, token, wantText string) {
	script := filepath.Join(framework.RepoRoot(), "hack", "chromium.sh")
	out, err := exec.Command(script).Output()
	chromium := strings.TrimSpace(string(out))
	if err != nil || chromium == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("hack/chromium.sh could not find or install chromium: %v", err)
		}
		t.Skipf("headless Chromium is unavailable and hack/chromium.sh could not install it (%v); the page's HTML is still checked above", err)
	}

	target, _ := url.Parse(p.url("/"))
	proxy := &httputil.ReverseProxy{
		Transport: framework.InsecureHTTPClient().Transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
	}
	srv := httptest.NewServer(proxy)
	defer srv.Close()

	outDir := filepath.Join(framework.RepoRoot(), "_output")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(outDir, "debug-controllers.png")
	_ = os.Remove(shot)
	profile := t.TempDir()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir=" + profile, "--window-size=1600,900"}
	page := srv.URL + "/debug/controllers"

	cmdCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dom, err := exec.CommandContext(cmdCtx, chromium, append(args, "--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, want := range []string{"replicaset-controller", "garbage-collector-controller", wantText, "forbidden"} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("rendered page lacks %q:\n%s", want, tail(string(dom), 3000))
		}
	}
	if outb, err := exec.CommandContext(cmdCtx, chromium, append(args, "--screenshot="+shot, page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, tail(string(outb), 2000))
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Fatalf("no screenshot at %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
