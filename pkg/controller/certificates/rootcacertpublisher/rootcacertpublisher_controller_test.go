package rootcacertpublisher

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const testCA = "-----BEGIN CERTIFICATE-----\nfake CA\n-----END CERTIFICATE-----\n"

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

func namespace(name string, phase v1.NamespacePhase) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NamespaceStatus{Phase: phase}}
}

func rootCACM(ns string, data map[string]string, annotations map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: RootCACertConfigMapName, Annotations: annotations},
		Data:       data,
	}
}

func newPublisher(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := NewController(factory.Core().V1().ConfigMaps(), factory.Core().V1().Namespaces(), client, []byte(testCA))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if cm, ok := o.(*v1.ConfigMap); ok {
			if err := factory.Core().V1().ConfigMaps().Informer().GetIndexer().Add(cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p, client, factory
}

func checkPublished(t *testing.T, cm *v1.ConfigMap) {
	t.Helper()
	if cm.Name != RootCACertConfigMapName || len(cm.Data) != 1 || cm.Data["ca.crt"] != testCA {
		t.Fatalf("configmap %s data %v", cm.Name, cm.Data)
	}
	if cm.Annotations[DescriptionAnnotation] == "" {
		t.Fatalf("annotations %v", cm.Annotations)
	}
}

func TestConfigMapSync(t *testing.T) {
	good := map[string]string{"ca.crt": testCA}
	desc := map[string]string{DescriptionAnnotation: Description}
	cases := map[string]struct {
		existing *v1.ConfigMap
		// wantVerb is "create", "update" or "" for no write.
		wantVerb string
	}{
		"missing configmap is created":       {wantVerb: "create"},
		"correct configmap is left alone":    {existing: rootCACM("ns", good, desc)},
		"other description is accepted":      {existing: rootCACM("ns", good, map[string]string{DescriptionAnnotation: "different"})},
		"missing annotation is added":        {existing: rootCACM("ns", good, nil), wantVerb: "update"},
		"edited CA is repaired":              {existing: rootCACM("ns", map[string]string{"ca.crt": "evil"}, desc), wantVerb: "update"},
		"extra keys are removed":             {existing: rootCACM("ns", map[string]string{"ca.crt": testCA, "x": "y"}, desc), wantVerb: "update"},
		"emptied configmap is repaired":      {existing: rootCACM("ns", nil, desc), wantVerb: "update"},
		"other annotations survive a repair": {existing: rootCACM("ns", nil, map[string]string{"keep": "me"}), wantVerb: "update"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.existing != nil {
				objs = append(objs, tc.existing)
			}
			p, client, _ := newPublisher(t, objs...)
			if err := p.syncHandler(testCtx(t), "ns"); err != nil {
				t.Fatal(err)
			}
			w := testutil.AllWrites(client)
			if tc.wantVerb == "" {
				if len(w) != 0 {
					t.Fatalf("unexpected writes %v", w)
				}
				return
			}
			if len(w) != 1 || w[0].GetVerb() != tc.wantVerb || w[0].GetNamespace() != "ns" {
				t.Fatalf("want one %s in ns, got %v", tc.wantVerb, w)
			}
			// Create and update actions both carry the written object.
			cm := w[0].(interface{ GetObject() runtime.Object }).GetObject().(*v1.ConfigMap)
			checkPublished(t, cm)
			if tc.existing != nil && tc.existing.Annotations["keep"] != "" && cm.Annotations["keep"] != "me" {
				t.Fatalf("annotations %v", cm.Annotations)
			}
			if tc.existing != nil && tc.existing.Annotations[DescriptionAnnotation] == "" && cm.Annotations[DescriptionAnnotation] != Description {
				t.Fatalf("description %q", cm.Annotations[DescriptionAnnotation])
			}
		})
	}
}

// The cache's copy is never modified by a repair.
func TestConfigMapRepairDoesNotMutateCache(t *testing.T) {
	existing := rootCACM("ns", map[string]string{"ca.crt": "evil"}, nil)
	p, _, factory := newPublisher(t, existing)
	if err := p.syncHandler(testCtx(t), "ns"); err != nil {
		t.Fatal(err)
	}
	cached, _, _ := factory.Core().V1().ConfigMaps().Informer().GetIndexer().GetByKey("ns/" + RootCACertConfigMapName)
	if cm := cached.(*v1.ConfigMap); cm.Data["ca.crt"] != "evil" || cm.Annotations != nil {
		t.Fatalf("cache mutated: %+v", cm)
	}
}

func TestConfigMapCreateErrors(t *testing.T) {
	terminating := apierrors.NewForbidden(v1.Resource("configmaps"), "", errors.New("namespace is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause, Field: "ns"}}
	cases := map[string]struct {
		err     error
		wantErr bool
	}{
		"terminating namespace is not retried": {err: terminating},
		"missing namespace is not retried":     {err: apierrors.NewNotFound(v1.Resource("namespaces"), "ns")},
		"server error is retried":              {err: apierrors.NewInternalError(errors.New("boom")), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, client, _ := newPublisher(t)
			client.PrependReactor("create", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			if err := p.syncHandler(testCtx(t), "ns"); (err != nil) != tc.wantErr {
				t.Fatalf("sync returned %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestPublisherEventHandlers(t *testing.T) {
	p, _, _ := newPublisher(t)
	p.namespaceAdded(namespace("added", v1.NamespaceActive))
	p.namespaceUpdated(nil, namespace("updated", v1.NamespaceActive))
	p.namespaceUpdated(nil, namespace("terminating", v1.NamespaceTerminating))
	p.configMapChanged(rootCACM("edited", nil, nil))
	p.configMapChanged(cache.DeletedFinalStateUnknown{Key: "tomb/" + RootCACertConfigMapName, Obj: rootCACM("tomb", nil, nil)})
	other := rootCACM("unrelated", nil, nil)
	other.Name = "something-else"
	p.configMapChanged(other)
	p.configMapChanged("garbage")

	got := map[string]bool{}
	for p.queue.Len() > 0 {
		k, _ := p.queue.Get()
		got[k] = true
		p.queue.Done(k)
	}
	want := []string{"added", "updated", "edited", "tomb"}
	for _, k := range want {
		if !got[k] {
			t.Errorf("%q not enqueued", k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
}

// End to end through informers: a new namespace gets the ConfigMap, which
// is repaired after an edit and recreated after a deletion.
func TestPublisherRun(t *testing.T) {
	p, client, factory := newPublisher(t)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { defer close(done); p.Run(ctx, 1) }()
	t.Cleanup(func() { cancel(); <-done; factory.Shutdown() })

	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("ns", v1.NamespaceActive), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func(ctx context.Context) (*v1.ConfigMap, error) {
		return client.CoreV1().ConfigMaps("ns").Get(ctx, RootCACertConfigMapName, metav1.GetOptions{})
	}
	published := func(ctx context.Context) (bool, error) {
		cm, err := get(ctx)
		return err == nil && cm.Data["ca.crt"] == testCA && cm.Annotations[DescriptionAnnotation] == Description, nil
	}
	testutil.WaitUntil(t, "created", published)

	cm, err := get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "tampered"
	if _, err := client.CoreV1().ConfigMaps("ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "repaired", published)

	if err := client.CoreV1().ConfigMaps("ns").Delete(ctx, RootCACertConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "recreated", published)

	creates := 0
	for _, a := range testutil.AllWrites(client) {
		if a.GetVerb() == "create" && a.GetResource().Resource == "configmaps" {
			creates++
		}
	}
	// Two creates are needed; a sync racing the informer may try a third,
	// which fails with AlreadyExists (the fake client records it anyway).
	if creates < 2 || creates > 3 {
		t.Fatalf("%d creates, want 2 (or 3 with one lost race)", creates)
	}
}
