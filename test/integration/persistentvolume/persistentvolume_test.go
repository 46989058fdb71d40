// Package persistentvolume tests the persistentvolume-binder-controller
// against a real apiserver. Its StorageObjectInUseProtection admission
// plugin adds the pv/pvc-protection finalizers; no protection controller
// runs here, so the tests remove those finalizers themselves when they
// delete objects.
package persistentvolume

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	pvcontroller "github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	// syncPeriod is short so that retries (e.g. of a claim whose volume
	// is not there yet) happen within the tests' patience.
	syncPeriod = time.Second
	timeout    = 30 * time.Second

	fakeProvisioner = "fake-provisioner.example.com"
	eventSource     = "persistentvolume-controller"
)

type env struct {
	t  *testing.T
	c  clientset.Interface
	ns string
	// class is a StorageClass name unique to the test, so that the
	// cluster-scoped PVs of one test never match another test's claims.
	class string
}

type option func(*pvcontroller.ControllerParameters)

func withHostPathProvisioning(p *pvcontroller.ControllerParameters) {
	p.EnableHostPathProvisioning = true
}

func withoutDynamicProvisioning(p *pvcontroller.ControllerParameters) {
	p.EnableDynamicProvisioning = false
}

func setup(t *testing.T, opts ...option) *env {
	t.Helper()
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, strings.ToLower(t.Name()))
	e := &env{t: t, c: c, ns: ns, class: ns}
	e.runController(opts...)
	return e
}

// runController runs the controller in-process until the test ends.
func (e *env) runController(opts ...option) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(e.c, 0)
	p := pvcontroller.ControllerParameters{
		KubeClient:                e.c,
		SyncPeriod:                syncPeriod,
		VolumeInformer:            factory.Core().V1().PersistentVolumes(),
		ClaimInformer:             factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:             factory.Storage().V1().StorageClasses(),
		PodInformer:               factory.Core().V1().Pods(),
		NodeInformer:              factory.Core().V1().Nodes(),
		EnableDynamicProvisioning: true,
		Recycler: pvcontroller.RecyclerConfig{
			MinimumTimeoutHostPath: 60, IncrementTimeoutHostPath: 30,
			MinimumTimeoutNFS: 300, IncrementTimeoutNFS: 30,
		},
	}
	for _, o := range opts {
		o(&p)
	}
	ctrl, err := pvcontroller.NewController(ctx, p)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctrl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// Objects.

func (e *env) pvName(name string) string { return e.ns + "-" + name }

// createPV creates a Retain CSI volume of the test's class.
func (e *env) createPV(name, size string, mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
	e.t.Helper()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: e.pvName(name)},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			StorageClassName:              e.class,
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: e.pvName(name)},
			},
		},
	}
	if mutate != nil {
		mutate(pv)
	}
	saved, err := e.c.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.forceDeletePV(saved.Name) })
	return saved
}

func (e *env) createClaim(name, size string, mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	e.t.Helper()
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: ptr.To(e.class),
		},
	}
	if mutate != nil {
		mutate(pvc)
	}
	saved, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Create(context.Background(), pvc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return saved
}

func (e *env) createClass(name, provisioner string, mode storagev1.VolumeBindingMode, mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	e.t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		VolumeBindingMode: ptr.To(mode),
	}
	if mutate != nil {
		mutate(sc)
	}
	saved, err := e.c.StorageV1().StorageClasses().Create(context.Background(), sc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.c.StorageV1().StorageClasses().Delete(context.Background(), saved.Name, metav1.DeleteOptions{})
	})
	return saved
}

func (e *env) getPV(name string) *v1.PersistentVolume {
	e.t.Helper()
	pv, err := e.c.CoreV1().PersistentVolumes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pv
}

func (e *env) getClaim(name string) *v1.PersistentVolumeClaim {
	e.t.Helper()
	pvc, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return pvc
}

