package serviceaccount

import (
	"context"
	"errors"
	"fmt"
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

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

func namespace(name string, phase v1.NamespacePhase) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NamespaceStatus{Phase: phase}}
}

func serviceAccount(ns, name, uid string) *v1.ServiceAccount {
	return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

// terminatingErr is what the API server answers a create in a terminating
// namespace.
func terminatingErr(resource, ns string) error {
	err := apierrors.NewForbidden(v1.Resource(resource), "", errors.New("namespace is being terminated"))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: v1.NamespaceTerminatingCause, Field: ns})
	return err
}

func TestServiceAccountCreation(t *testing.T) {
	cases := map[string]struct {
		ns          *v1.Namespace
		existing    []*v1.ServiceAccount
		createErr   error
		wantCreates []string
		wantErr     bool
	}{
		"active namespace without default gets one": {
			ns:          namespace("ns", v1.NamespaceActive),
			wantCreates: []string{"default"},
		},
		"active namespace with default is left alone": {
			ns:       namespace("ns", v1.NamespaceActive),
			existing: []*v1.ServiceAccount{serviceAccount("ns", "default", "1")},
		},
		"other service accounts do not count": {
			ns:          namespace("ns", v1.NamespaceActive),
			existing:    []*v1.ServiceAccount{serviceAccount("ns", "builder", "1"), serviceAccount("other", "default", "2")},
			wantCreates: []string{"default"},
		},
		"terminating namespace is skipped": {
			ns: namespace("ns", v1.NamespaceTerminating),
		},
		"missing namespace is skipped": {},
		"namespace that started terminating is not retried": {
			ns:          namespace("ns", v1.NamespaceActive),
			createErr:   terminatingErr("serviceaccounts", "ns"),
			wantCreates: []string{"default"},
		},
		"already exists is success": {
			ns:          namespace("ns", v1.NamespaceActive),
			createErr:   apierrors.NewAlreadyExists(v1.Resource("serviceaccounts"), "default"),
			wantCreates: []string{"default"},
		},
		"other create errors are retried": {
			ns:          namespace("ns", v1.NamespaceActive),
			createErr:   apierrors.NewInternalError(errors.New("boom")),
			wantCreates: []string{"default"},
			wantErr:     true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			if tc.createErr != nil {
				client.PrependReactor("create", "serviceaccounts", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.createErr
				})
			}
			factory := informers.NewSharedInformerFactory(client, 0)
			c, err := NewServiceAccountsController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client, DefaultServiceAccountsControllerOptions())
			if err != nil {
				t.Fatal(err)
			}
			if tc.ns != nil {
				mustAdd(t, factory.Core().V1().Namespaces().Informer().GetIndexer(), tc.ns)
			}
			for _, sa := range tc.existing {
				mustAdd(t, factory.Core().V1().ServiceAccounts().Informer().GetIndexer(), sa)
			}

			err = c.syncHandler(testCtx(t), "ns")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error %v, want error %v", err, tc.wantErr)
			}
			var created []string
			for _, a := range client.Actions() {
				if a.GetVerb() != "create" {
					t.Errorf("unexpected action %s", a.GetVerb())
					continue
				}
				sa := a.(clienttesting.CreateAction).GetObject().(*v1.ServiceAccount)
				if sa.Namespace != "ns" || a.GetNamespace() != "ns" {
					t.Errorf("created in namespace %q/%q, want ns", sa.Namespace, a.GetNamespace())
				}
				created = append(created, sa.Name)
			}
			if len(created) != len(tc.wantCreates) || (len(created) > 0 && created[0] != tc.wantCreates[0]) {
				t.Fatalf("created %v, want %v", created, tc.wantCreates)
			}
		})
	}
}

// The template in the options is shared by every namespace; syncs must not
// write the namespace into it.
func TestServiceAccountTemplateNotMutated(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	opts := DefaultServiceAccountsControllerOptions()
	c, err := NewServiceAccountsController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "b"} {
		mustAdd(t, factory.Core().V1().Namespaces().Informer().GetIndexer(), namespace(ns, v1.NamespaceActive))
		if err := c.syncHandler(testCtx(t), ns); err != nil {
			t.Fatal(err)
		}
	}
	if opts.ServiceAccounts[0].Namespace != "" {
		t.Fatalf("template mutated: %q", opts.ServiceAccounts[0].Namespace)
	}
	for _, ns := range []string{"a", "b"} {
		if _, err := client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("%s/default: %v", ns, err)
		}
	}
}

func TestServiceAccountEventHandlers(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewServiceAccountsController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client, DefaultServiceAccountsControllerOptions())
	if err != nil {
		t.Fatal(err)
	}
	c.namespaceAdded(namespace("added", v1.NamespaceActive))
	c.namespaceUpdated(nil, namespace("updated", v1.NamespaceActive))
	c.serviceAccountDeleted(serviceAccount("deleted", "default", "1"))
	c.serviceAccountDeleted(cache.DeletedFinalStateUnknown{Key: "tomb/default", Obj: serviceAccount("tomb", "default", "2")})
	c.serviceAccountDeleted(cache.DeletedFinalStateUnknown{Key: "x", Obj: "not a service account"})
	got := map[string]bool{}
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		got[k] = true
		c.queue.Done(k)
	}
	for _, want := range []string{"added", "updated", "deleted", "tomb"} {
		if !got[want] {
			t.Errorf("%q not enqueued; got %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("got %v", got)
	}
}

// End to end through informers: a new namespace gets its default
// ServiceAccount, which comes back after being deleted; a terminating
// namespace gets none.
func TestServiceAccountsControllerRun(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewServiceAccountsController(factory.Core().V1().ServiceAccounts(), factory.Core().V1().Namespaces(), client, DefaultServiceAccountsControllerOptions())
	if err != nil {
		t.Fatal(err)
	}
	ctx := runInBackground(t, factory, func(ctx context.Context) { c.Run(ctx, 1) })

	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("live", v1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("dying", v1.NamespaceTerminating), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForSA(t, client, "live")

	if err := client.CoreV1().ServiceAccounts("live").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForSA(t, client, "live")
	creates := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "serviceaccounts" {
			creates++
			if a.GetNamespace() != "live" {
				t.Errorf("created a ServiceAccount in %q", a.GetNamespace())
			}
		}
	}
	if creates != 2 {
		t.Fatalf("%d ServiceAccount creates, want 2 (create + recreate)", creates)
	}
}

func waitForSA(t *testing.T, client *fake.Clientset, ns string) {
	t.Helper()
	testutil.WaitUntil(t, fmt.Sprintf("default ServiceAccount in %s", ns), func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// runInBackground starts the informers and run, and stops both (waiting
// for run to return) when the test ends.
func runInBackground(t *testing.T, factory informers.SharedInformerFactory, run func(ctx context.Context)) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return ctx
}

func mustAdd(t *testing.T, store cache.Store, obj interface{}) {
	t.Helper()
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
}
