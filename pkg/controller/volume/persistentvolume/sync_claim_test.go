package persistentvolume

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestBindsClaimToSmallestMatchingVolume(t *testing.T) {
	h := newHarness(t)
	h.addVolume(newVolume("big", "10Gi"))
	h.addVolume(newVolume("tiny", "1Gi"))
	h.addVolume(newVolume("fit", "2Gi"))
	// Smaller, but with more access modes than asked for: only used when
	// no volume with just the requested modes fits.
	h.addVolume(newVolume("wider", "1600Mi", v1.ReadWriteOnce, v1.ReadOnlyMany))
	claim := h.addClaim(newClaim("claim", "1500Mi"))

	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	pv := h.volume("fit")
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID || pv.Spec.ClaimRef.Name != "claim" ||
		pv.Spec.ClaimRef.Namespace != testNamespace || pv.Spec.ClaimRef.Kind != "PersistentVolumeClaim" || pv.Spec.ClaimRef.APIVersion != "v1" {
		t.Errorf("claimRef = %+v", pv.Spec.ClaimRef)
	}
	if pv.Annotations[AnnBoundByController] != "yes" {
		t.Errorf("volume annotations %v", pv.Annotations)
	}
	if pv.Status.Phase != v1.VolumeBound {
		t.Errorf("volume phase %s", pv.Status.Phase)
	}
	got := h.claim("claim")
	if got.Spec.VolumeName != "fit" || got.Annotations[AnnBindCompleted] != "yes" || got.Annotations[AnnBoundByController] != "yes" {
		t.Errorf("claim spec %+v annotations %v", got.Spec, got.Annotations)
	}
	if got.Status.Phase != v1.ClaimBound || len(got.Status.AccessModes) != 1 {
		t.Errorf("claim status %+v", got.Status)
	}
	if c := got.Status.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("claim capacity %s", c.String())
	}
	for _, other := range []string{"big", "tiny", "wider"} {
		if h.volume(other).Spec.ClaimRef != nil {
			t.Errorf("volume %s bound too", other)
		}
	}
	h.expectEvents()
}

func TestBindCopiesVolumeAttributesClassOnBinding(t *testing.T) {
	h := newHarness(t)
	pv := newVolume("pv", "1Gi")
	pv.Spec.VolumeAttributesClassName = ptr.To("gold")
	h.addVolume(pv)
	c := newClaim("claim", "1Gi")
	c.Spec.VolumeAttributesClassName = ptr.To("gold")
	h.addClaim(c)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if got := h.claim("claim").Status.CurrentVolumeAttributesClassName; ptr.Deref(got, "") != "gold" {
		t.Errorf("currentVolumeAttributesClassName = %v", got)
	}
}

func TestBindUsesPreResizeCapacity(t *testing.T) {
	h := newHarness(t)
	pv := newVolume("pv", "2Gi")
	pv.Annotations = map[string]string{annPreResizeCapacity: "1Gi"}
	h.addVolume(pv)
	h.addClaim(newClaim("claim", "1Gi"))
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if c := h.claim("claim").Status.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("capacity %s, want the pre-resize 1Gi", c.String())
	}
}

func TestNoVolumeNoClassStaysPending(t *testing.T) {
	h := newHarness(t)
	h.addClaim(newClaim("claim", "1Gi"))
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.expectEvents("Normal FailedBinding no persistent volumes available for this claim and no storage class is set")
	if p := h.claim("claim").Status.Phase; p != v1.ClaimPending {
		t.Errorf("phase %s", p)
	}
}

func TestSelectorMismatchStaysPending(t *testing.T) {
	h := newHarness(t)
	h.addVolume(newVolume("pv", "1Gi"))
	c := newClaim("claim", "1Gi")
	c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
	h.addClaim(c)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if h.volume("pv").Spec.ClaimRef != nil || h.claim("claim").Spec.VolumeName != "" {
		t.Error("bound despite selector")
	}
}