// dropFinalizers removes every finalizer, as the protection controllers
// (or an external deleter) would once nothing uses the object.
func dropFinalizers(ctx context.Context, c clientset.Interface, namespace, name string, pv bool) error {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	var err error
	if pv {
		_, err = c.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = c.CoreV1().PersistentVolumeClaims(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteClaim deletes a claim and waits until it is gone.
func (e *env) deleteClaim(name string) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if err := dropFinalizers(ctx, e.c, e.ns, name, false); err != nil {
		e.t.Fatal(err)
	}
	framework.Eventually(e.t, timeout, "claim "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func (e *env) forceDeletePV(name string) {
	ctx := context.Background()
	_ = e.c.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
	_ = dropFinalizers(ctx, e.c, "", name, true)
}

// Waiting.

func (e *env) waitClaim(name, what string, cond func(*v1.PersistentVolumeClaim) bool) *v1.PersistentVolumeClaim {
	e.t.Helper()
	var last *v1.PersistentVolumeClaim
	framework.Eventually(e.t, timeout, "claim "+name+" "+what, func(ctx context.Context) (bool, error) {
		pvc, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pvc
		return cond(pvc), nil
	})
	return last
}

func (e *env) waitPV(name, what string, cond func(*v1.PersistentVolume) bool) *v1.PersistentVolume {
	e.t.Helper()
	var last *v1.PersistentVolume
	framework.Eventually(e.t, timeout, "volume "+name+" "+what, func(ctx context.Context) (bool, error) {
		pv, err := e.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = pv
		return cond(pv), nil
	})
	return last
}

func (e *env) waitPVGone(name string) {
	e.t.Helper()
	framework.Eventually(e.t, timeout, "volume "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := e.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// consistently checks cond for d, failing at the first violation.
func (e *env) consistently(d time.Duration, what string, cond func() (bool, error)) {
	e.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ok, err := cond()
		if err != nil {
			e.t.Fatal(err)
		}
		if !ok {
			e.t.Fatalf("no longer %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func phaseBound(pvc *v1.PersistentVolumeClaim) bool { return pvc.Status.Phase == v1.ClaimBound }

// findEvent returns the controller's event about uid with that reason.
func findEvent(ctx context.Context, c clientset.Interface, namespace string, uid types.UID, reason string) (*v1.Event, error) {
	events, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range events.Items {
		ev := &events.Items[i]
		if ev.InvolvedObject.UID == uid && ev.Reason == reason && ev.Source.Component == eventSource {
			return ev, nil
		}
	}
	return nil, nil
}

// waitEvent waits for the controller's event about uid and checks its
// type and message.
func (e *env) waitEvent(namespace string, uid types.UID, eventType, reason, message string) {
	e.t.Helper()
	var ev *v1.Event
	framework.Eventually(e.t, timeout, reason+" event", func(ctx context.Context) (bool, error) {
		var err error
		ev, err = findEvent(ctx, e.c, namespace, uid, reason)
		return ev != nil, err
	})
	if ev.Type != eventType || ev.Message != message {
		e.t.Errorf("%s event: type %q message %q, want %q %q", reason, ev.Type, ev.Message, eventType, message)
	}
}

func (e *env) noEvent(namespace string, uid types.UID, reason string) {
	e.t.Helper()
	ev, err := findEvent(context.Background(), e.c, namespace, uid, reason)
	if err != nil {
		e.t.Fatal(err)
	}
	if ev != nil {
		e.t.Errorf("unexpected %s event: %s", reason, ev.Message)
	}
}

// checkBound checks the binding the controller leaves on both objects.
func (e *env) checkBound(pv *v1.PersistentVolume, pvc *v1.PersistentVolumeClaim, pvBoundByController, claimBoundByController bool) {
	e.t.Helper()
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Kind != "PersistentVolumeClaim" || ref.APIVersion != "v1" || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || ref.UID != pvc.UID {
		e.t.Errorf("volume %s claimRef %+v", pv.Name, ref)
	}
	if pv.Status.Phase != v1.VolumeBound {
		e.t.Errorf("volume %s phase %s", pv.Name, pv.Status.Phase)
	}
	if pv.Status.LastPhaseTransitionTime == nil {
		e.t.Errorf("volume %s has no lastPhaseTransitionTime", pv.Name)
	}
	if _, ok := pv.Annotations[pvcontroller.AnnBoundByController]; ok != pvBoundByController {
		e.t.Errorf("volume %s annotations %v, bound-by-controller expected %v", pv.Name, pv.Annotations, pvBoundByController)
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.Status.Phase != v1.ClaimBound {
		e.t.Errorf("claim %s volumeName %q phase %s", pvc.Name, pvc.Spec.VolumeName, pvc.Status.Phase)
	}
	if pvc.Annotations[pvcontroller.AnnBindCompleted] != "yes" {
		e.t.Errorf("claim %s annotations %v", pvc.Name, pvc.Annotations)
	}
	if _, ok := pvc.Annotations[pvcontroller.AnnBoundByController]; ok != claimBoundByController {
		e.t.Errorf("claim %s annotations %v, bound-by-controller expected %v", pvc.Name, pvc.Annotations, claimBoundByController)
	}
	wantCap := pv.Spec.Capacity[v1.ResourceStorage]
	if got := pvc.Status.Capacity[v1.ResourceStorage]; got.Cmp(wantCap) != 0 {
		e.t.Errorf("claim %s capacity %s, want %s", pvc.Name, got.String(), wantCap.String())
	}
	if len(pvc.Status.AccessModes) != len(pv.Spec.AccessModes) {
		e.t.Errorf("claim %s access modes %v", pvc.Name, pvc.Status.AccessModes)
	}
}

// Tests.

func TestStaticBindingPicksSmallestFit(t *testing.T) {
	e := setup(t)
	e.createPV("big", "10Gi", nil)
	e.createPV("fit", "2Gi", nil)
	e.createPV("small", "1Gi", nil)
	e.createPV("rwx", "1600Mi", func(pv *v1.PersistentVolume) {
		pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadWriteMany}
	})
	e.createClaim("claim", "1500Mi", nil)

	pvc := e.waitClaim("claim", "bound", phaseBound)
	pv := e.waitPV(e.pvName("fit"), "bound", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeBound })
	e.checkBound(pv, pvc, true, true)
	for _, other := range []string{"big", "small", "rwx"} {
		got := e.getPV(e.pvName(other))
		if got.Spec.ClaimRef != nil || got.Status.Phase != v1.VolumeAvailable {
			t.Errorf("volume %s: claimRef %v phase %s", other, got.Spec.ClaimRef, got.Status.Phase)
		}
	}
}

func TestPreBoundVolume(t *testing.T) {
	e := setup(t)
	// A claim that would fit, created first, must not get the reserved volume.
	e.createClaim("other", "1Gi", nil)
	e.createPV("reserved", "1Gi", func(pv *v1.PersistentVolume) {
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: e.ns, Name: "owner"}
	})
	e.waitPV(e.pvName("reserved"), "Available", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeAvailable })
	e.consistently(3*syncPeriod, "other claim unbound", func() (bool, error) {
		return e.getClaim("other").Spec.VolumeName == "", nil
	})

	e.createClaim("owner", "1Gi", nil)
	pvc := e.waitClaim("owner", "bound", phaseBound)
	pv := e.waitPV(e.pvName("reserved"), "bound", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeBound })
	// The user bound the volume; the controller bound the claim.
	e.checkBound(pv, pvc, false, true)
	if got := e.getClaim("other"); got.Status.Phase != v1.ClaimPending {
		t.Errorf("other claim %s", got.Status.Phase)
	}
}

func TestPreBoundClaim(t *testing.T) {
	e := setup(t)
	// The claim names a volume not there yet: it waits for it.
	e.createClaim("claim", "1Gi", func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.VolumeName = e.pvName("wanted") })
	e.createPV("bigger-first", "1Gi", nil)
	e.consistently(2*syncPeriod, "claim pending", func() (bool, error) {
		return e.getClaim("claim").Status.Phase == v1.ClaimPending, nil
	})
	e.createPV("wanted", "5Gi", nil)
	pvc := e.waitClaim("claim", "bound", phaseBound)
	pv := e.getPV(e.pvName("wanted"))
	// The user bound the claim; the controller bound the volume.
	e.checkBound(pv, pvc, true, false)

	// A claim naming a volume that does not fit gets VolumeMismatch.
	e.createPV("tiny", "100Mi", nil)
	small := e.createClaim("mismatch", "1Gi", func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.VolumeName = e.pvName("tiny") })
	e.waitEvent(e.ns, small.UID, v1.EventTypeWarning, "VolumeMismatch",
		fmt.Sprintf("Cannot bind to requested volume %q: requested PV is too small", e.pvName("tiny")))
	if got := e.getPV(e.pvName("tiny")); got.Spec.ClaimRef != nil {
		t.Errorf("too small volume bound: %+v", got.Spec.ClaimRef)
	}
}

func TestSelectorMismatchStaysPending(t *testing.T) {
	e := setup(t)
	e.createPV("unlabelled", "1Gi", nil)
	e.createClaim("claim", "1Gi", func(pvc *v1.PersistentVolumeClaim) {
		pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	})
	e.consistently(3*syncPeriod, "claim pending", func() (bool, error) {
		pvc := e.getClaim("claim")
		return pvc.Status.Phase == v1.ClaimPending && pvc.Spec.VolumeName == "", nil
	})
	// Labelling the volume makes it match on the next sync.
	pv := e.getPV(e.pvName("unlabelled"))
	pv.Labels = map[string]string{"tier": "gold"}
	if _, err := e.c.CoreV1().PersistentVolumes().Update(context.Background(), pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitClaim("claim", "bound", phaseBound)
}

func TestRetainVolumeReleased(t *testing.T) {
	e := setup(t)
	e.createPV("pv", "1Gi", nil)
	claim := e.createClaim("claim", "1Gi", nil)
	e.waitClaim("claim", "bound", phaseBound)
	e.deleteClaim("claim")
	pv := e.waitPV(e.pvName("pv"), "released", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeReleased })
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		t.Errorf("claimRef %+v: a retained volume keeps it", pv.Spec.ClaimRef)
	}
	// A new claim of the same name does not get the released volume.
	e.createClaim("claim", "1Gi", nil)
	e.consistently(3*syncPeriod, "volume Released", func() (bool, error) {
		return e.getPV(e.pvName("pv")).Status.Phase == v1.VolumeReleased && e.getClaim("claim").Spec.VolumeName == "", nil
	})
}

func TestClaimLostWhenVolumeDeleted(t *testing.T) {
	e := setup(t)
	e.createPV("pv", "1Gi", nil)
	claim := e.createClaim("claim", "1Gi", nil)
	e.waitClaim("claim", "bound", phaseBound)
	e.forceDeletePV(e.pvName("pv"))
	e.waitClaim("claim", "lost", func(pvc *v1.PersistentVolumeClaim) bool { return pvc.Status.Phase == v1.ClaimLost })
	e.waitEvent(e.ns, claim.UID, v1.EventTypeWarning, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
}

// fakeProvisioner plays an external (CSI) provisioner: for a claim
// annotated for it, it creates a PV bound to the claim, as
// external-provisioner does.
func (e *env) provisionFor(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) *v1.PersistentVolume {
	e.t.Helper()
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pvc-" + string(claim.UID),
			Annotations: map[string]string{pvcontroller.AnnDynamicallyProvisioned: class.Provisioner},
			Finalizers:  []string{pvcontroller.PVDeletionProtectionFinalizer},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      claim.Spec.Resources.Requests,
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: *class.ReclaimPolicy,
			StorageClassName:              class.Name,
			ClaimRef:                      &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: class.Provisioner, VolumeHandle: string(claim.UID)},
			},
		},
	}
	saved, err := e.c.CoreV1().PersistentVolumes().Create(context.Background(), pv, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.forceDeletePV(saved.Name) })
	return saved
}

