package serviceaccount

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const testCA = "-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n"

type tokensFixture struct {
	t       *testing.T
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	tc      *TokensController
}

// newTokensFixture puts objs into the fake API and into the caches (the
// informers are not started) so tests call the syncs directly.
func newTokensFixture(t *testing.T, gen TokenGenerator, objs ...runtime.Object) *tokensFixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	if gen == nil {
		var err error
		if gen, err = JWTTokenGenerator(LegacyIssuer, testRSAKey(t)); err != nil {
			t.Fatal(err)
		}
	}
	tc, err := NewTokensController(klog.Background(), factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), client,
		TokensControllerOptions{TokenGenerator: gen, RootCA: []byte(testCA)})
	if err != nil {
		t.Fatal(err)
	}
	f := &tokensFixture{t: t, client: client, factory: factory, tc: tc}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.ServiceAccount:
			mustAdd(t, factory.Core().V1().ServiceAccounts().Informer().GetIndexer(), o)
		case *v1.Secret:
			mustAdd(t, factory.Core().V1().Secrets().Informer().GetIndexer(), o)
		}
	}
	return f
}

func (f *tokensFixture) syncSecret(s *v1.Secret) error {
	return f.tc.syncSecret(testCtx(f.t), makeSecretQueueKey(s))
}

func (f *tokensFixture) syncSA(sa *v1.ServiceAccount) error {
	return f.tc.syncServiceAccount(testCtx(f.t), makeServiceAccountKey(sa))
}

// writes are the mutating actions, as "verb resource/name".
func (f *tokensFixture) writes() []clienttesting.Action {
	return testutil.AllWrites(f.client)
}

func (f *tokensFixture) onlyUpdatedSecret() *v1.Secret {
	f.t.Helper()
	w := f.writes()
	if len(w) != 1 || w[0].GetVerb() != "update" || w[0].GetResource().Resource != "secrets" {
		f.t.Fatalf("want one secret update, got %v", w)
	}
	return w[0].(clienttesting.UpdateAction).GetObject().(*v1.Secret)
}

func tokenSecret(name, saName, saUID string, data map[string][]byte) *v1.Secret {
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       "ns",
			Name:            name,
			UID:             types.UID(name + "-uid"),
			ResourceVersion: "1",
			Annotations:     map[string]string{v1.ServiceAccountNameKey: saName},
		},
		Type: v1.SecretTypeServiceAccountToken,
		Data: data,
	}
	if saUID != "" {
		s.Annotations[v1.ServiceAccountUIDKey] = saUID
	}
	return s
}

func TestTokenSecretPopulated(t *testing.T) {
	sa := serviceAccount("ns", "builder", "sa-uid")
	secret := tokenSecret("builder-token", "builder", "", nil)
	f := newTokensFixture(t, nil, sa, secret)
	if err := f.syncSecret(secret); err != nil {
		t.Fatal(err)
	}
	got := f.onlyUpdatedSecret()
	if string(got.Data[v1.ServiceAccountRootCAKey]) != testCA {
		t.Errorf("ca.crt %q", got.Data[v1.ServiceAccountRootCAKey])
	}
	if string(got.Data[v1.ServiceAccountNamespaceKey]) != "ns" {
		t.Errorf("namespace %q", got.Data[v1.ServiceAccountNamespaceKey])
	}
	if got.Annotations[v1.ServiceAccountNameKey] != "builder" || got.Annotations[v1.ServiceAccountUIDKey] != "sa-uid" {
		t.Errorf("annotations %v", got.Annotations)
	}
	header, claims := verifyJWT(t, string(got.Data[v1.ServiceAccountTokenKey]), testRSAKey(t).Public())
	if header["kid"] != expectedKID(t, testRSAKey(t).Public()) {
		t.Errorf("kid %q", header["kid"])
	}
	want := map[string]string{
		"iss":                                    "kubernetes/serviceaccount",
		"sub":                                    "system:serviceaccount:ns:builder",
		"kubernetes.io/serviceaccount/namespace": "ns",
		"kubernetes.io/serviceaccount/secret.name":          "builder-token",
		"kubernetes.io/serviceaccount/service-account.name": "builder",
		"kubernetes.io/serviceaccount/service-account.uid":  "sa-uid",
	}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %q", k, claims[k], v)
		}
	}
	if len(claims) != len(want) {
		t.Errorf("claims %v, want exactly %v", claims, want)
	}
}

