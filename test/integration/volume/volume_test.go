// Package volume tests the PVC protection, PV protection and ephemeral
// volume controllers against a real apiserver, whose
// StorageObjectInUseProtection admission plugin adds the protection
// finalizers at creation.
package volume

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvcprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvprotection"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	waitTimeout = 60 * time.Second
	nodeName    = "node-1"
)

// runControllers runs the three controllers in-process until the test
// ends, with the worker counts the controller manager uses: one for each
// protection controller and five ephemeral volume syncs.
//
// With one worker a protection controller handles keys in arrival order,
// so the "still kept" checks below delete a marker object after the one
// under test and look once the marker is gone. A key requeued while in
// process can still come after the marker; the check is then weaker, but
// it never fails a correct controller.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	factory := informers.NewSharedInformerFactory(c, 0)
	pvcc, err := pvcprotection.NewController(klog.FromContext(ctx), factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().Pods(), c, pvcprotection.Features{UnusedSinceTime: true})
	if err != nil {
		t.Fatal(err)
	}
	pvpc := pvprotection.NewController(klog.FromContext(ctx), factory.Core().V1().PersistentVolumes(), c)
	ec, err := ephemeral.NewController(ctx, c, factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go pvcc.Run(ctx, 1)
	go pvpc.Run(ctx, 1)
	go ec.Run(ctx, 5)
}

func startTest(t *testing.T, prefix string) (clientset.Interface, string, context.Context) {
	t.Helper()
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, prefix)
	runControllers(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c, ns, ctx
}

func claimSpec() v1.PersistentVolumeClaimSpec {
	return v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
	}
}

func createPVC(t *testing.T, ctx context.Context, c clientset.Interface, ns, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       claimSpec(),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pvc.Finalizers, pvcprotection.Finalizer) {
		t.Fatalf("admission did not add %s: %v", pvcprotection.Finalizer, pvc.Finalizers)
	}
	return pvc
}

// scheduledPod is a pod already placed on a node, with the given volumes.
func scheduledPod(name string, volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:   nodeName,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
			Volumes:    volumes,
		},
	}
}

