package persistentvolume

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestUnusedVolumeBecomesAvailable(t *testing.T) {
	h := newHarness(t)
	pv := newVolume("pv", "1Gi")
	pv.Status.Phase = v1.VolumePending
	h.addVolume(pv)
	reserved := newVolume("reserved", "1Gi")
	reserved.Spec.ClaimRef = claimRefTo(newClaim("someone", "1Gi"), false)
	reserved.Status.Phase = v1.VolumePending
	h.addVolume(reserved)
	for _, name := range []string{"pv", "reserved"} {
		if err := h.syncVolume(name); err != nil {
			t.Fatal(err)
		}
		if p := h.volume(name).Status.Phase; p != v1.VolumeAvailable {
			t.Errorf("%s: phase %s", name, p)
		}
	}
}

func TestBoundVolumeStatus(t *testing.T) {
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	pv.Status.Phase = v1.VolumeAvailable
	h.addVolume(pv)
	h.addClaim(c)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeBound {
		t.Errorf("phase %s", p)
	}
}

func TestRetainReleasesVolume(t *testing.T) {
	h := newHarness(t)
	pv, _ := boundPair("pv", "claim")
	h.addVolume(pv)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	got := h.volume("pv")
	if got.Status.Phase != v1.VolumeReleased || got.Spec.ClaimRef == nil {
		t.Errorf("phase %s claimRef %v", got.Status.Phase, got.Spec.ClaimRef)
	}
	h.waitOperations()
	h.expectEvents()
}

func TestClaimOnlyInInformerKeepsVolumeBound(t *testing.T) {
	// A provisioner's PV can arrive before its claim reaches the
	// controller's cache: the informer (or the API) must be asked before
	// releasing anything.
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	h.addVolume(pv)
	saved, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Create(h.ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeBound {
		t.Errorf("phase %s: released although the claim exists in the API", p)
	}
	if err := h.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(saved); err != nil {
		t.Fatal(err)
	}
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeBound {
		t.Errorf("phase %s: released although the claim is in the informer", p)
	}
}

func TestReplacedClaimReleasesVolume(t *testing.T) {
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	h.addVolume(pv)
	c.UID = "new-uid"
	c.Spec.VolumeName = ""
	c.Annotations = nil
	c.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}
	h.addClaim(c)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeReleased {
		t.Errorf("phase %s", p)
	}
}