func TestTokenSecretPartialUpdates(t *testing.T) {
	cases := map[string]struct {
		data       map[string][]byte
		rootCA     string
		wantUpdate bool
		wantData   map[string]string
	}{
		"complete secret is left alone": {
			data: map[string][]byte{"token": []byte("t"), "ca.crt": []byte(testCA), "namespace": []byte("ns")},
		},
		"mismatched ca is replaced, token kept": {
			data:       map[string][]byte{"token": []byte("t"), "ca.crt": []byte("old"), "namespace": []byte("ns")},
			wantUpdate: true,
			wantData:   map[string]string{"token": "t", "ca.crt": testCA, "namespace": "ns"},
		},
		"missing namespace is filled": {
			data:       map[string][]byte{"token": []byte("t"), "ca.crt": []byte(testCA)},
			wantUpdate: true,
			wantData:   map[string]string{"token": "t", "ca.crt": testCA, "namespace": "ns"},
		},
		"custom namespace data is kept": {
			data: map[string][]byte{"token": []byte("t"), "ca.crt": []byte(testCA), "namespace": []byte("custom")},
		},
		"no root CA configured leaves ca.crt alone": {
			data:   map[string][]byte{"token": []byte("t"), "ca.crt": []byte("mine"), "namespace": []byte("ns")},
			rootCA: "none",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sa := serviceAccount("ns", "builder", "sa-uid")
			secret := tokenSecret("builder-token", "builder", "sa-uid", tc.data)
			f := newTokensFixture(t, nil, sa, secret)
			if tc.rootCA == "none" {
				f.tc.rootCA = nil
			}
			if err := f.syncSecret(secret); err != nil {
				t.Fatal(err)
			}
			if !tc.wantUpdate {
				if w := f.writes(); len(w) != 0 {
					t.Fatalf("unexpected writes %v", w)
				}
				return
			}
			got := f.onlyUpdatedSecret()
			if len(got.Data) != len(tc.wantData) {
				t.Fatalf("data %v, want %v", got.Data, tc.wantData)
			}
			for k, v := range tc.wantData {
				if string(got.Data[k]) != v {
					t.Errorf("%s = %q, want %q", k, got.Data[k], v)
				}
			}
		})
	}
}

// A token Secret naming a ServiceAccount that does not exist, or exists
// with another UID, is deleted with a UID precondition.
func TestTokenSecretDeletedWithoutServiceAccount(t *testing.T) {
	cases := map[string][]runtime.Object{
		"service account missing":      nil,
		"service account UID mismatch": {serviceAccount("ns", "builder", "new-uid")},
	}
	for name, objs := range cases {
		t.Run(name, func(t *testing.T) {
			secret := tokenSecret("builder-token", "builder", "old-uid", map[string][]byte{"token": []byte("t")})
			f := newTokensFixture(t, nil, append(objs, secret)...)
			if err := f.syncSecret(secret); err != nil {
				t.Fatal(err)
			}
			w := f.writes()
			if len(w) != 1 || w[0].GetVerb() != "delete" {
				t.Fatalf("want one delete, got %v", w)
			}
			del := w[0].(clienttesting.DeleteAction)
			if del.GetName() != "builder-token" || del.GetDeleteOptions().Preconditions == nil ||
				*del.GetDeleteOptions().Preconditions.UID != secret.UID {
				t.Fatalf("delete %s with %+v", del.GetName(), del.GetDeleteOptions())
			}
		})
	}
}