func TestExternalProvisioningAndDeletion(t *testing.T) {
	e := setup(t)
	class := e.createClass(e.class, fakeProvisioner, storagev1.VolumeBindingImmediate, nil)
	if ptr.Deref(class.ReclaimPolicy, "") != v1.PersistentVolumeReclaimDelete {
		t.Fatalf("class reclaim policy %v", class.ReclaimPolicy)
	}
	e.createClaim("claim", "1Gi", nil)

	// The controller hands the claim to the external provisioner.
	claim := e.waitClaim("claim", "annotated for the provisioner", func(pvc *v1.PersistentVolumeClaim) bool {
		return pvc.Annotations[pvcontroller.AnnStorageProvisioner] == fakeProvisioner &&
			pvc.Annotations[pvcontroller.AnnBetaStorageProvisioner] == fakeProvisioner
	})
	e.waitEvent(e.ns, claim.UID, v1.EventTypeNormal, "ExternalProvisioning",
		"Waiting for a volume to be created either by the external provisioner '"+fakeProvisioner+"' or manually by the system administrator. "+
			"If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	if claim.Status.Phase != v1.ClaimPending {
		t.Errorf("claim phase %s", claim.Status.Phase)
	}

	pv := e.provisionFor(claim, class)
	pvc := e.waitClaim("claim", "bound", phaseBound)
	pv = e.waitPV(pv.Name, "bound", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeBound })
	// The provisioner bound the volume, the controller the claim.
	e.checkBound(pv, pvc, false, true)

	// Deletion is the external deleter's job: the volume is Released and
	// keeps the provisioner's finalizer; nothing fails.
	e.deleteClaim("claim")
	pv = e.waitPV(pv.Name, "released", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeReleased })
	e.consistently(3*syncPeriod, "volume left to the external deleter", func() (bool, error) {
		got, err := e.c.CoreV1().PersistentVolumes().Get(context.Background(), pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == v1.VolumeReleased && got.DeletionTimestamp == nil &&
			len(got.Finalizers) > 0 && hasString(got.Finalizers, pvcontroller.PVDeletionProtectionFinalizer) &&
			!hasString(got.Finalizers, pvcontroller.PVDeletionInTreeProtectionFinalizer), nil
	})
	e.noEvent("default", pv.UID, "VolumeFailedDelete")

	// The external deleter deletes the volume.
	e.forceDeletePV(pv.Name)
	e.waitPVGone(pv.Name)
}