func claimVolume(claim string) v1.Volume {
	return v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func createRunningPod(t *testing.T, ctx context.Context, c clientset.Interface, ns string, pod *v1.Pod) *v1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err = framework.Kubelet{Client: c}.MarkRunningReady(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func deleteNow(t *testing.T, ctx context.Context, c clientset.Interface, ns, pod string) {
	t.Helper()
	if err := c.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

func waitPVCGone(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, "PVC "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func TestUnusedPVCIsDeletedAtOnce(t *testing.T) {
	c, ns, ctx := startTest(t, "pvc-unused")
	createPVC(t, ctx, c, ns, "idle")
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "idle", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVCGone(t, c, ns, "idle")
}

func TestPVCInUseStaysUntilPodIsDeleted(t *testing.T) {
	c, ns, ctx := startTest(t, "pvc-in-use")
	createPVC(t, ctx, c, ns, "data")
	createPVC(t, ctx, c, ns, "marker")
	createRunningPod(t, ctx, c, ns, scheduledPod("app", claimVolume("data")))

	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The single worker handles "marker" after "data": once marker is gone
	// the controller has decided on data, which must still be there.
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "marker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVCGone(t, c, ns, "marker")
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("PVC used by a running pod: %v", err)
	}
	if pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, pvcprotection.Finalizer) {
		t.Fatalf("PVC used by a running pod is not Terminating with the finalizer: %v %v", pvc.DeletionTimestamp, pvc.Finalizers)
	}

	deleteNow(t, ctx, c, ns, "app")
	waitPVCGone(t, c, ns, "data")
}

// A PVC that lost its finalizer (created before the admission plugin, or
// edited) gets it back.
func TestPVCFinalizerIsRestored(t *testing.T) {
	c, ns, ctx := startTest(t, "pvc-restore")
	pvc := createPVC(t, ctx, c, ns, "data")
	pvc.Finalizers = nil
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "finalizer to be added back", func(ctx context.Context) (bool, error) {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && slices.Contains(pvc.Finalizers, pvcprotection.Finalizer), err
	})
}

// A bound PVC reports through its Unused condition whether a pod uses it
// (PersistentVolumeClaimUnusedSinceTime, beta and on in v1.37).
func TestUnusedCondition(t *testing.T) {
	c, ns, ctx := startTest(t, "pvc-unused-cond")
	pvc := createPVC(t, ctx, c, ns, "data")
	pvc.Status.Phase = v1.ClaimBound
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUnused := func(want v1.ConditionStatus, reason string) {
		t.Helper()
		framework.Eventually(t, waitTimeout, "Unused="+string(want), func(ctx context.Context) (bool, error) {
			pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range pvc.Status.Conditions {
				if cond.Type == v1.PersistentVolumeClaimUnused {
					return cond.Status == want && cond.Reason == reason && !cond.LastTransitionTime.IsZero(), nil
				}
			}
			return false, nil
		})
	}
	waitUnused(v1.ConditionTrue, "NoPodsUsingPVC")
	createRunningPod(t, ctx, c, ns, scheduledPod("app", claimVolume("data")))
	waitUnused(v1.ConditionFalse, "PodUsingPVC")
	deleteNow(t, ctx, c, ns, "app")
	waitUnused(v1.ConditionTrue, "NoPodsUsingPVC")
}

func createPV(t *testing.T, ctx context.Context, c clientset.Interface, name string) *v1.PersistentVolume {
	t.Helper()
	pv, err := c.CoreV1().PersistentVolumes().Create(ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if !slices.Contains(pv.Finalizers, pvprotection.Finalizer) {
		t.Fatalf("admission did not add %s: %v", pvprotection.Finalizer, pv.Finalizers)
	}
	return pv
}

func setPVPhase(t *testing.T, ctx context.Context, c clientset.Interface, name string, phase v1.PersistentVolumePhase) {
	t.Helper()
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv.Status.Phase = phase
	if _, err := c.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPVGone(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	framework.Eventually(t, waitTimeout, "PV "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func TestBoundPVStaysUntilUnbound(t *testing.T) {
	c, ns, ctx := startTest(t, "pv-bound")
	bound := "pv-bound-" + ns
	marker := "pv-marker-" + ns
	createPV(t, ctx, c, bound)
	createPV(t, ctx, c, marker)
	setPVPhase(t, ctx, c, bound, v1.VolumeBound)

	if err := c.CoreV1().PersistentVolumes().Delete(ctx, bound, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// One worker: once the later marker is gone, the bound PV was decided.
	if err := c.CoreV1().PersistentVolumes().Delete(ctx, marker, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVGone(t, c, marker)
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, bound, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound PV: %v", err)
	}
	if pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, pvprotection.Finalizer) {
		t.Fatalf("bound PV is not Terminating with the finalizer: %v %v", pv.DeletionTimestamp, pv.Finalizers)
	}

	setPVPhase(t, ctx, c, bound, v1.VolumeReleased)
	waitPVGone(t, c, bound)
}

func TestPVFinalizerIsRestored(t *testing.T) {
	c, ns, ctx := startTest(t, "pv-restore")
	name := "pv-restore-" + ns
	pv := createPV(t, ctx, c, name)
	pv.Finalizers = nil
	if _, err := c.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "finalizer to be added back", func(ctx context.Context) (bool, error) {
		pv, err := c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(pv.Finalizers, pvprotection.Finalizer), err
	})
}

func ephemeralVolume(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
		VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "db"},
				Annotations: map[string]string{"example.com/note": "scratch"},
			},
			Spec: v1.PersistentVolumeClaimSpec{
				AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				StorageClassName: ptr.To("fast"),
				Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")}},
			},
		},
	}}}
}

