package persistentvolume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func (h *harness) hostPathPlugin() *hostPathPlugin {
	return h.ctrl.plugins.plugins[hostPathPluginName].(*hostPathPlugin)
}

func hostPathClaim(h *harness, mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := newClaim("claim", "3Gi")
	c.Spec.StorageClassName = ptr.To("hostpath")
	if mutate != nil {
		mutate(c)
	}
	return h.addClaim(c)
}

func TestHostPathProvisioning(t *testing.T) {
	h := newHarness(t, withHostPathProvisioning())
	base := t.TempDir()
	h.hostPathPlugin().baseDir = base
	h.addClass(newClass("hostpath", hostPathPluginName, storagev1.VolumeBindingImmediate))
	claim := hostPathClaim(h, nil)

	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	pvName := "pvc-" + string(claim.UID)
	h.expectEvents("Normal ProvisioningSucceeded Successfully provisioned volume " + pvName + " using kubernetes.io/host-path")
	pv := h.volume(pvName)
	if pv.Annotations[AnnBoundByController] != "yes" || pv.Annotations[AnnDynamicallyProvisioned] != hostPathPluginName ||
		pv.Annotations[annCreatedBy] != "hostpath-dynamic-provisioner" {
		t.Errorf("annotations %v", pv.Annotations)
	}
	if !slices.Equal(pv.Finalizers, []string{PVDeletionInTreeProtectionFinalizer}) {
		t.Errorf("finalizers %v", pv.Finalizers)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID || pv.Spec.StorageClassName != "hostpath" ||
		pv.Spec.PersistentVolumeReclaimPolicy != v1.PersistentVolumeReclaimDelete {
		t.Errorf("spec %+v", pv.Spec)
	}
	if c := pv.Spec.Capacity[v1.ResourceStorage]; c.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("capacity %s", c.String())
	}
	if !strings.HasPrefix(pv.Spec.HostPath.Path, base+"/hostpath_pv/") {
		t.Errorf("path %s", pv.Spec.HostPath.Path)
	}
	if st, err := os.Stat(pv.Spec.HostPath.Path); err != nil || !st.IsDir() {
		t.Errorf("directory not created: %v", err)
	}
	if got := h.claim("claim").Annotations[AnnStorageProvisioner]; got != hostPathPluginName {
		t.Errorf("claim provisioner annotation %q", got)
	}

	// Running again finds the PV and provisions nothing.
	h.ctrl.runningOperations = newOperationMap()
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	entries, _ := os.ReadDir(filepath.Join(base, "hostpath_pv"))
	if len(entries) != 1 {
		t.Errorf("%d directories provisioned", len(entries))
	}
}

func TestHostPathProvisioningFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled bool
		class   func(*storagev1.StorageClass)
		claim   func(*v1.PersistentVolumeClaim)
		want    string
	}{
		{name: "disabled", want: `Warning ProvisioningFailed Failed to create provisioner: provisioning in volume plugin "kubernetes.io/host-path" is disabled`},
		{name: "mount options", enabled: true, class: func(c *storagev1.StorageClass) { c.MountOptions = []string{"ro"} },
			want: `Warning ProvisioningFailed Mount options are not supported by the provisioner but StorageClass "hostpath" has mount options [ro]`},
		{name: "data source", enabled: true, claim: func(c *v1.PersistentVolumeClaim) {
			c.Spec.DataSource = &v1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		}, want: `Warning ProvisioningFailed plugin "kubernetes.io/host-path" is not a CSI plugin. Only CSI plugin can provision a claim with a datasource`},
		{name: "block", enabled: true, claim: func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock) },
			want: `Warning ProvisioningFailed Failed to provision volume with StorageClass "hostpath": kubernetes.io/host-path does not support block volume provisioning`},
		{name: "missing node", enabled: true, claim: func(c *v1.PersistentVolumeClaim) { c.Annotations = map[string]string{AnnSelectedNode: "gone"} },
			want: `Warning ProvisioningFailed Failed to get target node: node "gone" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			if tc.enabled {
				h = newHarness(t, withHostPathProvisioning())
			} else {
				h = newHarness(t)
			}
			h.hostPathPlugin().baseDir = t.TempDir()
			class := newClass("hostpath", hostPathPluginName, storagev1.VolumeBindingImmediate)
			if tc.class != nil {
				tc.class(class)
			}
			h.addClass(class)
			hostPathClaim(h, tc.claim)
			if err := h.syncClaim("claim"); err != nil {
				t.Fatal(err)
			}
			h.waitOperations()
			h.expectEvents(tc.want)
			if !h.ctrl.operationTimestamps.Has("ns/claim") {
				t.Error("failed provisioning not timed")
			}
		})
	}
}

func TestFailedProvisioningReschedules(t *testing.T) {
	h := newHarness(t, withHostPathProvisioning())
	h.addClass(newClass("hostpath", hostPathPluginName, storagev1.VolumeBindingWaitForFirstConsumer))
	h.addNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	hostPathClaim(h, func(c *v1.PersistentVolumeClaim) {
		c.Spec.VolumeMode = ptr.To(v1.PersistentVolumeBlock)
		c.Annotations = map[string]string{AnnSelectedNode: "node-1"}
	})
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	if _, ok := h.claim("claim").Annotations[AnnSelectedNode]; ok {
		t.Error("selected-node kept after a failed provisioning")
	}
}

func TestHostPathDelete(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "pv-delete-")
	if err != nil {
		t.Skip("no /tmp:", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	h := newHarness(t)
	pv, _ := boundPair("pv", "claim")
	pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}
	pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
	pv.Annotations[AnnDynamicallyProvisioned] = hostPathPluginName
	pv.Finalizers = []string{PVDeletionInTreeProtectionFinalizer}
	h.addVolume(pv)
	if err := h.syncVolume("pv"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
	if !h.volumeGone("pv") {
		t.Errorf("PV not deleted: %+v", h.volume("pv"))
	}
	h.expectEvents()
}

func TestRecycle(t *testing.T) {
	t.Run("no plugin", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
		h.addVolume(pv)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		h.waitOperations()
		h.expectEvents("Warning VolumeFailedRecycle No recycler plugin found for the volume!")
		if p := h.volume("pv").Status.Phase; p != v1.VolumeFailed {
			t.Errorf("phase %s", p)
		}
	})
	t.Run("still used by a pod", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/p"}}
		h.addVolume(pv)
		h.addPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user", Namespace: testNamespace}, Spec: v1.PodSpec{Volumes: []v1.Volume{{
			Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}}}})
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		h.waitOperations()
		h.expectEvents("Normal VolumeFailedRecycle Volume is used by pods: ns/user")
		if p := h.volume("pv").Status.Phase; p != v1.VolumeReleased {
			t.Errorf("phase %s", p)
		}
	})
	for _, tc := range []struct {
		name   string
		size   string
		source v1.PersistentVolumeSource
		check  func(t *testing.T, pod *v1.Pod)
	}{
		{"hostPath", "10Gi", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/data"}}, func(t *testing.T, pod *v1.Pod) {
			if pod.Spec.Volumes[0].HostPath == nil || pod.Spec.Volumes[0].HostPath.Path != "/tmp/data" {
				t.Errorf("volume %+v", pod.Spec.Volumes[0])
			}
			// 10Gi at 30s/Gi beats the 60s minimum.
			if ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0) != 300 {
				t.Errorf("deadline %v", ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0))
			}
		}},
		{"NFS", "5Gi", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "srv", Path: "/export"}}, func(t *testing.T, pod *v1.Pod) {
			if nfs := pod.Spec.Volumes[0].NFS; nfs == nil || nfs.Server != "srv" || nfs.Path != "/export" {
				t.Errorf("volume %+v", pod.Spec.Volumes[0])
			}
			// The 300s NFS minimum beats 5Gi at 30s/Gi.
			if ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0) != 300 {
				t.Errorf("deadline %v", ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			pv, _ := boundPair("pv", "claim")
			pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse(tc.size)
			pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
			pv.Spec.PersistentVolumeSource = tc.source
			h.addVolume(pv)
			if err := h.syncVolume("pv"); err != nil {
				t.Fatal(err)
			}
			pod := h.waitForPod("default", "recycler-for-pv")
			tc.check(t, pod)
			if pod.Spec.Containers[0].Image != "registry.k8s.io/build-image/debian-base:bookworm-v1.0.6" || pod.Spec.RestartPolicy != v1.RestartPolicyNever {
				t.Errorf("pod spec %+v", pod.Spec)
			}
			// An event about the pod is passed on to the PV.
			if _, err := h.client.CoreV1().Events("default").Create(h.ctx, &v1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: "default"},
				InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod.Name},
				Type:           v1.EventTypeNormal, Message: "Pulling image",
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.expectEventSoon("Normal RecyclerPod Recycler pod: Pulling image")
			pod.Status.Phase = v1.PodSucceeded
			if _, err := h.client.CoreV1().Pods("default").UpdateStatus(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitOperations()
			h.expectEvents("Normal VolumeRecycled Volume recycled")
			got := h.volume("pv")
			if got.Spec.ClaimRef != nil || got.Status.Phase != v1.VolumeAvailable {
				t.Errorf("recycled volume: claimRef %v phase %s", got.Spec.ClaimRef, got.Status.Phase)
			}
			if _, err := h.client.CoreV1().Pods("default").Get(h.ctx, pod.Name, metav1.GetOptions{}); err == nil {
				t.Error("recycler pod not deleted")
			}
		})
	}
	t.Run("recycler pod fails", func(t *testing.T) {
		h := newHarness(t)
		pv, _ := boundPair("pv", "claim")
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "srv", Path: "/export"}}
		h.addVolume(pv)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		pod := h.waitForPod("default", "recycler-for-pv")
		pod.Status.Phase = v1.PodFailed
		pod.Status.Message = "scrub failed"
		if _, err := h.client.CoreV1().Pods("default").UpdateStatus(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.waitOperations()
		h.expectEvents("Warning VolumeFailedRecycle Recycle failed: failed to recycle volume: scrub failed")
		if p := h.volume("pv").Status.Phase; p != v1.VolumeFailed {
			t.Errorf("phase %s", p)
		}
	})
	t.Run("old recycler pod", func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.client.CoreV1().Pods("default").Create(h.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "recycler-for-pv", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pv, _ := boundPair("pv", "claim")
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "srv", Path: "/export"}}
		h.addVolume(pv)
		if err := h.syncVolume("pv"); err != nil {
			t.Fatal(err)
		}
		h.waitOperations()
		h.expectEvents("Warning VolumeFailedRecycle Recycle failed: old recycler pod found, will retry later")
	})
}

func TestRecyclerPodTemplateFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "pod.yaml")
	if err := os.WriteFile(good, []byte(`apiVersion: v1
kind: Pod
metadata:
  name: custom
  namespace: kube-system
spec:
  containers:
  - name: scrub
    image: busybox
  volumes:
  - name: vol
`), 0o600); err != nil {
		t.Fatal(err)
	}
	pod, err := loadRecyclerPodTemplate(good)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Namespace != "kube-system" || pod.Spec.Containers[0].Image != "busybox" {
		t.Errorf("pod %+v", pod)
	}
	noVolumes := filepath.Join(dir, "novol.yaml")
	if err := os.WriteFile(noVolumes, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRecyclerPodTemplate(noVolumes); err == nil || !strings.Contains(err.Error(), "does not contain any volume(s)") {
		t.Errorf("err = %v", err)
	}
	if _, err := loadRecyclerPodTemplate(filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "failed to read file path") {
		t.Errorf("err = %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadRecyclerPodTemplate(empty); err == nil || !strings.HasPrefix(err.Error(), "file was empty") {
		t.Errorf("err = %v", err)
	}
	// NewController refuses a bad template, as the controller manager
	// refuses to start the controller.
	h := newHarness(t)
	p := ControllerParameters{
		KubeClient:     h.client,
		VolumeInformer: h.factory.Core().V1().PersistentVolumes(),
		ClaimInformer:  h.factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:  h.factory.Storage().V1().StorageClasses(),
		PodInformer:    h.factory.Core().V1().Pods(),
		NodeInformer:   h.factory.Core().V1().Nodes(),
		Recycler:       RecyclerConfig{PodTemplateFilePathNFS: noVolumes},
	}
	if _, err := NewController(context.Background(), p); err == nil {
		t.Error("NewController accepted a template without volumes")
	}
}

func (h *harness) waitForPod(namespace, name string) *v1.Pod {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pod, err := h.client.CoreV1().Pods(namespace).Get(h.ctx, name, metav1.GetOptions{})
		if err == nil {
			return pod
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("pod %s/%s not created", namespace, name)
	return nil
}

// expectEventSoon waits for one event (asynchronous operations).
func (h *harness) expectEventSoon(want string) {
	h.t.Helper()
	select {
	case got := <-h.recorder.Events:
		if got != want {
			h.t.Errorf("event %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		h.t.Errorf("no event %q", want)
	}
}

// TestProvisionedVolumeCleanedUpWhenPVCannotBeSaved: the directory exists
// but its PV cannot be created; it is deleted again.
func TestProvisionedVolumeCleanedUpWhenPVCannotBeSaved(t *testing.T) {
	base, err := os.MkdirTemp("/tmp", "pv-provision-")
	if err != nil {
		t.Skip("no /tmp:", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	h := newHarness(t, withHostPathProvisioning())
	h.hostPathPlugin().baseDir = base
	h.client.PrependReactor("create", "persistentvolumes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is down")
	})
	h.addClass(newClass("hostpath", hostPathPluginName, storagev1.VolumeBindingImmediate))
	hostPathClaim(h, nil)
	if err := h.syncClaim("claim"); err != nil {
		t.Fatal(err)
	}
	h.waitOperations()
	// The directory is deleted, but, as upstream, the clean-up is still
	// reported failed: dropping the in-tree finalizer afterwards needs the
	// PV object, which was never created.
	h.expectEvents("Warning ProvisioningFailed Error creating provisioned PV object for claim ns/claim: etcd is down. Deleting the volume.",
		`Warning ProvisioningCleanupFailed Error cleaning provisioned volume for claim ns/claim: persistentvolumes "pvc-uid-claim" not found. Please delete manually.`)
	entries, err := os.ReadDir(filepath.Join(base, "hostpath_pv"))
	if err != nil || len(entries) != 0 {
		t.Errorf("provisioned directory left behind: %v %v", entries, err)
	}
}
