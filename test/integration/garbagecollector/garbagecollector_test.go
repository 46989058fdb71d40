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

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/dynamic"
	clientset "k8s.io/client-go/kubernetes"
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
	gcMu         sync.Mutex
	shared       *garbagecollector.GarbageCollector
	stopSharedGC func()
)

// startGC starts a collector that rediscovers resources every syncPeriod.
func startGC(t *testing.T) (*garbagecollector.GarbageCollector, func()) {
	t.Helper()
	return framework.Shared(t).StartGarbageCollector(t, syncPeriod)
}

// runGC returns the package's shared collector, starting it if needed; it
// runs until the test binary exits or a test stops it (stopShared).
func runGC(t *testing.T) (clientset.Interface, *garbagecollector.GarbageCollector) {
	t.Helper()
	gcMu.Lock()
	defer gcMu.Unlock()
	if shared == nil {
		shared, stopSharedGC = startGC(t)
	}
	return framework.Shared(t).Client(t), shared
}

// stopShared stops the shared collector, for a test that needs to be the
// only one running; the next runGC starts a new one.
func stopShared() {
	gcMu.Lock()
	defer gcMu.Unlock()
	if shared != nil {
		stopSharedGC()
		shared, stopSharedGC = nil, nil
	}
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
	crd := framework.CreateCRD(t, dyn, "Widget")
	widgets := crd.GVR
	newWidget := crd.NewObject
	ns := framework.CreateNamespace(t, c, "gc-crd")
	ownerW, err := dyn.Resource(widgets).Namespace(ns).Create(ctx, newWidget("owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wref := metav1.OwnerReference{APIVersion: widgets.GroupVersion().String(), Kind: "Widget", Name: "owner", UID: ownerW.GetUID()}
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
	create(t, c, ns, configMap("a"))
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
	a := addOwner("a", cc)
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

// chain makes Deployment → ReplicaSet → Pod linked as the controllers link
// them (controller references that block owner deletion). The pod is not
// scheduled, so the apiserver deletes it at once.
func chain(t *testing.T, c clientset.Interface, ns string) (*appsv1.Deployment, *appsv1.ReplicaSet, *v1.Pod) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": "chain"}
	tmpl := v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	d, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "d-1", OwnerReferences: ctrl("apps/v1", "Deployment", d.Name, d.UID)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-1-x", Labels: labels, OwnerReferences: ctrl("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
		Spec: tmpl.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d, rs, pod
}

func gone(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// Each propagation policy over Deployment → ReplicaSet → Pod.
func TestPropagationPoliciesOverDeploymentChain(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()

	t.Run("Background", func(t *testing.T) {
		ns := framework.CreateNamespace(t, c, "gc-chain-bg")
		chain(t, c, ns)
		policy := metav1.DeletePropagationBackground
		if err := c.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, waitTimeout, "replicaset and pod to be collected", func(ctx context.Context) (bool, error) {
			if ok, err := gone(errOf(c.AppsV1().ReplicaSets(ns).Get(ctx, "d-1", metav1.GetOptions{}))); !ok {
				return false, err
			}
			return gone(errOf(c.CoreV1().Pods(ns).Get(ctx, "d-1-x", metav1.GetOptions{})))
		})
	})

	t.Run("Foreground", func(t *testing.T) {
		ns := framework.CreateNamespace(t, c, "gc-chain-fg")
		_, _, pod := chain(t, c, ns)
		// A finalizer holds the pod, so the chain's order can be seen.
		if _, err := c.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		policy := metav1.DeletePropagationForeground
		if err := c.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, waitTimeout, "the pod to be deleting", func(ctx context.Context) (bool, error) {
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil, err
		})
		// Both owners wait for it, each with the foregroundDeletion finalizer.
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})
		if err != nil || !containsString(d.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("deployment while its pod remains: %v, finalizers %v", err, d.Finalizers)
		}
		rs, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "d-1", metav1.GetOptions{})
		if err != nil || rs.DeletionTimestamp == nil || !containsString(rs.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("replicaset while its pod remains: %v, %+v", err, rs.ObjectMeta)
		}
		if _, err := c.CoreV1().Pods(ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, waitTimeout, "the whole chain to be gone", func(ctx context.Context) (bool, error) {
			if ok, err := gone(errOf(c.AppsV1().ReplicaSets(ns).Get(ctx, "d-1", metav1.GetOptions{}))); !ok {
				return false, err
			}
			return gone(errOf(c.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})))
		})
	})

	t.Run("Orphan", func(t *testing.T) {
		ns := framework.CreateNamespace(t, c, "gc-chain-orphan")
		_, rs, _ := chain(t, c, ns)
		policy := metav1.DeletePropagationOrphan
		if err := c.AppsV1().Deployments(ns).Delete(ctx, "d", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, waitTimeout, "the deployment to be gone", func(ctx context.Context) (bool, error) {
			return gone(errOf(c.AppsV1().Deployments(ns).Get(ctx, "d", metav1.GetOptions{})))
		})
		got, err := c.AppsV1().ReplicaSets(ns).Get(ctx, "d-1", metav1.GetOptions{})
		if err != nil || len(got.OwnerReferences) != 0 {
			t.Fatalf("orphaned replicaset: %v, owners %v", err, got.OwnerReferences)
		}
		// Orphaning is one level deep: the pod keeps its ReplicaSet.
		p, err := c.CoreV1().Pods(ns).Get(ctx, "d-1-x", metav1.GetOptions{})
		if err != nil || len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != rs.UID {
			t.Fatalf("pod of the orphaned replicaset: %v, owners %v", err, p.OwnerReferences)
		}
	})
}

