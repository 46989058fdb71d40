package clientbuilder

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientset "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// Token lifetime requested, and the share of it left when we renew:
	// upstream's values, so the apiserver sees the same request pattern.
	tokenExpirationSeconds = int64(3600)
	tokenLeewayPercent     = 20
	minTokenLifetime       = 10 * time.Minute
)

// tokenBackoff paces TokenRequest retries within one Token call (upstream's
// pacing); tests shorten it.
var tokenBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 4}

// ServiceAccount gives each controller the credentials of ServiceAccount
// <namespace>/<name>, created on demand, through short-lived TokenRequest
// tokens refreshed before they expire. Upstream's bootstrap RBAC roles
// (system:controller:<name>) bind to exactly these accounts.
type ServiceAccount struct {
	// ClientConfig is an anonymous config (no credentials) to clone.
	ClientConfig *restclient.Config
	CoreClient   corev1client.CoreV1Interface
	Namespace    string
	Clock        clock.Clock

	mu      sync.Mutex
	sources map[string]*tokenSource
}

var _ ControllerClientBuilder = &ServiceAccount{}

// NewServiceAccount returns a builder minting tokens in namespace.
func NewServiceAccount(anonymous *restclient.Config, core corev1client.CoreV1Interface, namespace string) *ServiceAccount {
	return &ServiceAccount{ClientConfig: anonymous, CoreClient: core, Namespace: namespace, Clock: clock.RealClock{}}
}

// ServiceAccountUsername is how the apiserver names a ServiceAccount user.
func ServiceAccountUsername(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

func (b *ServiceAccount) Config(name string) (*restclient.Config, error) {
	if err := getOrCreateServiceAccount(context.TODO(), b.CoreClient, b.Namespace, name); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.sources == nil {
		b.sources = map[string]*tokenSource{}
	}
	ts, ok := b.sources[name]
	if !ok {
		ts = &tokenSource{core: b.CoreClient, namespace: b.Namespace, name: name, clock: b.Clock}
		b.sources[name] = ts
	}
	b.mu.Unlock()

	cfg := restclient.CopyConfig(b.ClientConfig)
	restclient.AddUserAgent(cfg, ServiceAccountUsername(b.Namespace, name))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &bearerRoundTripper{source: ts, next: rt} })
	return cfg, nil
}

func (b *ServiceAccount) Client(name string) (clientset.Interface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	return clientset.NewForConfig(cfg)
}

func (b *ServiceAccount) DiscoveryClient(name string) (discovery.DiscoveryInterface, error) {
	cfg, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	c, err := clientset.NewForConfig(withDiscoveryLimits(cfg))
	if err != nil {
		return nil, err
	}
	return c.Discovery(), nil
}

type tokenSource struct {
	core      corev1client.CoreV1Interface
	namespace string
	name      string
	clock     clock.Clock

	mu       sync.Mutex
	token    string
	expiry   time.Time
	obtained time.Time
}

// Token returns a cached token, or a fresh one once the cached one is
// within the leeway of its expiry or was dropped after a 401. When no
// fresh one can be had, a token still held is used, as upstream does: the
// apiserver may well accept it.
func (ts *tokenSource) Token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.token != "" && ts.clock.Now().Before(ts.expiry) {
		return ts.token, nil
	}
	var tr *authenticationv1.TokenRequest
	err := wait.ExponentialBackoffWithContext(ctx, tokenBackoff, func(ctx context.Context) (bool, error) {
		if err := getOrCreateServiceAccount(ctx, ts.core, ts.namespace, ts.name); err != nil {
			klog.FromContext(ctx).Info("Getting or creating service account failed", "serviceAccount", klog.KRef(ts.namespace, ts.name), "err", err)
			return false, nil
		}
		exp := tokenExpirationSeconds
		got, err := ts.core.ServiceAccounts(ts.namespace).CreateToken(ctx, ts.name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
		}, metav1.CreateOptions{})
		if err != nil {
			klog.FromContext(ctx).Info("Requesting token failed", "serviceAccount", klog.KRef(ts.namespace, ts.name), "err", err)
			return false, nil
		}
		tr = got
		return true, nil
	})
	if err != nil {
		err = fmt.Errorf("failed to get token for %s/%s: %w", ts.namespace, ts.name, err)
		if ts.token != "" {
			klog.FromContext(ctx).Error(err, "Unable to rotate token")
			return ts.token, nil
		}
		return "", err
	}
	lifetime := tr.Status.ExpirationTimestamp.Sub(ts.clock.Now())
	if lifetime < minTokenLifetime {
		// Probably clock skew: trust the minimum lifetime instead.
		lifetime = minTokenLifetime
	}
	leeway := time.Duration(int64(lifetime) * tokenLeewayPercent / 100)
	ts.token = tr.Status.Token
	ts.obtained = ts.clock.Now()
	ts.expiry = ts.obtained.Add(lifetime - leeway)
	return ts.token, nil
}

// expireIfOlderThan makes the next Token call ask for a new token, unless
// the one held was obtained at or after t: a 401 to a request sent with an
// older token must not throw away a token fetched since.
func (ts *tokenSource) expireIfOlderThan(t time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.obtained.Before(t) {
		ts.expiry = time.Time{}
	}
}

type bearerRoundTripper struct {
	source *tokenSource
	next   http.RoundTripper
}

func (rt *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return rt.next.RoundTrip(req)
	}
	// Taken before the token, so a token fetched during this request is
	// not the one a 401 throws away.
	start := rt.source.clock.Now()
	tok, err := rt.source.Token(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := rt.next.RoundTrip(req)
	if err == nil && resp != nil && resp.StatusCode == http.StatusUnauthorized {
		// The token was revoked or its account recreated: the next request
		// asks for a new one instead of failing until it expires.
		rt.source.expireIfOlderThan(start)
	}
	return resp, err
}

func (rt *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return rt.next }

func getOrCreateServiceAccount(ctx context.Context, core corev1client.CoreV1Interface, namespace, name string) error {
	if _, err := core.ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	// The manager may lack the right to create namespaces; a failure here
	// is only a warning, and creating the account says what is wrong.
	if _, err := core.Namespaces().Get(ctx, namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = core.Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			klog.FromContext(ctx).Info("Warning: creating the missing namespace failed", "namespace", namespace, "err", err)
		}
	}
	_, err := core.ServiceAccounts(namespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