func TestStaleCachedClaimUIDAskAPI(t *testing.T) {
	// Our cached claim has an old UID, but the API has the claim the
	// volume points to: not released.
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	pv.Spec.ClaimRef.UID = "current"
	h.addVolume(pv)
	c.UID = "current"
	if _, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Create(h.ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := c.DeepCopy()
	stale.UID = "old"
	stale.ResourceVersion = "1"
	if _, err := h.ctrl.storeClaimUpdate(h.logger(), stale); err != nil {
		t.Fatal(err)
	}
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeBound {
		t.Errorf("phase %s", p)
	}
}

func TestHalfBoundVolumeQueuesClaim(t *testing.T) {
	h := newHarness(t)
	pv, c := boundPair("pv", "claim")
	c.Spec.VolumeName = ""
	h.addVolume(pv)
	h.addClaim(c)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if h.ctrl.claimQueue.Len() != 1 {
		t.Errorf("claim queue length %d", h.ctrl.claimQueue.Len())
	}
}

func TestVolumeModeMismatchEvents(t *testing.T) {
	h := newHarness(t)
	c := newClaim("claim", "1Gi")
	c.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
	c = h.addClaim(c)
	pv := newVolume("pv", "1Gi")
	pv.Spec.ClaimRef = claimRefTo(c, true)
	h.addVolume(pv)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	h.expectEvents(
		`Warning VolumeMismatch Cannot bind PersistentVolume to requested PersistentVolumeClaim "claim" due to incompatible volumeMode.`,
		`Warning VolumeMismatch Cannot bind PersistentVolume "pv" to requested PersistentVolumeClaim due to incompatible volumeMode.`)
	if h.ctrl.claimQueue.Len() != 0 {
		t.Error("claim queued")
	}
}

func TestClaimBoundElsewhere(t *testing.T) {
	t.Run("bound by controller: unbound", func(t *testing.T) {
		h := newHarness(t)
		pv, c := boundPair("pv", "claim")
		pv.Annotations["other"] = "kept"
		c.Spec.VolumeName = "other-pv"
		h.addVolume(pv)
		h.addClaim(c)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		got := h.volume("pv")
		if got.Spec.ClaimRef != nil || got.Status.Phase != v1.VolumeAvailable {
			t.Errorf("claimRef %v phase %s", got.Spec.ClaimRef, got.Status.Phase)
		}
		if _, ok := got.Annotations[AnnBoundByController]; ok || got.Annotations["other"] != "kept" {
			t.Errorf("annotations %v", got.Annotations)
		}
	})
	t.Run("pre-bound by user: reservation kept", func(t *testing.T) {
		h := newHarness(t)
		pv, c := boundPair("pv", "claim")
		pv.Annotations = nil
		c.Spec.VolumeName = "other-pv"
		h.addVolume(pv)
		h.addClaim(c)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		got := h.volume("pv")
		if got.Spec.ClaimRef == nil || got.Spec.ClaimRef.Name != "claim" || got.Spec.ClaimRef.UID != "" || got.Status.Phase != v1.VolumeAvailable {
			t.Errorf("claimRef %v phase %s", got.Spec.ClaimRef, got.Status.Phase)
		}
	})
	t.Run("provisioned for the claim: released and deleted", func(t *testing.T) {
		h := newHarness(t)
		h.addClass(newClass("ext", "example.com/p", storagev1.VolumeBindingImmediate))
		pv, c := boundPair("pv", "claim")
		pv.Annotations[AnnDynamicallyProvisioned] = "example.com/p"
		pv.Spec.StorageClassName = "ext"
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
		c.Spec.VolumeName = "other-pv"
		h.addVolume(pv)
		h.addClaim(c)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		h.waitOperations()
		if p := h.volume("pv").Status.Phase; p != v1.VolumeReleased {
			t.Errorf("phase %s", p)
		}
		if !h.ctrl.operationTimestamps.Has("pv") {
			t.Error("deletion not timed")
		}
	})
}

func TestDeleteReclaim(t *testing.T) {
	release := func(h *harness, pv *v1.PersistentVolume) {
		h.t.Helper()
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
		h.addVolume(pv)
		if err := h.syncVolume(pv.Name); err != nil {
			h.t.Fatal(err)
		}
		h.waitOperations()
	}
	t.Run("external provisioner: left to the external deleter", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Annotations[AnnDynamicallyProvisioned] = "example.com/p"
		pv.Finalizers = []string{PVDeletionProtectionFinalizer}
		release(h, pv)
		got := h.volume("pv")
		if got.Status.Phase != v1.VolumeReleased || !slices.Equal(got.Finalizers, []string{PVDeletionProtectionFinalizer}) {
			t.Errorf("phase %s finalizers %v", got.Status.Phase, got.Finalizers)
		}
		h.expectEvents()
	})
	t.Run("static CSI volume: left to the external deleter", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		release(h, pv)
		if p := h.volume("pv").Status.Phase; p != v1.VolumeReleased {
			t.Errorf("phase %s", p)
		}
		h.expectEvents()
	})
	t.Run("migrated volume: stands down", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Annotations[AnnDynamicallyProvisioned] = "kubernetes.io/gce-pd"
		pv.Spec.CSI = nil
		pv.Spec.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: "disk"}
		pv.Finalizers = []string{PVDeletionInTreeProtectionFinalizer}
		release(h, pv)
		got := h.volume("pv")
		if got.Annotations[AnnMigratedTo] != "pd.csi.storage.gke.io" || len(got.Finalizers) != 0 || got.Status.Phase != v1.VolumeReleased {
			t.Errorf("annotations %v finalizers %v phase %s", got.Annotations, got.Finalizers, got.Status.Phase)
		}
		h.expectEvents()
	})
	t.Run("unknown in-tree provisioner fails", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Annotations[AnnDynamicallyProvisioned] = "kubernetes.io/foo"
		release(h, pv)
		got := h.volume("pv")
		if got.Status.Phase != v1.VolumeFailed || got.Status.Message != "no volume plugin matched name: kubernetes.io/foo" {
			t.Errorf("status %+v", got.Status)
		}
		h.expectEvents("Warning VolumeFailedDelete no volume plugin matched name: kubernetes.io/foo")
		if !slices.Contains(got.Finalizers, PVDeletionInTreeProtectionFinalizer) {
			t.Errorf("in-tree finalizer not added: %v", got.Finalizers)
		}
	})
	for _, tc := range []struct {
		name   string
		source v1.PersistentVolumeSource
		want   string
	}{
		{"static NFS", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/p"}}, `error getting deleter volume plugin for volume "pv": no deletable volume plugin matched`},
		{"static iSCSI", v1.PersistentVolumeSource{ISCSI: &v1.ISCSIPersistentVolumeSource{TargetPortal: "p", IQN: "i"}}, `error getting deleter volume plugin for volume "pv": no volume plugin matched`},
		{"hostPath outside /tmp", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/data"}}, "host_path deleter only supports /tmp/.+ but received provided /var/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pv, _ := boundPair("pv", "claim")
			pv.Spec.PersistentVolumeSource = tc.source
			release(h, pv)
			got := h.volume("pv")
			if got.Status.Phase != v1.VolumeFailed || got.Status.Message != tc.want {
				t.Errorf("status %+v", got.Status)
			}
			h.expectEvents("Warning VolumeFailedDelete " + tc.want)
		})
	}
	t.Run("failed volume is retried but keeps Failed", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/p"}}
		pv.Status.Phase = v1.VolumeFailed
		release(h, pv)
		if p := h.volume("pv").Status.Phase; p != v1.VolumeFailed {
			t.Errorf("phase %s", p)
		}
		h.expectEvents() // phase unchanged: no new event
	})
}