func waitPVC(t *testing.T, c clientset.Interface, ns, name string) *v1.PersistentVolumeClaim {
	t.Helper()
	var pvc *v1.PersistentVolumeClaim
	framework.Eventually(t, waitTimeout, "PVC "+name, func(ctx context.Context) (bool, error) {
		var err error
		pvc, err = c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return pvc
}

func TestEphemeralVolumeClaim(t *testing.T) {
	c, ns, ctx := startTest(t, "ephemeral")
	pod, err := c.CoreV1().Pods(ns).Create(ctx, scheduledPod("db", ephemeralVolume("scratch")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc := waitPVC(t, c, ns, "db-scratch")

	template := pod.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate
	if pvc.Labels["app"] != "db" || pvc.Annotations["example.com/note"] != "scratch" {
		t.Errorf("labels %v, annotations %v", pvc.Labels, pvc.Annotations)
	}
	if ptr.Deref(pvc.Spec.StorageClassName, "") != "fast" || !slices.Equal(pvc.Spec.AccessModes, template.Spec.AccessModes) ||
		!pvc.Spec.Resources.Requests.Storage().Equal(resource.MustParse("2Gi")) {
		t.Errorf("spec %+v, want the template's %+v", pvc.Spec, template.Spec)
	}
	ref := metav1.GetControllerOf(pvc)
	if ref == nil || ref.UID != pod.UID || ref.Kind != "Pod" || ref.APIVersion != "v1" || ref.Name != "db" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v", ref)
	}
	if !reflect.DeepEqual(pvc.Spec, template.Spec) {
		t.Errorf("spec %+v differs from the (defaulted) template's %+v", pvc.Spec, template.Spec)
	}
	if !slices.Contains(pvc.Finalizers, pvcprotection.Finalizer) {
		t.Errorf("finalizers %v", pvc.Finalizers)
	}

	// The scheduled pod's own claim is in use: deleting it leaves it
	// Terminating (checked once a later PVC went, as above).
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "db-scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createPVC(t, ctx, c, ns, "marker")
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "marker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVCGone(t, c, ns, "marker")
	held, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "db-scratch", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil || held.UID != pvc.UID {
		t.Fatalf("ephemeral claim of a scheduled pod should stay Terminating: %v", err)
	}
}

// A claim deleted while its pod exists is created again. The pod is left
// unscheduled so that the claim is not protected as in use.
func TestEphemeralVolumeClaimIsRecreated(t *testing.T) {
	c, ns, ctx := startTest(t, "ephemeral-recreate")
	pod := scheduledPod("db", ephemeralVolume("scratch"))
	pod.Spec.NodeName = ""
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitPVC(t, c, ns, "db-scratch")
	if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "db-scratch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "a new db-scratch", func(ctx context.Context) (bool, error) {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "db-scratch", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && pvc.UID != first.UID, err
	})
}

// With the garbage collector running, deleting the pod deletes its
// ephemeral claim, which the protection controller then lets go.
func TestEphemeralVolumeClaimGoesWithPod(t *testing.T) {
	c, ns, ctx := startTest(t, "ephemeral-gc")
	runGC(t)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, scheduledPod("db", ephemeralVolume("scratch")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPVC(t, c, ns, "db-scratch")
	deleteNow(t, ctx, c, ns, "db")
	waitPVCGone(t, c, ns, "db-scratch")
}

// A PVC of the ephemeral name that the pod does not own is never used:
// the pod gets a warning event.
func TestEphemeralVolumeNameConflict(t *testing.T) {
	c, ns, ctx := startTest(t, "ephemeral-conflict")
	createPVC(t, ctx, c, ns, "db-scratch")
	if _, err := c.CoreV1().Pods(ns).Create(ctx, scheduledPod("db", ephemeralVolume("scratch")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var event v1.Event
	framework.Eventually(t, waitTimeout, "FailedBinding event", func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=db"})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == ephemeral.EventReasonFailedBinding {
				event = e
				return true, nil
			}
		}
		return false, nil
	})
	want := "ephemeral volume scratch: PVC " + ns + "/db-scratch was not created for pod " + ns + "/db (pod is not owner)"
	if event.Type != v1.EventTypeWarning || event.Message != want || event.Source.Component != "ephemeral_volume" {
		t.Errorf("event type %q, message %q, source %q; want Warning, %q, ephemeral_volume", event.Type, event.Message, event.Source.Component, want)
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "db-scratch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pvc.OwnerReferences) != 0 {
		t.Errorf("conflicting PVC was changed: owners %v", pvc.OwnerReferences)
	}
}
