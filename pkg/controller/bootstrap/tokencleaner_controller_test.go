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
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	testingclock "k8s.io/utils/clock/testing"
)

func newCleaner(t *testing.T, objs ...runtime.Object) (*TokenCleaner, *fake.Clientset, *recordingQueue) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	tc, err := NewTokenCleaner(client, factory.Core().V1().Secrets(), DefaultTokenCleanerOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := factory.Core().V1().Secrets().Informer().GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	tc.clock = testingclock.NewFakePassiveClock(testNow)
	q := newRecordingQueue()
	tc.queue = q
	return tc, client, q
}

func TestTokenCleanerSync(t *testing.T) {
	in := func(d time.Duration) string { return testNow.Add(d).Format(time.RFC3339) }
	opaque := withExpiration(tokenSecret("bbbbbb", "b"), in(-time.Hour))
	opaque.Type = v1.SecretTypeOpaque
	cases := []struct {
		name       string
		secret     *v1.Secret
		wantDelete bool
		wantAfter  time.Duration
	}{
		{name: "expired", secret: withExpiration(tokenSecret("aaaaaa", "a"), in(-time.Second)), wantDelete: true},
		{name: "expiring right now", secret: withExpiration(tokenSecret("aaaaaa", "a"), in(0)), wantDelete: true},
		{name: "unparseable expiration", secret: withExpiration(tokenSecret("aaaaaa", "a"), "next week"), wantDelete: true},
		// Signing or not, well-formed or not: only the expiration matters.
		{name: "expired odd token", secret: func() *v1.Secret {
			s := withExpiration(tokenSecret("aaaaaa", "a"), in(-time.Hour))
			s.Name = "my-token"
			delete(s.Data, bootstrapapi.BootstrapTokenUsageSigningKey)
			return s
		}(), wantDelete: true},
		{name: "expires later", secret: withExpiration(tokenSecret("aaaaaa", "a"), in(90*time.Minute)), wantAfter: 90 * time.Minute},
		{name: "never expires", secret: tokenSecret("aaaaaa", "a")},
		{name: "not a token", secret: opaque},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, client, q := newCleaner(t, tc.secret)
			key := tc.secret.Namespace + "/" + tc.secret.Name
			if err := c.syncSecret(testCtx(t), key); err != nil {
				t.Fatal(err)
			}
			w := writes(client)
			if !tc.wantDelete {
				if len(w) != 0 {
					t.Fatalf("expected no writes, got %v", w)
				}
			} else {
				if len(w) != 1 {
					t.Fatalf("expected one delete, got %v", w)
				}
				d, ok := w[0].(clienttesting.DeleteActionImpl)
				if !ok || d.GetName() != tc.secret.Name || d.GetNamespace() != "kube-system" {
					t.Fatalf("expected one delete of the Secret, got %v", w)
				}
				if p := d.DeleteOptions.Preconditions; p == nil || p.UID == nil || *p.UID != tc.secret.UID {
					t.Fatalf("delete preconditions %+v, want the Secret's UID", p)
				}
			}
			want := map[string]time.Duration{}
			if tc.wantAfter > 0 {
				want[key] = tc.wantAfter
			}
			if got := q.delays(); !maps.Equal(got, want) {
				t.Fatalf("AddAfter calls %v, want %v", got, want)
			}
		})
	}
}

func TestTokenCleanerSyncMissing(t *testing.T) {
	c, client, _ := newCleaner(t)
	if err := c.syncSecret(testCtx(t), "kube-system/bootstrap-token-aaaaaa"); err != nil {
		t.Fatal(err)
	}
	if len(writes(client)) != 0 {
		t.Fatalf("wrote %v", writes(client))
	}
}

func TestTokenCleanerNoUIDNoPrecondition(t *testing.T) {
	s := withExpiration(tokenSecret("aaaaaa", "a"), testNow.Add(-time.Hour).Format(time.RFC3339))
	s.UID = ""
	c, client, _ := newCleaner(t, s)
	if err := c.syncSecret(testCtx(t), "kube-system/bootstrap-token-aaaaaa"); err != nil {
		t.Fatal(err)
	}
	if d := writes(client)[0].(clienttesting.DeleteActionImpl); d.DeleteOptions.Preconditions != nil {
		t.Fatalf("preconditions %+v", d.DeleteOptions.Preconditions)
	}
}

func TestTokenCleanerDeleteErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	cases := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"already gone", apierrors.NewNotFound(gr, "bootstrap-token-aaaaaa"), false},
		{"replaced (UID precondition failed)", apierrors.NewConflict(gr, "bootstrap-token-aaaaaa", errors.New("uid")), false},
		{"other errors are retried", errors.New("boom"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := withExpiration(tokenSecret("aaaaaa", "a"), testNow.Add(-time.Hour).Format(time.RFC3339))
			c, client, _ := newCleaner(t, s)
			client.PrependReactor("delete", "secrets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			if err := c.syncSecret(testCtx(t), "kube-system/bootstrap-token-aaaaaa"); (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}

// TestTokenCleanerRun drives the cleaner through its informer: an expired
// token is deleted, a live one and one elsewhere are kept.
func TestTokenCleanerRun(t *testing.T) {
	past := time.Now().Add(-time.Hour).Format(time.RFC3339)
	expired := withExpiration(tokenSecret("aaaaaa", "a"), past)
	live := withExpiration(tokenSecret("bbbbbb", "b"), time.Now().Add(time.Hour).Format(time.RFC3339))
	elsewhere := withExpiration(tokenSecret("cccccc", "c"), past)
	elsewhere.Namespace = "default"
	client := fake.NewClientset(expired, live, elsewhere)
	factory := informers.NewSharedInformerFactory(client, 0)
	tc, err := NewTokenCleaner(client, factory.Core().V1().Secrets(), DefaultTokenCleanerOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); tc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	// A second expired token added later is cleaned too.
	later := withExpiration(tokenSecret("dddddd", "d"), past)
	if _, err := client.CoreV1().Secrets(later.Namespace).Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{expired.Name, later.Name} {
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("%s was not deleted: %v", name, err)
		}
	}
	// Nothing else was deleted meanwhile.
	for _, a := range writes(client) {
		if d, ok := a.(clienttesting.DeleteAction); ok && d.GetName() != expired.Name && d.GetName() != later.Name {
			t.Fatalf("deleted %s/%s", d.GetNamespace(), d.GetName())
		}
	}
}
