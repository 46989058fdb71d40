// Package vacprotection tests the VolumeAttributesClass protection
// controller against a real apiserver, whose StorageObjectInUseProtection
// admission plugin adds the kubernetes.io/vac-protection finalizer at
// creation.
package vacprotection

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/vacprotection"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runController runs the controller in-process until the test ends.
func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	vc, err := vacprotection.NewController(klog.Background(), c,
		factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes(), factory.Storage().V1().VolumeAttributesClasses())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		vc.Run(ctx, 1)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

func createVAC(t *testing.T, c clientset.Interface, name string) *storagev1.VolumeAttributesClass {
	t.Helper()
	vac, err := c.StorageV1().VolumeAttributesClasses().Create(context.Background(), &storagev1.VolumeAttributesClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		DriverName: "csi.example.com",
		Parameters: map[string]string{"iops": "1000"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the class go even if the test failed half-way.
		ctx := context.Background()
		if v, err := c.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{}); err == nil && len(v.Finalizers) > 0 {
			v.Finalizers = nil
			_, _ = c.StorageV1().VolumeAttributesClasses().Update(ctx, v, metav1.UpdateOptions{})
		}
		_ = c.StorageV1().VolumeAttributesClasses().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return vac
}

func finalizers(t *testing.T, c clientset.Interface, name string) []string {
	t.Helper()
	v, err := c.StorageV1().VolumeAttributesClasses().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v.Finalizers
}

func waitForGone(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "class "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// deleteVACAndWaitTerminating deletes the class and waits for the
// apiserver to show it terminating.
func deleteVACAndWaitTerminating(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	if err := c.StorageV1().VolumeAttributesClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "class "+name+" to be terminating", func(ctx context.Context) (bool, error) {
		v, err := c.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return v.DeletionTimestamp != nil, nil
	})
}

// barrier deletes an unused class and waits for it to go. The controller
// runs one worker and the class events arrive in order, so once the
// barrier is gone every class deleted before it has been synced.
func barrier(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	createVAC(t, c, name)
	if err := c.StorageV1().VolumeAttributesClasses().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForGone(t, c, name)
}

// deletePVC takes the PVC protection finalizer off so the claim
// goes without the PVC protection controller.
func deletePVC(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Finalizers = nil
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An unused class being deleted goes; the controller puts the finalizer
// back on a live class that lost it.
func TestUnusedClass(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)
	vac := createVAC(t, c, "vac-unused")
	vac.Finalizers = nil
	if _, err := c.StorageV1().VolumeAttributesClasses().Update(context.Background(), vac, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the finalizer to be put back", func(context.Context) (bool, error) {
		return slices.Contains(finalizers(t, c, "vac-unused"), vacprotection.Finalizer), nil
	})
	if err := c.StorageV1().VolumeAttributesClasses().Delete(context.Background(), "vac-unused", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForGone(t, c, "vac-unused")
}

// A class a PVC references keeps its finalizer until the PVC goes.
func TestClassUsedByPVC(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "vac-pvc")
	runController(t, c)
	createVAC(t, c, "vac-pvc")
	_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:               []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:                 v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName:          ptr.To("standard"),
			VolumeAttributesClassName: ptr.To("vac-pvc"),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	deleteVACAndWaitTerminating(t, c, "vac-pvc")
	barrier(t, c, "vac-pvc-barrier")
	if !slices.Contains(finalizers(t, c, "vac-pvc"), vacprotection.Finalizer) {
		t.Fatal("finalizer removed while a PVC references the class")
	}

	deletePVC(t, c, ns, "claim")
	waitForGone(t, c, "vac-pvc")
}

// A class a PV references keeps its finalizer until the PV stops
// referencing it.
func TestClassUsedByPV(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)
	createVAC(t, c, "vac-pv")
	ctx := context.Background()
	_, err := c.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "vac-pv"},
		Spec: v1.PersistentVolumeSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: "vol-1"},
			},
			VolumeAttributesClassName: ptr.To("vac-pv"),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pv, err := c.CoreV1().PersistentVolumes().Get(context.Background(), "vac-pv", metav1.GetOptions{})
		if err == nil {
			pv.Finalizers = nil
			_, _ = c.CoreV1().PersistentVolumes().Update(context.Background(), pv, metav1.UpdateOptions{})
		}
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), "vac-pv", metav1.DeleteOptions{})
	})

	deleteVACAndWaitTerminating(t, c, "vac-pv")
	barrier(t, c, "vac-pv-barrier")
	if !slices.Contains(finalizers(t, c, "vac-pv"), vacprotection.Finalizer) {
		t.Fatal("finalizer removed while a PV references the class")
	}

	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, "vac-pv", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Finalizers = nil
	if _, err := c.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().PersistentVolumes().Delete(ctx, "vac-pv", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForGone(t, c, "vac-pv")
}