func TestProvisioningFailures(t *testing.T) {
	e := setup(t)
	missing := e.createClaim("missing-class", "1Gi", nil)
	e.waitEvent(e.ns, missing.UID, v1.EventTypeWarning, "ProvisioningFailed",
		fmt.Sprintf("storageclass.storage.k8s.io %q not found", e.class))

	e.createClass(e.class+"-hostpath", "kubernetes.io/host-path", storagev1.VolumeBindingImmediate, nil)
	disabled := e.createClaim("hostpath-disabled", "1Gi", func(pvc *v1.PersistentVolumeClaim) {
		pvc.Spec.StorageClassName = ptr.To(e.class + "-hostpath")
	})
	e.waitEvent(e.ns, disabled.UID, v1.EventTypeWarning, "ProvisioningFailed",
		`Failed to create provisioner: provisioning in volume plugin "kubernetes.io/host-path" is disabled`)

	noClass := e.createClaim("no-class", "1Gi", func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("") })
	e.waitEvent(e.ns, noClass.UID, v1.EventTypeNormal, "FailedBinding", "no persistent volumes available for this claim and no storage class is set")
}

func TestDynamicProvisioningDisabled(t *testing.T) {
	e := setup(t, withoutDynamicProvisioning)
	e.createClass(e.class, fakeProvisioner, storagev1.VolumeBindingImmediate, nil)
	e.createClaim("claim", "1Gi", nil)
	e.consistently(3*syncPeriod, "claim not annotated", func() (bool, error) {
		_, ok := e.getClaim("claim").Annotations[pvcontroller.AnnStorageProvisioner]
		return !ok, nil
	})
}

