// Package garbagecollector tests the garbage-collector-controller against a
// real apiserver: background, foreground and orphan propagation, dangling
// and cross-namespace owner references, and resources discovered after
// start (a CRD) being collected without a restart.
package garbagecollector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
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
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/garbagecollector"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	waitTimeout = 60 * time.Second
	// A short rediscovery period so the CRD test does not wait 30s.
	syncPeriod = 2 * time.Second
)

var (
	startOnce sync.Once
	shared    *garbagecollector.GarbageCollector
)

// runGC starts one collector for the package, wired as the controller
// manager wires it (typed informers where they exist, metadata otherwise,
// a deferred discovery RESTMapper, periodic rediscovery). It runs until
// the test binary exits.
func runGC(t *testing.T) (clientset.Interface, *garbagecollector.GarbageCollector) {
	t.Helper()
	cp := framework.Shared(t)
	startOnce.Do(func() {
		cfg := rest.CopyConfig(cp.Config)
		cfg.UserAgent = "generic-garbage-collector"
		c, err := clientset.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapperDC, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(mapperDC))
		ctx := klog.NewContext(context.Background(), klog.Background())
		typed := informers.NewSharedInformerFactory(c, 0)
		mdf := metadatainformer.NewSharedInformerFactory(md, 0)
		started := make(chan struct{})
		gc, err := garbagecollector.NewGarbageCollector(ctx, c, md, mapper,
			garbagecollector.DefaultIgnoredResources(), garbagecollector.NewInformerFactory(typed, mdf), started)
		if err != nil {
			t.Fatal(err)
		}
		typed.Start(ctx.Done())
		mdf.Start(ctx.Done())
		close(started)
		go gc.Run(ctx, 5, 30*time.Second)
		go gc.Sync(ctx, dc, syncPeriod)
		shared = gc
	})
	if shared == nil {
		t.Fatal("garbage collector failed to start")
	}
	framework.Eventually(t, waitTimeout, "garbage collector to sync", func(context.Context) (bool, error) {
		return shared.IsSynced(klog.Background()), nil
	})
	return cp.Client(t), shared
}

func configMap(name string, owners ...metav1.OwnerReference) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owners}}
}

func ownerRef(owner *v1.ConfigMap, block bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	if block {
		ref.BlockOwnerDeletion = ptr.To(true)
	}
	return ref
}

func create(t *testing.T, c clientset.Interface, ns string, cm *v1.ConfigMap) *v1.ConfigMap {
	t.Helper()
	out, err := c.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating configmap %s: %v", cm.Name, err)
	}
	return out
}

