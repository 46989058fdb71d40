// Package storageversionmigrator tests the storage-version-migrator-controller
// (its three loops, wired as the controller manager wires them) against a
// real apiserver: migrations of a custom resource whose storage version
// changed and of Secrets succeed with one write per object, and a
// migration of a resource that does not exist fails.
package storageversionmigrator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/garbagecollector"
	svm "github.com/kcmclone/kube-controller-manager/pkg/controller/storageversionmigrator"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const controllerName = "storage-version-migrator-controller"

// patchRequest is one PATCH the migrator sent.
type patchRequest struct {
	path, contentType, fieldManager, body string
}

// patchLog records the PATCH requests of the migrator's dynamic client.
type patchLog struct {
	mu       sync.Mutex
	requests []patchRequest
}

func (l *patchLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch {
			var body []byte
			if req.Body != nil {
				body, _ = io.ReadAll(req.Body)
				_ = req.Body.Close()
				req.Body = io.NopCloser(bytes.NewReader(body))
			}
			l.mu.Lock()
			l.requests = append(l.requests, patchRequest{
				path:         req.URL.Path,
				contentType:  req.Header.Get("Content-Type"),
				fieldManager: req.URL.Query().Get("fieldManager"),
				body:         string(body),
			})
			l.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// to returns the requests to path.
func (l *patchLog) to(path string) []patchRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []patchRequest
	for _, r := range l.requests {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var (
	startOnce sync.Once
	patches   = &patchLog{}
)

// runControllers starts the package's one set of migrator loops (they would
// all act on every migration, so tests share them); they run until the
// test binary exits.
func runControllers(t *testing.T) {
	t.Helper()
	startOnce.Do(func() {
		cfg := rest.CopyConfig(framework.Shared(t).Config)
		cfg.UserAgent = controllerName
		client, err := clientset.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dynCfg := rest.CopyConfig(cfg)
		dynCfg.WrapTransport = patches.wrap
		dyn, err := dynamic.NewForConfig(dynCfg)
		if err != nil {
			t.Fatal(err)
		}
		disc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapperDisc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(mapperDisc))

		ctx := klog.NewContext(context.Background(), klog.Background())
		factory := informers.NewSharedInformerFactory(client, 0)
		svms := factory.Storagemigration().V1().StorageVersionMigrations()
		mdFactory := metadatainformer.NewSharedInformerFactory(md, 0)
		started := make(chan struct{})
		monitors := svm.NewMetadataMonitors(ctx, disc, mdFactory, garbagecollector.DefaultIgnoredResources(), started)

		migrator := svm.NewController(ctx, client, dyn, svms, controllerName, mapper, monitors)
		rv := svm.NewResourceVersionController(ctx, client, disc, md, svms, mapper)
		runner := svm.NewCustomResourceController(ctx, client, svms, dyn)
		factory.Start(ctx.Done())
		close(started)
		go migrator.Run(ctx)
		go rv.Run(ctx)
		go runner.Run(ctx)
	})
}

func createSVM(t *testing.T, c clientset.Interface, name string, gr metav1.GroupResource) {
	t.Helper()
	_, err := c.StoragemigrationV1().StorageVersionMigrations().Create(context.Background(), &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: gr},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating migration %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = c.StoragemigrationV1().StorageVersionMigrations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitFinished waits for the runner to close the migration (Running=False)
// and returns it.
func waitFinished(t *testing.T, c clientset.Interface, name string, timeout time.Duration) *svmv1.StorageVersionMigration {
	t.Helper()
	var out *svmv1.StorageVersionMigration
	framework.Eventually(t, timeout, "migration "+name+" to finish", func(ctx context.Context) (bool, error) {
		s, err := c.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		out = s
		return meta.IsStatusConditionFalse(s.Status.Conditions, string(svmv1.MigrationRunning)), nil
	})
	return out
}

func expectCondition(t *testing.T, s *svmv1.StorageVersionMigration, ct svmv1.MigrationConditionType, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	c := meta.FindStatusCondition(s.Status.Conditions, string(ct))
	if c == nil || c.Status != status || c.Reason != reason || c.Message != message {
		t.Fatalf("%s: %s condition %+v, want %s/%s/%q", s.Name, ct, c, status, reason, message)
	}
}

// expectPatches checks that path got exactly n merge patches, each body.
func expectPatches(t *testing.T, path string, n int, body string) {
	t.Helper()
	got := patches.to(path)
	if len(got) != n {
		t.Fatalf("%s patched %d times, want %d", path, len(got), n)
	}
	for _, p := range got {
		if p.contentType != "application/merge-patch+json" || p.fieldManager != controllerName || p.body != body {
			t.Fatalf("%s: patch %+v, want merge patch %s by %s", path, p, body, controllerName)
		}
	}
}

// The storage version of a custom resource moves from v1 to v2: every
// object is rewritten once (so its resourceVersion changes), the CRD is
// marked StorageMigrating during the migration, and storedVersions ends
// with v2 only.
//
// Not parallel, and first: the shared RESTMapper must first discover the
// group after v2 exists, or it would migrate through v1 (as upstream's
// would until its next rediscovery), which this test does not expect.
func TestMigrateCustomResource(t *testing.T) {
	runControllers(t)
	cp := framework.Shared(t)
	c := cp.Client(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, c, "svm-crd")
	group := fmt.Sprintf("svm%d.example.com", time.Now().UnixNano()%1000000)
	crdName := "widgets." + group
	version := func(name string, storage bool) map[string]interface{} {
		return map[string]interface{}{
			"name": name, "served": true, "storage": storage,
			"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			}},
		}
	}
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": crdName},
		"spec": map[string]interface{}{
			"group":    group,
			"scope":    "Namespaced",
			"names":    map[string]interface{}{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []interface{}{version("v1", true)},
		},
	}}
	crds := dyn.Resource(framework.CRDGVR)
	if _, err := crds.Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crdName, metav1.DeleteOptions{}) })
	v1GVR := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	v2GVR := schema.GroupVersionResource{Group: group, Version: "v2", Resource: "widgets"}
	framework.Eventually(t, time.Minute, "v1 served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1GVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})

	names := []string{"w1", "w2", "w3"}
	before := map[string]string{}
	for _, n := range names {
		w := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": group + "/v1", "kind": "Widget", "spec": map[string]interface{}{"size": n}}}
		w.SetName(n)
		created, err := dyn.Resource(v1GVR).Namespace(ns).Create(context.Background(), w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[n] = created.GetResourceVersion()
	}

	// v2 becomes the storage version; the objects are still stored as v1.
	framework.Eventually(t, 30*time.Second, "CRD updated", func(ctx context.Context) (bool, error) {
		cur, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_ = unstructured.SetNestedSlice(cur.Object, []interface{}{version("v1", false), version("v2", true)}, "spec", "versions")
		_, err = crds.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	framework.Eventually(t, time.Minute, "v2 served", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v2GVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	cur, _ := crds.Get(context.Background(), crdName, metav1.GetOptions{})
	if sv, _, _ := unstructured.NestedStringSlice(cur.Object, "status", "storedVersions"); len(sv) != 2 {
		t.Fatalf("storedVersions before the migration %v", sv)
	}

	createSVM(t, c, "svm-widgets", metav1.GroupResource{Group: group, Resource: "widgets"})
	s := waitFinished(t, c, "svm-widgets", 2*time.Minute)
	expectCondition(t, s, svmv1.MigrationSucceeded, metav1.ConditionTrue, "StorageVersionMigrationSucceeded", "Migration completed")
	expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionFalse, "MigrationCompleted", "Migration completed")
	if meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationFailed)) != nil || s.Status.ResourceVersion == "" {
		t.Fatalf("status %+v", s.Status)
	}

	for _, n := range names {
		body := fmt.Sprintf(`{"kind":"Widget","apiVersion":"%s/v2","metadata":{"resourceVersion":"%s"}}`, group, before[n])
		expectPatches(t, fmt.Sprintf("/apis/%s/v2/namespaces/%s/widgets/%s", group, ns, n), 1, body)
		after, err := dyn.Resource(v2GVR).Namespace(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.GetResourceVersion() == before[n] {
			t.Errorf("%s not rewritten: resourceVersion still %s", n, before[n])
		}
	}

	cur, err = crds.Get(context.Background(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sv, _, _ := unstructured.NestedStringSlice(cur.Object, "status", "storedVersions"); len(sv) != 1 || sv[0] != "v2" {
		t.Fatalf("storedVersions after the migration %v", sv)
	}
	conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	found := false
	for _, raw := range conds {
		cond := raw.(map[string]interface{})
		if cond["type"] != "StorageMigrating" {
			continue
		}
		found = true
		if cond["status"] != "False" || cond["reason"] != "MigrationSucceeded" ||
			cond["message"] != "The migration has succeeded and the stored versions have been updated" {
			t.Fatalf("StorageMigrating condition %v", cond)
		}
	}
	if !found {
		t.Fatalf("no StorageMigrating condition in %v", conds)
	}
}

// Two migrations of Secrets, run one after the other: each Secret gets
// one write per migration. Nothing about them changed, so the apiserver does
// not store them again and their resourceVersion stays.
func TestMigrateSecrets(t *testing.T) {
	t.Parallel()
	runControllers(t)
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "svm-secrets")
	before := map[string]string{}
	for i := range 5 {
		s, err := c.CoreV1().Secrets(ns).Create(context.Background(), &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)},
			StringData: map[string]string{"k": "v"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[s.Name] = s.ResourceVersion
	}

	createSVM(t, c, "svm-secrets-1", metav1.GroupResource{Resource: "secrets"})
	createSVM(t, c, "svm-secrets-2", metav1.GroupResource{Resource: "secrets"})
	first := waitFinished(t, c, "svm-secrets-1", 2*time.Minute)

	// The second starts only after the first, so it records a later
	// resourceVersion. A Secret written after that point is already in
	// the new form and must not be touched; writing it also brings the
	// (long-running) Secret cache past that point without waiting for the
	// apiserver's next watch bookmark.
	var recorded string
	framework.Eventually(t, time.Minute, "second migration's resourceVersion", func(ctx context.Context) (bool, error) {
		s, err := c.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "svm-secrets-2", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		recorded = s.Status.ResourceVersion
		return recorded != "", nil
	})
	if cmp, err := resourceversion.CompareResourceVersion(recorded, first.Status.ResourceVersion); err != nil || cmp <= 0 {
		t.Fatalf("second migration recorded %s, not after the first's %s", recorded, first.Status.ResourceVersion)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(context.Background(), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := waitFinished(t, c, "svm-secrets-2", 2*time.Minute)
	for _, s := range []*svmv1.StorageVersionMigration{first, second} {
		expectCondition(t, s, svmv1.MigrationSucceeded, metav1.ConditionTrue, "StorageVersionMigrationSucceeded", "Migration completed")
		expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionFalse, "MigrationCompleted", "Migration completed")
	}
	if got := patches.to(fmt.Sprintf("/api/v1/namespaces/%s/secrets/late", ns)); len(got) != 0 {
		t.Fatalf("Secret written after the migration started was patched: %+v", got)
	}

	for name, rv := range before {
		body := fmt.Sprintf(`{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"%s"}}`, rv)
		expectPatches(t, fmt.Sprintf("/api/v1/namespaces/%s/secrets/%s", ns, name), 2, body)
		s, err := c.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.ResourceVersion != rv {
			t.Errorf("%s: resourceVersion %s, was %s", name, s.ResourceVersion, rv)
		}
	}
}

// A migration of a resource no API serves fails, once discovery had a
// minute to learn about it.
func TestMigrateMissingResourceFails(t *testing.T) {
	t.Parallel()
	runControllers(t)
	c := framework.Shared(t).Client(t)
	createSVM(t, c, "svm-missing", metav1.GroupResource{Group: "nope.example.com", Resource: "things"})
	start := time.Now()
	s := waitFinished(t, c, "svm-missing", 3*time.Minute)
	if took := time.Since(start); took < 50*time.Second {
		t.Errorf("failed after %s, before the minute discovery gets", took)
	}
	expectCondition(t, s, svmv1.MigrationFailed, metav1.ConditionTrue, "StorageVersionMigrationFailed", "resource does not exist in discovery")
	expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionFalse, "MigrationCompleted", "Migration completed")
	if meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationSucceeded)) != nil || s.Status.ResourceVersion != "" {
		t.Fatalf("status %+v", s.Status)
	}
}