func TestUnknownReclaimPolicy(t *testing.T) {
	h := newHarness(t)
	pv, _ := boundPair("pv", "claim")
	pv.Spec.PersistentVolumeReclaimPolicy = "Bogus"
	h.addVolume(pv)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	if p := h.volume("pv").Status.Phase; p != v1.VolumeFailed {
		t.Errorf("phase %s", p)
	}
	h.expectEvents("Warning VolumeUnknownReclaimPolicy Volume has unrecognized PersistentVolumeReclaimPolicy")
}

func TestDeletionFinalizers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		provisioner string
		policy      v1.PersistentVolumeReclaimPolicy
		finalizers  []string
		want        []string
	}{
		{"in-tree Delete gets the in-tree finalizer", "kubernetes.io/host-path", v1.PersistentVolumeReclaimDelete, nil, []string{PVDeletionInTreeProtectionFinalizer}},
		{"in-tree Retain loses it", "kubernetes.io/host-path", v1.PersistentVolumeReclaimRetain, []string{"a", PVDeletionInTreeProtectionFinalizer}, []string{"a"}},
		{"in-tree Recycle loses it", "kubernetes.io/host-path", v1.PersistentVolumeReclaimRecycle, []string{PVDeletionInTreeProtectionFinalizer}, nil},
		{"in-tree drops the external finalizer", "kubernetes.io/host-path", v1.PersistentVolumeReclaimRetain, []string{PVDeletionProtectionFinalizer}, nil},
		{"migrated drops the in-tree finalizer", "kubernetes.io/aws-ebs", v1.PersistentVolumeReclaimDelete, []string{PVDeletionInTreeProtectionFinalizer, PVDeletionProtectionFinalizer}, []string{PVDeletionProtectionFinalizer}},
		{"external untouched", "example.com/p", v1.PersistentVolumeReclaimRetain, []string{PVDeletionInTreeProtectionFinalizer, PVDeletionProtectionFinalizer}, []string{PVDeletionInTreeProtectionFinalizer, PVDeletionProtectionFinalizer}},
		{"static untouched", "", v1.PersistentVolumeReclaimDelete, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pv := newVolume("pv", "1Gi")
			if tc.provisioner != "" {
				pv.Annotations = map[string]string{AnnDynamicallyProvisioned: tc.provisioner}
			}
			pv.Spec.PersistentVolumeReclaimPolicy = tc.policy
			pv.Finalizers = tc.finalizers
			h.addVolume(pv)
			if err := h.syncVolume("pv"); err != nil {
				t.Fatal(err)
			}
			if got := h.volume("pv").Finalizers; !slices.Equal(got, tc.want) {
				t.Errorf("finalizers %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMigratedToAnnotationRemovedFromStaticVolume(t *testing.T) {
	// Only provisioned-by drives migrated-to on volumes: static volumes
	// are left alone, non-migrated provisioners lose it.
	h := newHarness(t)
	static := newVolume("static", "1Gi")
	static.Annotations = map[string]string{AnnMigratedTo: "x"}
	h.addVolume(static)
	ext := newVolume("ext", "1Gi")
	ext.Annotations = map[string]string{AnnDynamicallyProvisioned: "example.com/p", AnnMigratedTo: "x"}
	h.addVolume(ext)
	_ = h.syncVolume("static")
	_ = h.syncVolume("ext")
	if h.volume("static").Annotations[AnnMigratedTo] != "x" {
		t.Error("static volume changed")
	}
	if _, ok := h.volume("ext").Annotations[AnnMigratedTo]; ok {
		t.Error("stale migrated-to kept")
	}
}