func TestWaitForFirstConsumer(t *testing.T) {
	e := setup(t)
	e.createClass(e.class, fakeProvisioner, storagev1.VolumeBindingWaitForFirstConsumer, nil)
	// A matching static volume is the scheduler's to bind, not ours.
	e.createPV("static", "1Gi", nil)
	claim := e.createClaim("claim", "1Gi", nil)
	e.waitEvent(e.ns, claim.UID, v1.EventTypeNormal, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
	e.consistently(2*syncPeriod, "nothing bound or provisioned", func() (bool, error) {
		pvc := e.getClaim("claim")
		_, annotated := pvc.Annotations[pvcontroller.AnnStorageProvisioner]
		return !annotated && pvc.Spec.VolumeName == "" && e.getPV(e.pvName("static")).Spec.ClaimRef == nil, nil
	})

	// A pod that is not scheduled yet is named.
	_, err := e.c.CoreV1().Pods(e.ns).Create(context.Background(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "consumer"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitEvent(e.ns, claim.UID, v1.EventTypeNormal, "WaitForPodScheduled", "waiting for pod consumer to be scheduled")

	// The scheduler selects a node: provisioning starts.
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]string{pvcontroller.AnnSelectedNode: "node-1"}}})
	if _, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Patch(context.Background(), "claim", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitClaim("claim", "annotated for the provisioner", func(pvc *v1.PersistentVolumeClaim) bool {
		return pvc.Annotations[pvcontroller.AnnStorageProvisioner] == fakeProvisioner
	})
	e.waitEvent(e.ns, claim.UID, v1.EventTypeNormal, "ExternalProvisioning",
		"Waiting for a volume to be created either by the external provisioner '"+fakeProvisioner+"' or manually by the system administrator. "+
			"If volume creation is delayed, please verify that the provisioner is running and correctly registered.")
	if pv := e.getPV(e.pvName("static")); pv.Spec.ClaimRef != nil {
		t.Errorf("static volume bound by the PV controller: %+v", pv.Spec.ClaimRef)
	}
}