func deleteWith(t *testing.T, c clientset.Interface, ns, name string, policy metav1.DeletionPropagation) {
	t.Helper()
	if err := c.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

func waitConfigMapGone(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, "configmap "+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func TestBackgroundDeletionDeletesDependents(t *testing.T) {
	c, _ := runGC(t)
	ns := framework.CreateNamespace(t, c, "gc-background")
	owner := create(t, c, ns, configMap("owner"))
	create(t, c, ns, configMap("dep-1", ownerRef(owner, false)))
	create(t, c, ns, configMap("dep-2", ownerRef(owner, true)))
	other := create(t, c, ns, configMap("other-owner"))
	// Two owners, one remains: this dependent must survive, minus nothing.
	create(t, c, ns, configMap("shared-dep", ownerRef(owner, false), ownerRef(other, false)))

	deleteWith(t, c, ns, "owner", metav1.DeletePropagationBackground)
	waitConfigMapGone(t, c, ns, "dep-1")
	waitConfigMapGone(t, c, ns, "dep-2")

	// The dependent with a live owner stays, and loses the dangling reference.
	framework.Eventually(t, waitTimeout, "dangling ref removed from shared-dep", func(ctx context.Context) (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "shared-dep", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == other.UID, nil
	})
}

func TestForegroundDeletionWaitsForBlockingDependents(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "gc-foreground")
	const hold = "example.com/hold"
	owner := create(t, c, ns, configMap("owner"))
	dep := configMap("dep", ownerRef(owner, true))
	dep.Finalizers = []string{hold}
	create(t, c, ns, dep)
	// A non-blocking dependent does not hold the owner, but is deleted too.
	create(t, c, ns, configMap("loose", ownerRef(owner, false)))

	deleteWith(t, c, ns, "owner", metav1.DeletePropagationForeground)

	// The collector deletes the blocking dependent, which the test's
	// finalizer keeps around.
	framework.Eventually(t, waitTimeout, "dependent to be deleting", func(ctx context.Context) (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "dep", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.DeletionTimestamp != nil, nil
	})
	waitConfigMapGone(t, c, ns, "loose")

	// Meanwhile the owner waits, holding the foregroundDeletion finalizer.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		got, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("owner must stay while a blocking dependent exists: %v", err)
		}
		if got.DeletionTimestamp == nil || !containsString(got.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("owner: deletionTimestamp=%v finalizers=%v, want deleting with %s", got.DeletionTimestamp, got.Finalizers, metav1.FinalizerDeleteDependents)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// Releasing the dependent lets it go, and then the owner.
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "dep", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMapGone(t, c, ns, "dep")
	waitConfigMapGone(t, c, ns, "owner")
}

func TestOrphanDeletionKeepsDependents(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "gc-orphan")
	owner := create(t, c, ns, configMap("owner"))
	create(t, c, ns, configMap("dep-1", ownerRef(owner, true)))
	create(t, c, ns, configMap("dep-2", ownerRef(owner, false)))

	deleteWith(t, c, ns, "owner", metav1.DeletePropagationOrphan)
	waitConfigMapGone(t, c, ns, "owner")

	for _, name := range []string{"dep-1", "dep-2"} {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("orphaned dependent %s: %v", name, err)
		}
		if len(cm.OwnerReferences) != 0 {
			t.Errorf("%s ownerReferences = %v, want none", name, cm.OwnerReferences)
		}
	}
	// And they are not collected later either.
	time.Sleep(2 * time.Second)
	for _, name := range []string{"dep-1", "dep-2"} {
		if _, err := c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("orphaned dependent %s: %v", name, err)
		}
	}
}

func TestDependentOfNonexistentOwnerIsDeleted(t *testing.T) {
	c, gc := runGC(t)
	ns := framework.CreateNamespace(t, c, "gc-dangling")
	ghost := types.UID(uuid.NewUUID())
	create(t, c, ns, configMap("dep", metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "never-existed", UID: ghost}))
	waitConfigMapGone(t, c, ns, "dep")
	// The virtual owner node is dropped once verified absent.
	framework.Eventually(t, waitTimeout, "virtual owner to leave the graph", func(context.Context) (bool, error) {
		return !gc.GraphHasUID(ghost), nil
	})
}