func errOf[T any](_ T, err error) error { return err }

// Foreground and orphan propagation over custom resources.
func TestCustomResourcePropagation(t *testing.T) {
	c, _ := runGC(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(framework.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := framework.CreateCRD(t, dyn, "Gadget")
	ns := framework.CreateNamespace(t, c, "gc-cr-policies")
	res := dyn.Resource(crd.GVR).Namespace(ns)
	mk := func(name string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
		t.Helper()
		u, err := res.Create(ctx, crd.NewObject(name, owners...), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	ref := func(u *unstructured.Unstructured) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: crd.GVR.GroupVersion().String(), Kind: crd.Kind, Name: u.GetName(), UID: u.GetUID(), BlockOwnerDeletion: ptr.To(true)}
	}

	fg := mk("fg-owner")
	mk("fg-dep", ref(fg))
	policy := metav1.DeletePropagationForeground
	if err := res.Delete(ctx, "fg-owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "foreground owner and dependent to be gone", func(ctx context.Context) (bool, error) {
		if ok, err := gone(errOf(res.Get(ctx, "fg-dep", metav1.GetOptions{}))); !ok {
			return false, err
		}
		return gone(errOf(res.Get(ctx, "fg-owner", metav1.GetOptions{})))
	})

	or := mk("orphan-owner")
	mk("orphan-dep", ref(or))
	policy = metav1.DeletePropagationOrphan
	if err := res.Delete(ctx, "orphan-owner", metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "orphan owner to be gone", func(ctx context.Context) (bool, error) {
		return gone(errOf(res.Get(ctx, "orphan-owner", metav1.GetOptions{})))
	})
	dep, err := res.Get(ctx, "orphan-dep", metav1.GetOptions{})
	if err != nil || len(dep.GetOwnerReferences()) != 0 {
		t.Fatalf("orphaned custom resource: %v, owners %v", err, dep.GetOwnerReferences())
	}
}

// Deleting a CRD while its objects own others: the objects go with the CRD,
// their dependents are collected, and the collector keeps working with the
// resource's monitor gone.
func TestCRDDeletedWhileObjectsExist(t *testing.T) {
	c, gc := runGC(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(framework.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	crd := framework.CreateCRD(t, dyn, "Doomed")
	ns := framework.CreateNamespace(t, c, "gc-crd-deleted")
	owner, err := dyn.Resource(crd.GVR).Namespace(ns).Create(ctx, crd.NewObject("owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wref := metav1.OwnerReference{APIVersion: crd.GVR.GroupVersion().String(), Kind: crd.Kind, Name: "owner", UID: owner.GetUID()}
	// Wait until the collector watches the new type, so that it knows the
	// owner before it disappears.
	framework.Eventually(t, waitTimeout, "the collector to know the custom resource", func(ctx context.Context) (bool, error) {
		return gc.GraphHasUID(owner.GetUID()), nil
	})
	create(t, c, ns, configMap("cm-dep", wref))

	framework.DeleteCRD(t, dyn, crd)
	waitConfigMapGone(t, c, ns, "cm-dep")

	// Still collecting, and synced, after the monitor went away.
	framework.Eventually(t, waitTimeout, "the collector to be synced", func(context.Context) (bool, error) {
		return gc.IsSynced(klog.Background()), nil
	})
	o := create(t, c, ns, configMap("after"))
	create(t, c, ns, configMap("after-dep", ownerRef(o, false)))
	deleteWith(t, c, ns, "after", metav1.DeletePropagationBackground)
	waitConfigMapGone(t, c, ns, "after-dep")
}

// A collector stopped in the middle of a foreground deletion: the next one
// finishes it from what it finds in the apiserver.
func TestRestartDuringForegroundDeletion(t *testing.T) {
	stopShared()
	_, stop := startGC(t)
	c := framework.Shared(t).Client(t)
	ctx := context.Background()
	ns := framework.CreateNamespace(t, c, "gc-restart")
	owner := create(t, c, ns, configMap("owner"))
	dep := configMap("dep", ownerRef(owner, true))
	dep.Finalizers = []string{"example.com/hold"}
	create(t, c, ns, dep)

	deleteWith(t, c, ns, "owner", metav1.DeletePropagationForeground)
	framework.Eventually(t, waitTimeout, "the dependent to be deleting", func(ctx context.Context) (bool, error) {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "dep", metav1.GetOptions{})
		return err == nil && cm.DeletionTimestamp != nil, err
	})
	stop()

	// With no collector running, the dependent goes; the owner stays
	// behind its foregroundDeletion finalizer.
	if _, err := c.CoreV1().ConfigMaps(ns).Patch(ctx, "dep", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfigMapGone(t, c, ns, "dep")
	got, err := c.CoreV1().ConfigMaps(ns).Get(ctx, "owner", metav1.GetOptions{})
	if err != nil || !containsString(got.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("owner with no collector running: %v, %+v", err, got.ObjectMeta)
	}

	runGC(t)
	waitConfigMapGone(t, c, ns, "owner")
}