// TestBindRace: many claims compete for one volume. The controller works
// from informers that lag behind its own writes; its own caches must keep
// it from binding the volume twice.
func TestBindRace(t *testing.T) {
	e := setup(t)
	const claims = 10
	for i := range claims {
		e.createClaim(fmt.Sprintf("claim-%d", i), "1Gi", nil)
	}
	e.createPV("pv", "1Gi", nil)
	pv := e.waitPV(e.pvName("pv"), "bound", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeBound })
	winner := pv.Spec.ClaimRef.Name
	e.waitClaim(winner, "bound", phaseBound)
	e.consistently(3*syncPeriod, "exactly one claim bound", func() (bool, error) {
		list, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pvc := range list.Items {
			if pvc.Name == winner {
				if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName != e.pvName("pv") {
					return false, nil
				}
				continue
			}
			if pvc.Spec.VolumeName != "" || pvc.Status.Phase != v1.ClaimPending {
				t.Logf("claim %s: volume %q phase %s", pvc.Name, pvc.Spec.VolumeName, pvc.Status.Phase)
				return false, nil
			}
		}
		got := e.getPV(e.pvName("pv"))
		return got.Spec.ClaimRef != nil && got.Spec.ClaimRef.Name == winner, nil
	})
	for i := range claims {
		pvc := e.getClaim(fmt.Sprintf("claim-%d", i))
		e.noEvent(e.ns, pvc.UID, "ClaimMisbound")
	}
}

func TestDefaultClassAssignedRetroactively(t *testing.T) {
	e := setup(t)
	e.createClaim("claim", "1Gi", func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = nil })
	// No default class yet: the claim stays without one.
	e.consistently(2*syncPeriod, "no class", func() (bool, error) {
		return e.getClaim("claim").Spec.StorageClassName == nil, nil
	})
	e.createClass(e.class, fakeProvisioner, storagev1.VolumeBindingImmediate, func(sc *storagev1.StorageClass) {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	})
	e.waitClaim("claim", "given the default class", func(pvc *v1.PersistentVolumeClaim) bool {
		return ptr.Deref(pvc.Spec.StorageClassName, "") == e.class
	})
	// ...and then provisioned with it.
	e.waitClaim("claim", "annotated for the provisioner", func(pvc *v1.PersistentVolumeClaim) bool {
		return pvc.Annotations[pvcontroller.AnnStorageProvisioner] == fakeProvisioner
	})
}

