// Package selinuxwarning tests the selinux-warning-controller against a
// kube-apiserver: pods sharing a CSI volume whose driver mounts with
// -o context get conflict events and the conflict metric, which clears
// when one of the pods goes.
package selinuxwarning

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/selinuxwarning"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

const metricName = "selinux_warning_controller_selinux_volume_conflict"

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, framework.Options{APIServerFlags: []string{
		"--feature-gates=SELinuxChangePolicy=true,SELinuxMount=true",
	}})
}

func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	sc, err := selinuxwarning.NewController(ctx, c,
		factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims(),
		factory.Core().V1().PersistentVolumes(), factory.Storage().V1().CSIDrivers())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	framework.RunController(t, ctx, cancel, factory, func(ctx context.Context) { sc.Run(ctx, 1) })
}

// createBoundClaim makes a claim in ns bound to a CSI PV of driver.
func createBoundClaim(t *testing.T, c clientset.Interface, ns, driver string) string {
	t.Helper()
	ctx := context.Background()
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:       ns + "-pv",
			StorageClassName: ptr.To(""),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteMany},
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: ns}},
			ClaimRef:               &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: pvc.Name, UID: pvc.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc.Status.Phase = v1.ClaimBound
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pvc.Name
}

func createPod(t *testing.T, c clientset.Interface, ns, name, claim, level string) {
	t.Helper()
	_, err := c.CoreV1().Pods(ns).Create(context.Background(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			SecurityContext: &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: level}},
			Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				VolumeMounts: []v1.VolumeMount{{Name: "vol", MountPath: "/mnt"}},
			}},
			Volumes: []v1.Volume{{Name: "vol", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// conflictEvent returns the pod's SELinuxLabelConflict event, if any.
func conflictEvent(ctx context.Context, c clientset.Interface, ns, pod string) (*v1.Event, error) {
	events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return nil, err
	}
	for i := range events.Items {
		if events.Items[i].Reason == "SELinuxLabelConflict" {
			return &events.Items[i], nil
		}
	}
	return nil, nil
}

// conflictSeries counts the metric's series naming ns as the first pod's
// namespace.
func conflictSeries(t *testing.T, ns string) int {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != metricName {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod1_namespace" && l.GetValue() == ns {
					n++
				}
			}
		}
	}
	return n
}

func TestLabelConflictReported(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "selinux-conflict")
	driver := ns + ".csi.example.com"
	if _, err := c.StorageV1().CSIDrivers().Create(context.Background(), &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec:       storagev1.CSIDriverSpec{SELinuxMount: ptr.To(true)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StorageV1().CSIDrivers().Delete(context.Background(), driver, metav1.DeleteOptions{}) })
	claim := createBoundClaim(t, c, ns, driver)
	runController(t, c)
	createPod(t, c, ns, "pod1", claim, "s0:c1,c2")
	createPod(t, c, ns, "pod2", claim, "s0:c98,c99")

	want := map[string]string{
		"pod1": `SELinuxLabel ":::s0:c1,c2" conflicts with pod pod2 that uses the same volume as this pod with SELinuxLabel ":::s0:c98,c99". If both pods land on the same node, only one of them may access the volume.`,
		"pod2": `SELinuxLabel ":::s0:c98,c99" conflicts with pod pod1 that uses the same volume as this pod with SELinuxLabel ":::s0:c1,c2". If both pods land on the same node, only one of them may access the volume.`,
	}
	for pod, msg := range want {
		var ev *v1.Event
		framework.Eventually(t, 30*time.Second, "conflict event on "+pod, func(ctx context.Context) (bool, error) {
			var err error
			ev, err = conflictEvent(ctx, c, ns, pod)
			return ev != nil, err
		})
		if ev.Type != v1.EventTypeNormal || ev.Message != msg || ev.Source.Component != "selinux_warning" {
			t.Errorf("%s: event %s %q from %q, want Normal %q from selinux_warning", pod, ev.Type, ev.Message, ev.Source.Component, msg)
		}
	}
	framework.Eventually(t, 30*time.Second, "two conflict series", func(context.Context) (bool, error) {
		return conflictSeries(t, ns) == 2, nil
	})

	if err := c.CoreV1().Pods(ns).Delete(context.Background(), "pod2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "pod2 gone", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "pod2", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	framework.Eventually(t, 30*time.Second, "conflict series cleared", func(context.Context) (bool, error) {
		return conflictSeries(t, ns) == 0, nil
	})
}
