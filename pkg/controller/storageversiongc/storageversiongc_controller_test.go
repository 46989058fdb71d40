package storageversiongc

import (
	"context"
	"testing"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

func lease(name string, apiserver bool) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name}}
	if apiserver {
		l.Labels = map[string]string{IdentityLeaseComponentLabelKey: KubeAPIServer}
	}
	return l
}

func storageVersion(name string, entries map[string]string) *apiserverinternalv1alpha1.StorageVersion {
	sv := &apiserverinternalv1alpha1.StorageVersion{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, id := range []string{"a", "b", "c"} {
		if v, ok := entries[id]; ok {
			sv.Status.StorageVersions = append(sv.Status.StorageVersions,
				apiserverinternalv1alpha1.ServerStorageVersion{APIServerID: id, EncodingVersion: v, DecodableVersions: []string{v}})
		}
	}
	return sv
}

func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(ctx, client, factory.Coordination().V1().Leases(), factory.Internal().V1alpha1().StorageVersions())
	if err != nil {
		t.Fatal(err)
	}
	return c, client, factory
}

func getSV(t *testing.T, client *fake.Clientset, name string) *apiserverinternalv1alpha1.StorageVersion {
	t.Helper()
	sv, err := client.InternalV1alpha1().StorageVersions().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

func ids(sv *apiserverinternalv1alpha1.StorageVersion) []string {
	var out []string
	for _, e := range sv.Status.StorageVersions {
		out = append(out, e.APIServerID)
	}
	return out
}

func TestSyncDeletedLease(t *testing.T) {
	c, client, _ := newController(t,
		lease("a", true),
		storageVersion("apps.deployments", map[string]string{"a": "apps/v1", "b": "apps/v2"}),
		storageVersion("core.pods", map[string]string{"b": "v1"}),
		storageVersion("core.secrets", map[string]string{"a": "v1", "c": "v1"}))
	ctx := context.Background()

	// "a" still has its Lease: nothing happens.
	if err := c.syncDeletedLease(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := ids(getSV(t, client, "apps.deployments")); len(got) != 2 {
		t.Fatalf("entries changed while the Lease exists: %v", got)
	}

	if err := c.syncDeletedLease(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if getSV(t, client, "core.pods") != nil {
		t.Error("StorageVersion left without entries not deleted")
	}
	dep := getSV(t, client, "apps.deployments")
	if got := ids(dep); len(got) != 1 || got[0] != "a" {
		t.Fatalf("apps.deployments entries = %v, want [a]", got)
	}
	// With the disagreeing server gone, the common version is agreed again.
	if v := dep.Status.CommonEncodingVersion; v == nil || *v != "apps/v1" {
		t.Errorf("common encoding version = %v, want apps/v1", v)
	}
	if len(dep.Status.Conditions) != 1 || dep.Status.Conditions[0].Type != apiserverinternalv1alpha1.AllEncodingVersionsEqual ||
		dep.Status.Conditions[0].Status != apiserverinternalv1alpha1.ConditionTrue {
		t.Errorf("conditions = %+v", dep.Status.Conditions)
	}
	if got := ids(getSV(t, client, "core.secrets")); len(got) != 2 {
		t.Errorf("core.secrets touched: %v", got)
	}
}

func TestSyncStorageVersion(t *testing.T) {
	c, client, _ := newController(t,
		lease("a", true),
		lease("b", false), // not an apiserver's identity Lease
		storageVersion("core.secrets", map[string]string{"a": "v1", "b": "v1", "c": "v1"}),
		storageVersion("core.pods", map[string]string{"c": "v1"}),
		storageVersion("core.configmaps", map[string]string{"a": "v1"}))
	ctx := context.Background()
	for _, name := range []string{"core.secrets", "core.pods", "core.configmaps", "missing"} {
		if err := c.syncStorageVersion(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(getSV(t, client, "core.secrets")); len(got) != 1 || got[0] != "a" {
		t.Errorf("core.secrets entries = %v, want [a]", got)
	}
	if getSV(t, client, "core.pods") != nil {
		t.Error("core.pods not deleted")
	}
	if got := ids(getSV(t, client, "core.configmaps")); len(got) != 1 {
		t.Errorf("core.configmaps entries = %v", got)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "storageversions" && a.Matches("update", "storageversions") {
			if u := a.(interface{ GetObject() runtime.Object }).GetObject().(*apiserverinternalv1alpha1.StorageVersion); u.Name == "core.configmaps" {
				t.Error("a StorageVersion with only valid entries was written")
			}
		}
	}
}

func TestEventHandlers(t *testing.T) {
	c, _, factory := newController(t)
	logger, _ := ktesting.NewTestContext(t)
	if err := factory.Coordination().V1().Leases().Informer().GetStore().Add(lease("a", true)); err != nil {
		t.Fatal(err)
	}
	if err := factory.Coordination().V1().Leases().Informer().GetStore().Add(lease("b", false)); err != nil {
		t.Fatal(err)
	}

	c.storageVersionChanged(logger, storageVersion("valid", map[string]string{"a": "v1"}))
	c.storageVersionChanged(logger, storageVersion("unlabelled", map[string]string{"a": "v1", "b": "v1"}))
	c.storageVersionChanged(logger, storageVersion("unknown", map[string]string{"c": "v1"}))
	if got := drain(c.svQueue.Len, c.svQueue.Get, c.svQueue.Done); len(got) != 2 || got[0] != "unlabelled" || got[1] != "unknown" {
		t.Errorf("storage version queue = %v", got)
	}

	other := lease("x", true)
	other.Namespace = "default"
	c.leaseDeleted(logger, lease("a", true))
	c.leaseDeleted(logger, lease("b", false))
	c.leaseDeleted(logger, other)
	c.leaseDeleted(logger, cache.DeletedFinalStateUnknown{Key: "kube-system/d", Obj: lease("d", true)})
	if got := drain(c.leaseQueue.Len, c.leaseQueue.Get, c.leaseQueue.Done); len(got) != 2 || got[0] != "a" || got[1] != "d" {
		t.Errorf("lease queue = %v", got)
	}
}

func drain(n func() int, get func() (string, bool), done func(string)) []string {
	var out []string
	for n() > 0 {
		k, _ := get()
		out = append(out, k)
		done(k)
	}
	return out
}