func TestHostPathProvisioner(t *testing.T) {
	e := setup(t, withHostPathProvisioning)
	e.createClass(e.class, "kubernetes.io/host-path", storagev1.VolumeBindingImmediate, nil)
	claim := e.createClaim("claim", "1Gi", nil)
	pvc := e.waitClaim("claim", "bound", phaseBound)
	pvName := "pvc-" + string(claim.UID)
	if pvc.Spec.VolumeName != pvName {
		t.Fatalf("bound to %q", pvc.Spec.VolumeName)
	}
	t.Cleanup(func() { e.forceDeletePV(pvName) })
	pv := e.getPV(pvName)
	e.checkBound(pv, pvc, true, true)
	if pv.Annotations[pvcontroller.AnnDynamicallyProvisioned] != "kubernetes.io/host-path" || !hasString(pv.Finalizers, pvcontroller.PVDeletionInTreeProtectionFinalizer) {
		t.Errorf("annotations %v finalizers %v", pv.Annotations, pv.Finalizers)
	}
	dir := pv.Spec.HostPath.Path
	if !strings.HasPrefix(dir, "/tmp/hostpath_pv/") {
		t.Fatalf("path %s", dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("provisioned directory: %v", err)
	}
	e.waitEvent(e.ns, claim.UID, v1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume "+pvName+" using kubernetes.io/host-path")

	// Delete policy: the controller deletes the directory, drops its
	// finalizer and deletes the PV.
	e.deleteClaim("claim")
	framework.Eventually(t, timeout, "volume deleted", func(ctx context.Context) (bool, error) {
		pv, err := e.c.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		// Only the pv-protection finalizer is left, for a controller not
		// running here.
		if pv.DeletionTimestamp != nil && !hasString(pv.Finalizers, pvcontroller.PVDeletionInTreeProtectionFinalizer) {
			return true, dropFinalizers(ctx, e.c, "", pvName, true)
		}
		return false, nil
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory not deleted: %v", err)
	}
}

func TestRecycleNFS(t *testing.T) {
	e := setup(t)
	pv := e.createPV("pv", "1Gi", func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRecycle
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs.example.com", Path: "/export"}}
	})
	e.createClaim("claim", "1Gi", nil)
	e.waitClaim("claim", "bound", phaseBound)
	e.deleteClaim("claim")

	// The recycler pod scrubs the volume; play its kubelet.
	var pod *v1.Pod
	framework.Eventually(t, timeout, "recycler pod", func(ctx context.Context) (bool, error) {
		p, err := e.c.CoreV1().Pods("default").Get(ctx, "recycler-for-"+pv.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		pod = p
		return err == nil, err
	})
	if nfs := pod.Spec.Volumes[0].NFS; nfs == nil || nfs.Server != "nfs.example.com" || nfs.Path != "/export" || ptr.Deref(pod.Spec.ActiveDeadlineSeconds, 0) != 300 {
		t.Errorf("recycler pod %+v", pod.Spec)
	}
	if _, err := (framework.Kubelet{Client: e.c}).MarkSucceeded(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got := e.waitPV(pv.Name, "available again", func(pv *v1.PersistentVolume) bool {
		return pv.Status.Phase == v1.VolumeAvailable && pv.Spec.ClaimRef == nil
	})
	e.waitEvent("default", got.UID, v1.EventTypeNormal, "VolumeRecycled", "Volume recycled")
	framework.Eventually(t, timeout, "recycler pod deleted", func(ctx context.Context) (bool, error) {
		_, err := e.c.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestDeleteWithoutDeleter(t *testing.T) {
	e := setup(t)
	pv := e.createPV("pv", "1Gi", func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimDelete
		pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs.example.com", Path: "/export"}}
	})
	e.createClaim("claim", "1Gi", nil)
	e.waitClaim("claim", "bound", phaseBound)
	e.deleteClaim("claim")
	want := fmt.Sprintf("error getting deleter volume plugin for volume %q: no deletable volume plugin matched", pv.Name)
	got := e.waitPV(pv.Name, "failed", func(pv *v1.PersistentVolume) bool { return pv.Status.Phase == v1.VolumeFailed })
	if got.Status.Message != want {
		t.Errorf("message %q", got.Status.Message)
	}
	e.waitEvent("default", pv.UID, v1.EventTypeWarning, "VolumeFailedDelete", want)
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