func TestExternalProvisioning(t *testing.T) {
	h := newHarness(t)
	h.addClass(newClass("ext", "example.com/provisioner", storagev1.VolumeBindingImmediate))
	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = ptr.To("ext")
	h.addClaim(c)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	got := h.claim("claim")
	if got.Annotations[AnnStorageProvisioner] != "example.com/provisioner" || got.Annotations[AnnBetaStorageProvisioner] != "example.com/provisioner" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if _, ok := got.Annotations[AnnMigratedTo]; ok {
		t.Errorf("migrated-to set on %v", got.Annotations)
	}
	h.expectEvents("Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'example.com/provisioner' " +
		"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	if !h.ctrl.operationTimestamps.Has("ns/claim") {
		t.Error("provisioning not timed")
	}

	// The provisioner creates a PV pre-bound to the claim: the next sync
	// binds it and ends the timing.
	pv := newVolume("pvc-uid-claim", "1Gi")
	pv.Spec.ClaimRef = claimRefTo(got, true)
	pv.Spec.StorageClassName = "ext"
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
	pv.Annotations = map[string]string{AnnDynamicallyProvisioned: "example.com/provisioner"}
	pv.Status.Phase = v1.VolumePending
	h.addVolume(pv)
	if err := h.ctrl.syncClaim(h.ctx, got); err != nil {
		t.Fatal(err)
	}
	if h.claim("claim").Spec.VolumeName != pv.Name || h.volume(pv.Name).Status.Phase != v1.VolumeBound {
		t.Error("provisioned volume not bound")
	}
	if _, ok := h.volume(pv.Name).Annotations[AnnBoundByController]; ok {
		t.Error("a volume pre-bound by the provisioner got bound-by-controller")
	}
	if h.ctrl.operationTimestamps.Has("ns/claim") {
		t.Error("provisioning timing not finished")
	}
}

func TestExternalProvisioningMigratedPlugin(t *testing.T) {
	h := newHarness(t)
	h.addClass(newClass("pd", "kubernetes.io/gce-pd", storagev1.VolumeBindingImmediate))
	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = ptr.To("pd")
	h.addClaim(c)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	got := h.claim("claim")
	if got.Annotations[AnnStorageProvisioner] != "pd.csi.storage.gke.io" || got.Annotations[AnnMigratedTo] != "" {
		// migrated-to follows the annotation's provisioner, which is the
		// CSI driver itself here, so no migrated-to.
		t.Errorf("annotations %v", got.Annotations)
	}
	h.expectEvents("Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'pd.csi.storage.gke.io' " +
		"or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
}

func TestClaimMigrationAnnotation(t *testing.T) {
	h := newHarness(t)
	c := newClaim("claim", "1Gi")
	c.Annotations = map[string]string{AnnBetaStorageProvisioner: "kubernetes.io/aws-ebs"}
	h.addClaim(c)
	other := newClaim("other", "1Gi")
	other.Annotations = map[string]string{AnnStorageProvisioner: "example.com/x", AnnMigratedTo: "ebs.csi.aws.com"}
	h.addClaim(other)
	_ = h.syncClaim("claim")
	_ = h.syncClaim("other")
	if got := h.claim("claim").Annotations[AnnMigratedTo]; got != "ebs.csi.aws.com" {
		t.Errorf("migrated-to = %q", got)
	}
	if _, ok := h.claim("other").Annotations[AnnMigratedTo]; ok {
		t.Error("stale migrated-to kept")
	}
}

func TestDynamicProvisioningDisabled(t *testing.T) {
	h := newHarness(t, withoutDynamicProvisioning())
	h.addClass(newClass("ext", "example.com/provisioner", storagev1.VolumeBindingImmediate))
	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = ptr.To("ext")
	h.addClaim(c)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	if _, ok := h.claim("claim").Annotations[AnnStorageProvisioner]; ok {
		t.Error("claim annotated with provisioning disabled")
	}
	h.expectEvents()
}

func TestProvisioningFailedEvents(t *testing.T) {
	for _, tc := range []struct {
		name, class, provisioner, want string
	}{
		{"missing class", "missing", "", `Warning ProvisioningFailed storageclass.storage.k8s.io "missing" not found`},
		{"unknown in-tree plugin", "local", "kubernetes.io/no-provisioner", "Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/no-provisioner"},
		{"non-provisioning in-tree plugin", "nfs", "kubernetes.io/nfs", "Warning ProvisioningFailed no provisionable volume plugin matched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.provisioner != "" {
				h.addClass(newClass(tc.class, tc.provisioner, storagev1.VolumeBindingImmediate))
			}
			c := newClaim("claim", "1Gi")
			c.Spec.StorageClassName = ptr.To(tc.class)
			h.addClaim(c)
			if err := h.syncClaim("claim"); err != nil {
				t.Fatal(err)
			}
			h.waitOperations()
			h.expectEvents(tc.want)
			if _, ok := h.claim("claim").Annotations[AnnStorageProvisioner]; ok {
				t.Error("claim annotated")
			}
		})
	}
}