func TestOwnerInOtherNamespaceIsReportedAndDangling(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	nsOwner := framework.CreateNamespace(t, c, "gc-xns-owner")
	nsDep := framework.CreateNamespace(t, c, "gc-xns-dep")
	owner := create(t, c, nsOwner, configMap("owner"))
	// Let the collector observe the owner first, so it can tell the
	// reference crosses namespaces.
	time.Sleep(time.Second)
	create(t, c, nsDep, configMap("dep", ownerRef(owner, false)))

	// Owner references are namespace-local: the owner is absent from the
	// dependent's namespace, so the dependent is collected.
	waitConfigMapGone(t, c, nsDep, "dep")
	framework.Eventually(t, waitTimeout, "OwnerRefInvalidNamespace event", func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(nsDep).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "OwnerRefInvalidNamespace" && e.InvolvedObject.Name == "dep" && e.Type == v1.EventTypeWarning &&
				e.Source.Component == "garbage-collector-controller" {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := c.CoreV1().ConfigMaps(nsOwner).Get(ctx, "owner", metav1.GetOptions{}); err != nil {
		t.Errorf("owner must be untouched: %v", err)
	}
}

// TestCustomResourceDiscoveredAfterStart creates a CRD after the collector
// started: rediscovery must add a monitor for it, and its objects (which
// only accept JSON merge patches) are collected.
func TestCustomResourceDiscoveredAfterStart(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	cp := framework.Shared(t)
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	group := fmt.Sprintf("gc%d.example.com", time.Now().UnixNano()%100000)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "widgets." + group},
		"spec": map[string]interface{}{
			"group": group,
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crdGVR).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})

	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	ns := framework.CreateNamespace(t, c, "gc-crd")
	newWidget := func(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": group + "/v1", "kind": "Widget"}}
		u.SetName(name)
		u.SetOwnerReferences(owners)
		return u
	}
	// The CRD becomes servable asynchronously.
	var ownerW *unstructured.Unstructured
	framework.Eventually(t, waitTimeout, "widget owner to be created", func(ctx context.Context) (bool, error) {
		ownerW, err = dyn.Resource(widgets).Namespace(ns).Create(ctx, newWidget("owner"), metav1.CreateOptions{})
		return err == nil, nil
	})
	wref := metav1.OwnerReference{APIVersion: group + "/v1", Kind: "Widget", Name: "owner", UID: ownerW.GetUID()}
	if _, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, newWidget("dep", wref), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A core object owned by the custom resource.
	create(t, c, ns, configMap("cm-dep", wref))
	cmOwner := create(t, c, ns, configMap("cm-owner"))
	// A custom resource with a live owner and a dangling one: only the
	// dangling reference goes, via a JSON merge patch.
	ghost := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "ghost", UID: types.UID(uuid.NewUUID())}
	if _, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, newWidget("mixed", ownerRef(cmOwner, false), ghost), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := dyn.Resource(widgets).Namespace(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "widget dependent to be deleted", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(widgets).Namespace(ns).Get(ctx, "dep", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitConfigMapGone(t, c, ns, "cm-dep")
	framework.Eventually(t, waitTimeout, "dangling ref removed from widget", func(ctx context.Context) (bool, error) {
		w, err := dyn.Resource(widgets).Namespace(ns).Get(ctx, "mixed", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		refs := w.GetOwnerReferences()
		return len(refs) == 1 && refs[0].UID == cmOwner.UID, nil
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Upstream's conformance case: a foreground delete inside an ownership
// cycle (a→c, b→a, c→b, every reference blocking) must delete the whole
// cycle, not deadlock and not orphan anyone.
func TestForegroundDeletionBreaksDependencyCycle(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "gc-cycle")
	a := create(t, c, ns, configMap("a"))
	b := create(t, c, ns, configMap("b"))
	cc := create(t, c, ns, configMap("c"))
	addOwner := func(name string, owner *v1.ConfigMap) *v1.ConfigMap {
		t.Helper()
		p := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}]}}`, owner.Name, owner.UID)
		out, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	a = addOwner("a", cc)
	addOwner("b", a)
	addOwner("c", b)

	policy := metav1.DeletePropagationForeground
	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, "a", metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: metav1.NewUIDPreconditions(string(a.UID))}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "every configmap of the cycle to be deleted", func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var left []string
		for _, cm := range list.Items {
			if cm.Name != "kube-root-ca.crt" {
				left = append(left, fmt.Sprintf("%s(deleting=%v finalizers=%v owners=%v)", cm.Name, cm.DeletionTimestamp != nil, cm.Finalizers, describeOwners(cm.OwnerReferences)))
			}
		}
		if len(left) != 0 {
			t.Logf("still present: %v", left)
		}
		return len(left) == 0, nil
	})
}

func describeOwners(refs []metav1.OwnerReference) []string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/block=%v", r.Name, ptr.Deref(r.BlockOwnerDeletion, false)))
	}
	return out
}
