// Package expand tests the persistentvolume-expander-controller against a
// real apiserver.
package expand

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/expand"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runController runs the expander in-process until the test ends.
func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	expc, err := expand.NewController(ctx, c, factory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go expc.Run(ctx)
}

// boundClaim creates a StorageClass allowing expansion and a 1Gi PV with
// source src bound to a 1Gi PVC, as the PV controller would have bound them.
func boundClaim(t *testing.T, c clientset.Interface, ns string, src v1.PersistentVolumeSource) *v1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	sc, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{GenerateName: "expandable-"},
		Provisioner:          "example.com/provisioner",
		AllowVolumeExpansion: ptr.To(true),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})

	size := resource.MustParse("1Gi")
	pvName := ns + "-pv"
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
			StorageClassName: &sc.Name,
			VolumeName:       pvName,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: src,
			StorageClassName:       sc.Name,
			ClaimRef:               &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: pvc.Name, UID: pvc.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pv.Status.Phase = v1.VolumeBound
	if _, err := c.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc.Status = v1.PersistentVolumeClaimStatus{
		Phase:       v1.ClaimBound,
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Capacity:    v1.ResourceList{v1.ResourceStorage: size},
	}
	pvc, err = c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pvc
}

// grow raises the claim's request to 2Gi (the apiserver's resize admission
// accepts it because the StorageClass allows expansion).
func grow(t *testing.T, c clientset.Interface, pvc *v1.PersistentVolumeClaim) {
	t.Helper()
	pvc = pvc.DeepCopy()
	pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("2Gi")
	if _, err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(context.Background(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("growing the claim: %v", err)
	}
}

// waitForEvent waits for an event about the claim from volume_expand.
func waitForEvent(t *testing.T, c clientset.Interface, pvc *v1.PersistentVolumeClaim, typ, reason, message string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, reason+" event", func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(pvc.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == pvc.UID && e.Source.Component == "volume_expand" &&
				e.Type == typ && e.Reason == reason && e.Message == message {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestCSIClaimWaitsForExternalResizer: a grown CSI claim gets the
// ExternalExpanding event and is otherwise left to the CSI
// external-resizer (which needs no annotation for CSI volumes).
func TestCSIClaimWaitsForExternalResizer(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "expand-csi")
	runController(t, c)
	pvc := boundClaim(t, c, ns, v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "vol-1"}})
	grow(t, c, pvc)
	waitForEvent(t, c, pvc, v1.EventTypeNormal, "ExternalExpanding", "waiting for an external controller to expand this PVC")

	got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), pvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[expand.VolumeResizerKey]; ok {
		t.Errorf("CSI claim annotated %v; upstream leaves CSI claims alone", got.Annotations)
	}
}

// TestMigratedClaimGetsResizerAnnotation: a grown claim on a GCE PD (an
// in-tree plugin migrated to CSI) is handed to pd.csi.storage.gke.io.
func TestMigratedClaimGetsResizerAnnotation(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "expand-migrated")
	runController(t, c)
	pvc := boundClaim(t, c, ns, v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "disk-1", FSType: "ext4"}})
	grow(t, c, pvc)
	waitForEvent(t, c, pvc, v1.EventTypeNormal, "ExternalExpanding", "CSI migration enabled for kubernetes.io/gce-pd; waiting for external resizer to expand the pvc")
	framework.Eventually(t, 30*time.Second, "resizer annotation", func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Annotations[expand.VolumeResizerKey] == "pd.csi.storage.gke.io", nil
	})
}

// TestFlexClaimExpandedForKubelet: for a FlexVolume the controller does the
// control-plane half itself: PV capacity raised, claim left pending node
// (file system) expansion, old size kept on the PV.
func TestFlexClaimExpandedForKubelet(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "expand-flex")
	runController(t, c)
	pvc := boundClaim(t, c, ns, v1.PersistentVolumeSource{FlexVolume: &v1.FlexPersistentVolumeSource{Driver: "example.com/flex"}})
	grow(t, c, pvc)
	framework.Eventually(t, 30*time.Second, "claim pending node expansion", func(ctx context.Context) (bool, error) {
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.AllocatedResourceStatuses[v1.ResourceStorage] == v1.PersistentVolumeClaimNodeResizePending &&
			got.Annotations[expand.VolumeResizerKey] == "example.com/flex", nil
	})
	framework.Eventually(t, 30*time.Second, "PV expanded", func(ctx context.Context) (bool, error) {
		pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		size := pv.Spec.Capacity[v1.ResourceStorage]
		return size.Cmp(resource.MustParse("2Gi")) == 0 && pv.Annotations[expand.AnnPreResizeCapacity] == "1Gi", nil
	})
}