func TestDefaultClassAssignedRetroactively(t *testing.T) {
	h := newHarness(t)
	old := newClass("old", "example.com/a", storagev1.VolumeBindingImmediate)
	old.Annotations = map[string]string{annIsDefaultStorageClass: "true"}
	old.CreationTimestamp = metav1.Unix(100, 0)
	newer := newClass("newer", "example.com/b", storagev1.VolumeBindingImmediate)
	newer.Annotations = map[string]string{annBetaIsDefaultStorageClass: "true"}
	newer.CreationTimestamp = metav1.Unix(200, 0)
	h.addClass(old)
	h.addClass(newer)
	h.addClass(newClass("plain", "example.com/c", storagev1.VolumeBindingImmediate))

	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = nil
	h.addClaim(c)
	explicitEmpty := newClaim("empty", "1Gi")
	h.addClaim(explicitEmpty)

	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if got := h.claim("claim").Spec.StorageClassName; ptr.Deref(got, "") != "newer" {
		t.Errorf("class = %v, want the newest default", got)
	}
	if err := h.syncClaim("empty"); err != nil {
		t.Fatal(err)
	}
	if got := h.claim("empty").Spec.StorageClassName; got == nil || *got != "" {
		t.Errorf("explicit \"\" class changed to %v", got)
	}
}

func TestWaitForFirstConsumer(t *testing.T) {
	h := newHarness(t)
	h.addClass(newClass("wffc", "example.com/provisioner", storagev1.VolumeBindingWaitForFirstConsumer))
	pv := newVolume("pv", "1Gi")
	pv.Spec.StorageClassName = "wffc"
	h.addVolume(pv)
	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = ptr.To("wffc")
	h.addClaim(c)

	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	h.expectEvents("Normal WaitForFirstConsumer waiting for first consumer to be created before binding")
	if h.volume("pv").Spec.ClaimRef != nil {
		t.Error("volume bound without a consumer")
	}
	if _, ok := h.claim("claim").Annotations[AnnStorageProvisioner]; ok {
		t.Error("provisioning started without a selected node")
	}

	podUsing := func(name, node string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec: v1.PodSpec{NodeName: node, Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}}},
		}
	}
	h.addPod(podUsing("b-pod", ""))
	h.addPod(podUsing("scheduled", "node-1"))
	done := podUsing("done", "")
	done.Status.Phase = v1.PodSucceeded
	h.addPod(done)
	_ = h.syncClaim("claim")
	h.expectEvents("Normal WaitForPodScheduled waiting for pod b-pod to be scheduled")
	h.addPod(podUsing("a-pod", ""))
	_ = h.syncClaim("claim")
	h.expectEvents("Normal WaitForPodScheduled waiting for pods a-pod,b-pod to be scheduled")

	// The scheduler picks a node: provisioning starts, static volumes are
	// still left to the scheduler.
	claim := h.claim("claim")
	claim.Annotations = map[string]string{AnnSelectedNode: "node-1"}
	claim, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Update(h.ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ctrl.syncClaim(h.ctx, claim); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	if got := h.claim("claim").Annotations[AnnStorageProvisioner]; got != "example.com/provisioner" {
		t.Errorf("provisioner annotation %q", got)
	}
	if h.volume("pv").Spec.ClaimRef != nil {
		t.Error("PV controller bound a WaitForFirstConsumer claim")
	}
}

func TestWaitForFirstConsumerBindsPreBoundVolume(t *testing.T) {
	h := newHarness(t)
	h.addClass(newClass("wffc", "example.com/provisioner", storagev1.VolumeBindingWaitForFirstConsumer))
	c := newClaim("claim", "1Gi")
	c.Spec.StorageClassName = ptr.To("wffc")
	c = h.addClaim(c)
	pv := newVolume("pv", "1Gi")
	pv.Spec.StorageClassName = "wffc"
	pv.Spec.ClaimRef = claimRefTo(c, true) // bound by the scheduler
	h.addVolume(pv)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	if h.claim("claim").Spec.VolumeName != "pv" {
		t.Error("scheduler's binding not completed")
	}
}

