package clientbuilder

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// tokenServer mints numbered tokens through a fake clientset and plays an
// apiserver that refuses revoked tokens with 401.
type tokenServer struct {
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	srv    *httptest.Server

	mu       sync.Mutex
	minted   int
	failMint bool
	revoked  map[string]bool
	seen     []string
}

func newTokenServer(t *testing.T) *tokenServer {
	t.Helper()
	saved := tokenBackoff
	tokenBackoff = wait.Backoff{Duration: time.Millisecond, Steps: 2}
	t.Cleanup(func() { tokenBackoff = saved })

	ts := &tokenServer{client: fake.NewClientset(), clock: clocktesting.NewFakeClock(time.Now()), revoked: map[string]bool{}}
	ts.client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.failMint {
			return true, nil, apierrors.NewInternalError(fmt.Errorf("mint failed"))
		}
		ts.minted++
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token:               fmt.Sprintf("tok-%d", ts.minted),
			ExpirationTimestamp: metav1.NewTime(ts.clock.Now().Add(time.Hour)),
		}}, nil
	})
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		ts.mu.Lock()
		ts.seen = append(ts.seen, tok)
		revoked := ts.revoked[tok]
		ts.mu.Unlock()
		if revoked {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) revoke(tok string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.revoked[tok] = true
}

func (ts *tokenServer) lastSeen() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.seen[len(ts.seen)-1]
}

// get sends one request through the builder's config for name and returns
// the status code.
func (ts *tokenServer) get(t *testing.T, b *ServiceAccount, name string) int {
	t.Helper()
	cfg, err := b.Config(name)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := restclient.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(ts.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (ts *tokenServer) builder() *ServiceAccount {
	b := NewServiceAccount(&restclient.Config{Host: ts.srv.URL}, ts.client.CoreV1(), "kube-system")
	b.Clock = ts.clock
	return b
}

func TestServiceAccountTokenIsCachedUntilNearExpiry(t *testing.T) {
	ts := newTokenServer(t)
	b := ts.builder()
	for range 3 {
		if code := ts.get(t, b, "deployment-controller"); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
	}
	if ts.minted != 1 || ts.lastSeen() != "tok-1" {
		t.Fatalf("minted %d, last token %s; want one token reused", ts.minted, ts.lastSeen())
	}
	// 80% of the hour later (the 20% leeway) a new token is fetched.
	ts.clock.Step(47 * time.Minute)
	ts.get(t, b, "deployment-controller")
	if ts.lastSeen() != "tok-1" {
		t.Fatalf("token replaced early: %s", ts.lastSeen())
	}
	ts.clock.Step(2 * time.Minute)
	ts.get(t, b, "deployment-controller")
	if ts.lastSeen() != "tok-2" {
		t.Fatalf("token after expiry leeway: %s, want tok-2", ts.lastSeen())
	}
	if _, err := ts.client.CoreV1().ServiceAccounts("kube-system").Get(context.Background(), "deployment-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("service account not created: %v", err)
	}
}

// A 401 drops the token: the request that got it fails, the next one runs
// with a new token.
func TestServiceAccountTokenDroppedOn401(t *testing.T) {
	ts := newTokenServer(t)
	b := ts.builder()
	if code := ts.get(t, b, "job-controller"); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	ts.clock.Step(time.Second)
	ts.revoke("tok-1")
	if code := ts.get(t, b, "job-controller"); code != http.StatusUnauthorized {
		t.Fatalf("status %d with the revoked token, want 401", code)
	}
	if code := ts.get(t, b, "job-controller"); code != http.StatusOK || ts.lastSeen() != "tok-2" {
		t.Fatalf("after a 401: status %d with %s, want 200 with tok-2", code, ts.lastSeen())
	}
	// A client built later for the same account shares the new token.
	ts.get(t, b, "job-controller")
	if ts.minted != 2 {
		t.Errorf("minted %d tokens, want 2", ts.minted)
	}
}

// A 401 to a request sent before the current token was minted does not
// throw that token away.
func TestOld401KeepsNewerToken(t *testing.T) {
	ts := newTokenServer(t)
	src := &tokenSource{core: ts.client.CoreV1(), namespace: "kube-system", name: "x", clock: ts.clock}
	start := ts.clock.Now()
	ts.clock.Step(time.Second)
	if _, err := src.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	src.expireIfOlderThan(start)
	if tok, _ := src.Token(context.Background()); tok != "tok-1" || ts.minted != 1 {
		t.Errorf("token %s after %d mints; the newer token must be kept", tok, ts.minted)
	}
	src.expireIfOlderThan(ts.clock.Now().Add(time.Second))
	if tok, _ := src.Token(context.Background()); tok != "tok-2" {
		t.Errorf("token %s, want tok-2 once the held one is older than the 401", tok)
	}
}

// When no new token can be minted, the token held is used rather than
// failing every request.
func TestServiceAccountKeepsTokenWhenMintingFails(t *testing.T) {
	ts := newTokenServer(t)
	b := ts.builder()
	ts.get(t, b, "cronjob-controller")
	ts.clock.Step(time.Hour)
	ts.mu.Lock()
	ts.failMint = true
	ts.mu.Unlock()
	if code := ts.get(t, b, "cronjob-controller"); code != http.StatusOK || ts.lastSeen() != "tok-1" {
		t.Errorf("status %d with %s, want the held tok-1", code, ts.lastSeen())
	}

	// Without any token held the request fails.
	cfg, err := b.Config("other-controller")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := restclient.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Transport: rt}).Get(ts.srv.URL); err == nil {
		_ = resp.Body.Close()
		t.Error("request without any token succeeded")
	}
}

// A manager that may not create namespaces still gets its accounts when
// the namespace exists after all (created by someone else meanwhile).
func TestNamespaceCreateFailureIsNotFatal(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "kube-system", fmt.Errorf("no"))
	})
	if err := getOrCreateServiceAccount(context.Background(), client.CoreV1(), "kube-system", "ttl-controller"); err != nil {
		t.Fatalf("forbidden namespace create failed the account: %v", err)
	}
	if _, err := client.CoreV1().ServiceAccounts("kube-system").Get(context.Background(), "ttl-controller", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	// An existing account needs no write at all.
	client.ClearActions()
	if err := getOrCreateServiceAccount(context.Background(), client.CoreV1(), "kube-system", "ttl-controller"); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

func TestSimpleBuilderNamesUserAgent(t *testing.T) {
	b := Simple{ClientConfig: &restclient.Config{Host: "https://example", UserAgent: "kube-controller-manager"}}
	cfg, err := b.Config("replicaset-controller")
	if err != nil {
		t.Fatal(err)
	}
	// As upstream: the binary's default user agent, then the name.
	if want := restclient.DefaultKubernetesUserAgent() + "/replicaset-controller"; cfg.UserAgent != want {
		t.Errorf("user agent %q, want %q", cfg.UserAgent, want)
	}
	if b.ClientConfig.UserAgent != "kube-controller-manager" {
		t.Error("base config modified")
	}
}

// Discovery keeps upstream's own limits whatever the base config says.
func TestDiscoveryLimits(t *testing.T) {
	cfg := withDiscoveryLimits(&restclient.Config{QPS: 5, Burst: 10})
	if cfg.QPS != 20 || cfg.Burst != 200 {
		t.Errorf("QPS %v burst %d, want 20 and 200", cfg.QPS, cfg.Burst)
	}
}
