// Package storageversiongc tests the storageversion-garbage-collector-controller
// against a kube-apiserver with APIServerIdentity and StorageVersionAPI on
// and internal.apiserver.k8s.io/v1alpha1 served: entries of servers
// without an identity Lease are dropped, a StorageVersion left empty goes.
package storageversiongc

import (
	"context"
	"testing"
	"time"

	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/storageversion"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/storageversiongc"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, framework.Options{APIServerFlags: []string{
		"--feature-gates=APIServerIdentity=true,StorageVersionAPI=true",
		"--runtime-config=internal.apiserver.k8s.io/v1alpha1=true",
	}})
}

func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	gc, err := storageversiongc.NewController(klog.NewContext(ctx, klog.Background()), c,
		factory.Coordination().V1().Leases(), factory.Internal().V1alpha1().StorageVersions())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	framework.RunController(t, ctx, cancel, factory, func(ctx context.Context) { gc.Run(ctx) })
}

func createLease(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	_, err := c.CoordinationV1().Leases(metav1.NamespaceSystem).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			storageversiongc.IdentityLeaseComponentLabelKey: storageversiongc.KubeAPIServer,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// createStorageVersion writes a StorageVersion with one entry per server.
func createStorageVersion(t *testing.T, c clientset.Interface, name string, servers ...string) {
	t.Helper()
	ctx := context.Background()
	sv, err := c.InternalV1alpha1().StorageVersions().Create(ctx, &apiserverinternalv1alpha1.StorageVersion{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.InternalV1alpha1().StorageVersions().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for _, s := range servers {
		sv.Status.StorageVersions = append(sv.Status.StorageVersions, apiserverinternalv1alpha1.ServerStorageVersion{
			APIServerID: s, EncodingVersion: "example.com/v1", DecodableVersions: []string{"example.com/v1"},
		})
	}
	// Validation wants the common version and its condition as servers set them.
	storageversion.SetCommonEncodingVersion(sv)
	if _, err := c.InternalV1alpha1().StorageVersions().UpdateStatus(ctx, sv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func servers(t *testing.T, c clientset.Interface, name string) ([]string, bool) {
	t.Helper()
	sv, err := c.InternalV1alpha1().StorageVersions().Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range sv.Status.StorageVersions {
		out = append(out, e.APIServerID)
	}
	return out, true
}

func waitServers(t *testing.T, c clientset.Interface, name string, want ...string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, name+" to list servers "+joined(want), func(context.Context) (bool, error) {
		got, ok := servers(t, c, name)
		return ok && joined(got) == joined(want), nil
	})
}

func waitGone(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, name+" to be deleted", func(context.Context) (bool, error) {
		_, ok := servers(t, c, name)
		return !ok, nil
	})
}

func joined(s []string) string {
	out := ""
	for _, x := range s {
		out += x + ","
	}
	return out
}

// Entries of a server that never had a Lease are dropped as soon as the
// StorageVersion is seen; one with only such entries is deleted.
func TestEntriesWithoutLease(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)
	createLease(t, c, "live-apiserver")
	createStorageVersion(t, c, "example.com.mixed", "live-apiserver", "ghost-apiserver")
	createStorageVersion(t, c, "example.com.orphans", "ghost-apiserver")
	waitServers(t, c, "example.com.mixed", "live-apiserver")
	waitGone(t, c, "example.com.orphans")
}

// Deleting an identity Lease drops that server's entries everywhere.
func TestLeaseDeleted(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)
	createLease(t, c, "server-1")
	createLease(t, c, "server-2")
	createStorageVersion(t, c, "example.com.both", "server-1", "server-2")
	createStorageVersion(t, c, "example.com.one", "server-2")

	// Barrier: a StorageVersion naming a ghost is cleaned after the two
	// above were seen (one worker, events in order); they keep their entries.
	createStorageVersion(t, c, "example.com.barrier", "ghost-apiserver")
	waitGone(t, c, "example.com.barrier")
	if got, _ := servers(t, c, "example.com.both"); joined(got) != "server-1,server-2," {
		t.Fatalf("entries of live servers dropped: %v", got)
	}

	if err := c.CoordinationV1().Leases(metav1.NamespaceSystem).Delete(context.Background(), "server-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServers(t, c, "example.com.both", "server-1")
	waitGone(t, c, "example.com.one")
}