func TestClaimRequestingVolume(t *testing.T) {
	t.Run("volume missing", func(t *testing.T) {
		h := newHarness(t)
		c := newClaim("claim", "1Gi")
		c.Spec.VolumeName = "pv"
		c.Status.Phase = ""
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		if p := h.claim("claim").Status.Phase; p != v1.ClaimPending {
			t.Errorf("phase %q", p)
		}
	})
	t.Run("free and fitting", func(t *testing.T) {
		h := newHarness(t)
		h.addVolume(newVolume("pv", "1Gi"))
		c := newClaim("claim", "1Gi")
		c.Spec.VolumeName = "pv"
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		pv, claim := h.volume("pv"), h.claim("claim")
		if pv.Annotations[AnnBoundByController] != "yes" || pv.Status.Phase != v1.VolumeBound {
			t.Errorf("volume %v %s", pv.Annotations, pv.Status.Phase)
		}
		if _, ok := claim.Annotations[AnnBoundByController]; ok || claim.Annotations[AnnBindCompleted] != "yes" || claim.Status.Phase != v1.ClaimBound {
			t.Errorf("claim %v %s", claim.Annotations, claim.Status.Phase)
		}
	})
	for _, tc := range []struct {
		name  string
		pv    func() *v1.PersistentVolume
		claim func(*v1.PersistentVolumeClaim)
		want  string
	}{
		{"too small", func() *v1.PersistentVolume { return newVolume("pv", "500Mi") }, nil, "requested PV is too small"},
		{"class", func() *v1.PersistentVolume {
			pv := newVolume("pv", "1Gi")
			pv.Spec.StorageClassName = "x"
			return pv
		}, nil, "storageClassName does not match"},
		{"vac", func() *v1.PersistentVolume {
			pv := newVolume("pv", "1Gi")
			pv.Spec.VolumeAttributesClassName = ptr.To("gold")
			return pv
		}, nil, "volumeAttributesClassName does not match"},
		{"volume mode", func() *v1.PersistentVolume {
			pv := newVolume("pv", "1Gi")
			pv.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
			return pv
		}, nil, "incompatible volumeMode"},
		{"access mode", func() *v1.PersistentVolume { return newVolume("pv", "1Gi") }, func(c *v1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
		}, "incompatible accessMode"},
		{"deleting", func() *v1.PersistentVolume {
			pv := newVolume("pv", "1Gi")
			pv.DeletionTimestamp = &metav1.Time{}
			pv.Finalizers = []string{"x"}
			return pv
		}, nil, `the volume is marked for deletion "pv"`},
	} {
		t.Run("mismatch "+tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.addVolume(tc.pv())
			c := newClaim("claim", "1Gi")
			c.Spec.VolumeName = "pv"
			if tc.claim != nil {
				tc.claim(c)
			}
			h.addClaim(c)
			if err := h.syncClaim("claim"); err != nil {
				t.Fatal(err)
			}
			h.expectEvents(`Warning VolumeMismatch Cannot bind to requested volume "pv": ` + tc.want)
			if h.volume("pv").Spec.ClaimRef != nil {
				t.Error("bound anyway")
			}
		})
	}
	t.Run("pre-bound both ways", func(t *testing.T) {
		h := newHarness(t)
		c := newClaim("claim", "1Gi")
		c.Spec.VolumeName = "pv"
		c = h.addClaim(c)
		pv := newVolume("pv", "1Gi")
		pv.Spec.ClaimRef = claimRefTo(c, false)
		h.addVolume(pv)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		got := h.volume("pv")
		if got.Spec.ClaimRef.UID != c.UID {
			t.Errorf("claimRef UID %q", got.Spec.ClaimRef.UID)
		}
		if _, ok := got.Annotations[AnnBoundByController]; ok {
			t.Error("user's pre-binding marked bound-by-controller")
		}
		if _, ok := h.claim("claim").Annotations[AnnBoundByController]; ok {
			t.Error("user's claim marked bound-by-controller")
		}
	})
	t.Run("taken by another claim", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "other")
		h.addVolume(pv)
		c := newClaim("claim", "1Gi")
		c.Spec.VolumeName = "pv"
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		h.expectEvents(`Warning FailedBinding volume "pv" already bound to a different claim.`)
	})
	t.Run("taken, claim bound by controller", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "other")
		h.addVolume(pv)
		c := newClaim("claim", "1Gi")
		c.Spec.VolumeName = "pv"
		c.Annotations = map[string]string{AnnBoundByController: "yes"}
		h.addClaim(c)
		if err := h.syncClaim("claim"); err == nil {
			t.Error("no error")
		}
		h.expectEvents(`Warning FailedBinding volume "pv" already bound to a different claim.`)
	})
}

