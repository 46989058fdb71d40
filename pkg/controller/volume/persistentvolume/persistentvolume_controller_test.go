package persistentvolume

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func TestStoreObjectUpdate(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	store := newVolumeIndex().store
	pv := newVolume("pv", "1Gi")
	pv.ResourceVersion = "10"
	if ok, err := storeObjectUpdate(logger, store, pv, "volume"); !ok || err != nil {
		t.Fatalf("add: %v %v", ok, err)
	}
	older := pv.DeepCopy()
	older.ResourceVersion = "9"
	if ok, err := storeObjectUpdate(logger, store, older, "volume"); ok || err != nil {
		t.Errorf("older version stored: %v %v", ok, err)
	}
	same := pv.DeepCopy()
	if ok, err := storeObjectUpdate(logger, store, same, "volume"); !ok || err != nil {
		t.Errorf("same version (periodic resync) refused: %v %v", ok, err)
	}
	bad := pv.DeepCopy()
	bad.ResourceVersion = "x"
	if _, err := storeObjectUpdate(logger, store, bad, "volume"); err == nil {
		t.Error("unparsable resourceVersion accepted")
	}
}

// TestStaleInformerDataIgnored: after the controller bound a volume, the
// informer still delivers the old, unbound version; it must not be synced
// (it would be bound again, maybe to another claim).
func TestStaleInformerDataIgnored(t *testing.T) {
	h := newHarness(t)
	stalePV := h.addVolume(newVolume("pv", "1Gi"))
	staleA := h.addClaim(newClaim("a", "1Gi"))
	h.addClaim(newClaim("b", "1Gi"))
	if err := h.syncClaim("a"); err != nil {
		t.Fatal(err)
	}
	writes := h.countWrites("persistentvolumes") + h.countWrites("persistentvolumeclaims")

	// Old versions as a lagging informer would deliver them.
	if err := h.ctrl.updateVolume(h.ctx, stalePV); err != nil {
		t.Fatal(err)
	}
	if err := h.ctrl.updateClaim(h.ctx, staleA); err != nil {
		t.Fatal(err)
	}
	if got := h.countWrites("persistentvolumes") + h.countWrites("persistentvolumeclaims"); got != writes {
		t.Errorf("%d writes caused by stale objects", got-writes)
	}

	// Claim b must not get the volume a now has, although the informer
	// (stalePV) still shows it Available.
	if err := h.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Update(stalePV); err != nil {
		t.Fatal(err)
	}
	if err := h.syncClaim("b"); err != nil {
		t.Fatal(err)
	}
	if h.claim("b").Spec.VolumeName != "" || h.volume("pv").Spec.ClaimRef.Name != "a" {
		t.Error("volume bound twice")
	}
}

// TestConflictOnStaleClaim: a sync working on an outdated claim fails on
// the apiserver's conflict and leaves the objects as they were.
func TestConflictOnStaleClaim(t *testing.T) {
	h := newHarness(t)
	h.addVolume(newVolume("pv", "1Gi"))
	stale := h.addClaim(newClaim("claim", "1Gi"))
	fresh := stale.DeepCopy()
	fresh.Labels = map[string]string{"changed": "by-user"}
	if _, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Update(h.ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := h.ctrl.syncClaim(h.ctx, stale)
	if !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	// The volume's half was written first; the next sync completes it.
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if h.claim("claim").Spec.VolumeName != "pv" {
		t.Error("binding not completed after the conflict")
	}
}

func TestOperationMap(t *testing.T) {
	m := newOperationMap()
	release := make(chan struct{})
	var runs atomic.Int32
	if err := m.run("op", func() error { runs.Add(1); <-release; return errors.New("boom") }); err != nil {
		t.Fatal(err)
	}
	if err := m.run("op", func() error { return nil }); !errors.As(err, &operationRunningError{}) {
		t.Errorf("second run: %v", err)
	}
	if !m.isRunning("op") {
		t.Error("not running")
	}
	close(release)
	m.wait()
	if err := m.run("op", func() error { return nil }); !errors.As(err, &operationBackoffError{}) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("run during backoff: %v", err)
	}
	testutil.WaitFor(t, "a retry after the backoff", func() bool {
		return m.run("op", func() error { runs.Add(1); return nil }) == nil
	})
	m.wait()
	if runs.Load() != 2 {
		t.Errorf("%d runs", runs.Load())
	}
	// Success forgets the backoff.
	if err := m.run("op", func() error { return nil }); err != nil {
		t.Errorf("run after success: %v", err)
	}
	m.wait()
	// A panic is a failure.
	if err := m.run("panic", func() error { panic("x") }); err != nil {
		t.Fatal(err)
	}
	m.wait()
	if err := m.run("panic", func() error { return nil }); !errors.As(err, &operationBackoffError{}) {
		t.Errorf("run after panic: %v", err)
	}
}