// A ServiceAccount created after the cache was filled is found by a live
// GET, so its brand-new token is populated rather than deleted.
func TestTokenSecretServiceAccountCacheMiss(t *testing.T) {
	secret := tokenSecret("builder-token", "builder", "", nil)
	f := newTokensFixture(t, nil, secret)
	if _, err := f.client.CoreV1().ServiceAccounts("ns").Create(context.Background(), serviceAccount("ns", "builder", "sa-uid"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if err := f.syncSecret(secret); err != nil {
		t.Fatal(err)
	}
	if got := f.onlyUpdatedSecret(); len(got.Data[v1.ServiceAccountTokenKey]) == 0 {
		t.Fatal("token not populated")
	}
}

func TestServiceAccountDeletedRemovesItsTokens(t *testing.T) {
	gone := serviceAccount("ns", "builder", "sa-uid")
	mine := tokenSecret("mine", "builder", "sa-uid", nil)
	noUID := tokenSecret("no-uid", "builder", "", nil)
	otherIncarnation := tokenSecret("other-incarnation", "builder", "older-uid", nil)
	otherSA := tokenSecret("other-sa", "deployer", "d-uid", nil)
	opaque := tokenSecret("opaque", "builder", "sa-uid", nil)
	opaque.Type = v1.SecretTypeOpaque
	f := newTokensFixture(t, nil, mine, noUID, otherIncarnation, otherSA, opaque)
	if err := f.syncSA(gone); err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, a := range f.writes() {
		if a.GetVerb() != "delete" {
			t.Fatalf("unexpected %v", a)
		}
		deleted[a.(clienttesting.DeleteAction).GetName()] = true
	}
	if len(deleted) != 2 || !deleted["mine"] || !deleted["no-uid"] {
		t.Fatalf("deleted %v, want mine and no-uid", deleted)
	}

	// A ServiceAccount still in the cache keeps its tokens.
	f = newTokensFixture(t, nil, gone, mine)
	if err := f.syncSA(gone); err != nil {
		t.Fatal(err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("unexpected writes %v", w)
	}
}

func TestDeletedTokenReferenceRemoved(t *testing.T) {
	sa := serviceAccount("ns", "builder", "sa-uid")
	sa.Secrets = []v1.ObjectReference{{Name: "keep"}, {Name: "builder-token"}}
	gone := tokenSecret("builder-token", "builder", "sa-uid", nil)
	f := newTokensFixture(t, nil, sa) // the Secret is not in the cache
	if err := f.syncSecret(gone); err != nil {
		t.Fatal(err)
	}
	w := f.writes()
	if len(w) != 1 || w[0].GetVerb() != "update" {
		t.Fatalf("want one ServiceAccount update, got %v", w)
	}
	got := w[0].(clienttesting.UpdateAction).GetObject().(*v1.ServiceAccount)
	if len(got.Secrets) != 1 || got.Secrets[0].Name != "keep" {
		t.Fatalf("secrets %v", got.Secrets)
	}
}

func TestTokenSyncRetries(t *testing.T) {
	sa := serviceAccount("ns", "builder", "sa-uid")
	cases := map[string]struct {
		verb, resource string
		err            error
		gen            TokenGenerator
		staleCache     bool
		wantRetry      bool
	}{
		"update conflict waits for the next event": {verb: "update", resource: "secrets", err: apierrors.NewConflict(v1.Resource("secrets"), "builder-token", errors.New("x"))},
		"update not found is done":                 {verb: "update", resource: "secrets", err: apierrors.NewNotFound(v1.Resource("secrets"), "builder-token")},
		"update server error is retried":           {verb: "update", resource: "secrets", err: apierrors.NewInternalError(errors.New("x")), wantRetry: true},
		"get server error is retried":              {verb: "get", resource: "secrets", err: apierrors.NewInternalError(errors.New("x")), wantRetry: true},
		"signing failure is not retried":           {gen: failingGenerator{}},
		"stale cache skips the update":             {staleCache: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			secret := tokenSecret("builder-token", "builder", "sa-uid", nil)
			f := newTokensFixture(t, tc.gen, sa, secret)
			if tc.err != nil {
				f.client.PrependReactor(tc.verb, tc.resource, func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
			}
			if tc.staleCache {
				stale := secret.DeepCopy()
				stale.ResourceVersion = "0"
				mustAdd(t, f.factory.Core().V1().Secrets().Informer().GetIndexer(), stale)
				secret = stale
			}
			err := f.syncSecret(secret)
			if (err != nil) != tc.wantRetry {
				t.Fatalf("sync returned %v, want retry %v", err, tc.wantRetry)
			}
			if tc.staleCache || tc.gen != nil {
				if w := f.writes(); len(w) != 0 {
					t.Fatalf("unexpected writes %v", w)
				}
			}
		})
	}

	// Deleting a token: NotFound and Conflict are final, others retried.
	for name, tc := range map[string]struct {
		err       error
		wantRetry bool
	}{
		"not found": {err: apierrors.NewNotFound(v1.Resource("secrets"), "t")},
		"conflict":  {err: apierrors.NewConflict(v1.Resource("secrets"), "t", errors.New("uid"))},
		"internal":  {err: apierrors.NewInternalError(errors.New("x")), wantRetry: true},
	} {
		t.Run("delete "+name, func(t *testing.T) {
			secret := tokenSecret("t", "gone", "", nil)
			f := newTokensFixture(t, nil, secret)
			f.client.PrependReactor("delete", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			if err := f.syncSecret(secret); (err != nil) != tc.wantRetry {
				t.Fatalf("sync returned %v, want retry %v", err, tc.wantRetry)
			}
			if err := f.syncSA(serviceAccount("ns", "gone", "x")); (err != nil) != tc.wantRetry {
				t.Fatalf("service account sync returned %v, want retry %v", err, tc.wantRetry)
			}
		})
	}
}

func TestTokensEventHandlers(t *testing.T) {
	f := newTokensFixture(t, nil)
	sa := serviceAccount("ns", "builder", "sa-uid")
	f.tc.queueServiceAccountSync(cache.DeletedFinalStateUnknown{Key: "ns/builder", Obj: sa})
	if f.tc.syncServiceAccountQueue.Len() != 1 {
		t.Fatal("tombstoned ServiceAccount not enqueued")
	}
	secret := tokenSecret("t", "builder", "sa-uid", nil)
	f.tc.queueSecretSync(cache.DeletedFinalStateUnknown{Key: "ns/t", Obj: secret})
	k, _ := f.tc.syncSecretQueue.Get()
	want := secretQueueKey{namespace: "ns", name: "t", uid: "t-uid", saName: "builder", saUID: "sa-uid"}
	if k != want {
		t.Fatalf("key %+v, want %+v", k, want)
	}
	f.tc.syncSecretQueue.Done(k)

	// Invalid keys are dropped without API calls.
	if err := f.tc.syncSecret(testCtx(t), secretQueueKey{namespace: "ns", name: "t", uid: "u"}); err != nil {
		t.Fatal(err)
	}
	if err := f.tc.syncServiceAccount(testCtx(t), serviceAccountQueueKey{namespace: "ns", name: "sa"}); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions %v", f.client.Actions())
	}
}

func TestNewTokensControllerNeedsGenerator(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	if _, err := NewTokensController(klog.Background(), factory.Core().V1().ServiceAccounts(), factory.Core().V1().Secrets(), fake.NewClientset(), TokensControllerOptions{}); err == nil {
		t.Fatal("expected an error without a TokenGenerator")
	}
}

// End to end through informers: a token Secret gets populated; deleting
// its ServiceAccount deletes it.
func TestTokensControllerRun(t *testing.T) {
	f := newTokensFixture(t, nil)
	ctx := runInBackground(t, f.factory, func(ctx context.Context) { f.tc.Run(ctx, 2) })

	if _, err := f.client.CoreV1().ServiceAccounts("ns").Create(ctx, serviceAccount("ns", "builder", "sa-uid"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := tokenSecret("builder-token", "builder", "", nil)
	secret.ResourceVersion = ""
	if _, err := f.client.CoreV1().Secrets("ns").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "token populated", func(ctx context.Context) bool {
		s, err := f.client.CoreV1().Secrets("ns").Get(ctx, "builder-token", metav1.GetOptions{})
		return err == nil && len(s.Data[v1.ServiceAccountTokenKey]) > 0 && s.Annotations[v1.ServiceAccountUIDKey] == "sa-uid"
	})
	if err := f.client.CoreV1().ServiceAccounts("ns").Delete(ctx, "builder", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "token deleted", func(ctx context.Context) bool {
		_, err := f.client.CoreV1().Secrets("ns").Get(ctx, "builder-token", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func poll(t *testing.T, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	testutil.WaitUntil(t, what, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	})
}