func TestPreBoundVolumeWaitsForItsClaim(t *testing.T) {
	h := newHarness(t)
	wanted := newClaim("wanted", "1Gi")
	pv := newVolume("pv", "1Gi")
	pv.Spec.ClaimRef = claimRefTo(wanted, false)
	h.addVolume(pv)
	h.addClaim(newClaim("other", "1Gi"))
	if err := h.syncClaim("other"); err != nil {
		t.Fatal(err)
	}
	if h.claim("other").Spec.VolumeName != "" {
		t.Fatal("another claim took a reserved volume")
	}
	h.addClaim(wanted)
	if err := h.syncClaim("wanted"); err != nil {
		t.Fatal(err)
	}
	if h.claim("wanted").Spec.VolumeName != "pv" {
		t.Error("reserved volume not bound to its claim")
	}
	if _, ok := h.volume("pv").Annotations[AnnBoundByController]; ok {
		t.Error("user's reservation marked bound-by-controller")
	}
}

func TestBoundClaim(t *testing.T) {
	t.Run("lost reference", func(t *testing.T) {
		h := newHarness(t)
		_, c := boundPair("pv", "claim")
		c.Spec.VolumeName = ""
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		h.expectEvents("Warning ClaimLost Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
		got := h.claim("claim")
		if got.Status.Phase != v1.ClaimLost || got.Status.Capacity != nil || got.Status.AccessModes != nil {
			t.Errorf("status %+v", got.Status)
		}
		// Emitted once, not on every sync.
		_ = h.syncClaim("claim")
		h.expectEvents()
	})
	t.Run("volume gone", func(t *testing.T) {
		h := newHarness(t)
		_, c := boundPair("pv", "claim")
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		h.expectEvents("Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!")
		if p := h.claim("claim").Status.Phase; p != v1.ClaimLost {
			t.Errorf("phase %s", p)
		}
	})
	t.Run("misbound", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "other")
		h.addVolume(pv)
		_, c := boundPair("pv", "claim")
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		h.expectEvents("Warning ClaimMisbound Two claims are bound to the same volume, this one is bound incorrectly")
		if p := h.claim("claim").Status.Phase; p != v1.ClaimLost {
			t.Errorf("phase %s", p)
		}
	})
	t.Run("volume came unbound", func(t *testing.T) {
		h := newHarness(t)
		pv, c := boundPair("pv", "claim")
		pv.Spec.ClaimRef = nil
		pv.Status.Phase = v1.VolumeAvailable
		h.addVolume(pv)
		h.addClaim(c)
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		got := h.volume("pv")
		if got.Spec.ClaimRef == nil || got.Spec.ClaimRef.UID != c.UID || got.Status.Phase != v1.VolumeBound {
			t.Errorf("volume not re-bound: %+v", got.Spec.ClaimRef)
		}
	})
	t.Run("all well: no writes", func(t *testing.T) {
		h := newHarness(t)
		pv, c := boundPair("pv", "claim")
		h.addVolume(pv)
		h.addClaim(c)
		before := h.countWrites("persistentvolumes") + h.countWrites("persistentvolumeclaims")
		if err := h.syncClaim("claim"); err != nil {
			t.Fatal(err)
		}
		if after := h.countWrites("persistentvolumes") + h.countWrites("persistentvolumeclaims"); after != before {
			t.Errorf("%d writes for a correctly bound claim", after-before)
		}
	})
}