// TestRunBindsAndReleases drives the controller through its informers.
func TestRunBindsAndReleases(t *testing.T) {
	h := newHarness(t)
	h.ctrl.resyncPeriod = 100 * time.Millisecond
	h.factory.Start(h.ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ctrl.Run(h.ctx)
	}()
	t.Cleanup(func() {
		h.cancel()
		<-done
	})

	if _, err := h.client.CoreV1().PersistentVolumes().Create(h.ctx, newVolume("pv", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Create(h.ctx, newClaim("claim", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "bound", func() bool {
		pv, c := h.volume("pv"), h.claim("claim")
		return pv.Status.Phase == v1.VolumeBound && c.Status.Phase == v1.ClaimBound && c.Spec.VolumeName == "pv"
	})
	if err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Delete(h.ctx, "claim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "released", func() bool { return h.volume("pv").Status.Phase == v1.VolumeReleased })

	if err := h.client.CoreV1().PersistentVolumes().Delete(h.ctx, "pv", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "volume forgotten", func() bool {
		_, found, _ := h.ctrl.volumes.store.GetByKey("pv")
		return !found
	})

	// The collector reads the controller's caches.
	if _, err := h.client.CoreV1().PersistentVolumes().Create(h.ctx, newVolume("free", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "free volume cached", func() bool {
		obj, found, _ := h.ctrl.volumes.store.GetByKey("free")
		return found && obj.(*v1.PersistentVolume).Status.Phase == v1.VolumeAvailable
	})
	want := `# HELP pv_collector_total_pv_count [ALPHA] Gauge measuring total number of persistent volumes
# TYPE pv_collector_total_pv_count gauge
pv_collector_total_pv_count{plugin_name="N/A",volume_mode="Filesystem"} 1
# HELP pv_collector_unbound_pv_count [ALPHA] Gauge measuring number of persistent volume currently unbound
# TYPE pv_collector_unbound_pv_count gauge
pv_collector_unbound_pv_count{storage_class=""} 1
`
	if got := gatherText(t, legacyregistry.DefaultGatherer, "pv_collector_total_pv_count", "pv_collector_unbound_pv_count", "pv_collector_bound_pv_count", "pv_collector_bound_pvc_count"); got != want {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// gatherText renders the named metric families in the text format.
func gatherText(t *testing.T, g metrics.Gatherer, names ...string) string {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range families {
		if slices.Contains(names, f.GetName()) {
			if _, err := metricstestutil.MetricFamilyToText(&b, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

func TestDeletionsSyncTheOtherSide(t *testing.T) {
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	h.addVolume(pv)
	h.addClaim(c)
	h.ctrl.operationTimestamps.AddIfNotExist("ns/claim", "p", "provision")
	h.ctrl.operationTimestamps.AddIfNotExist("pv", "p", "delete")

	// Gone from the informer (never added there in this harness for the
	// deletion): handled from the controller's cache.
	if err := h.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Delete(c); err != nil {
		t.Fatal(err)
	}
	if err := h.ctrl.syncClaimByKey(h.ctx, "ns/claim"); err != nil {
		t.Fatal(err)
	}
	if key, _ := h.ctrl.volumeQueue.Get(); key != "pv" {
		t.Errorf("volume queue got %q", key)
	}
	if h.ctrl.operationTimestamps.Has("ns/claim") {
		t.Error("provision timing of a deleted claim kept")
	}
	if err := h.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Delete(pv); err != nil {
		t.Fatal(err)
	}
	if err := h.ctrl.syncVolumeByKey(h.ctx, "pv"); err != nil {
		t.Fatal(err)
	}
	if key, _ := h.ctrl.claimQueue.Get(); key != "ns/claim" {
		t.Errorf("claim queue got %q", key)
	}
	if h.ctrl.operationTimestamps.Has("pv") {
		t.Error("deletion timing not completed")
	}
	if _, found, _ := h.ctrl.volumes.store.GetByKey("pv"); found {
		t.Error("deleted volume still cached")
	}
	// Processing the deletion twice is harmless.
	if err := h.ctrl.syncVolumeByKey(h.ctx, "pv"); err != nil {
		t.Fatal(err)
	}
}
