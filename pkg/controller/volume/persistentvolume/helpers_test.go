package persistentvolume

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const testNamespace = "ns"

// harness is a controller on a fake clientset whose informers are not
// started: tests put objects into the controller's caches and the listers
// themselves and call the sync functions directly.
type harness struct {
	t        *testing.T
	ctx      context.Context
	cancel   context.CancelFunc
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	ctrl     *Controller
	recorder *record.FakeRecorder
}

type harnessOption func(*ControllerParameters)

func withoutDynamicProvisioning() harnessOption {
	return func(p *ControllerParameters) { p.EnableDynamicProvisioning = false }
}

func withHostPathProvisioning() harnessOption {
	return func(p *ControllerParameters) { p.EnableHostPathProvisioning = true }
}

func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	addAPIServerReactor(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	p := ControllerParameters{
		KubeClient:                client,
		SyncPeriod:                time.Second,
		VolumeInformer:            factory.Core().V1().PersistentVolumes(),
		ClaimInformer:             factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:             factory.Storage().V1().StorageClasses(),
		PodInformer:               factory.Core().V1().Pods(),
		NodeInformer:              factory.Core().V1().Nodes(),
		EnableDynamicProvisioning: true,
		Recycler:                  RecyclerConfig{MinimumTimeoutHostPath: 60, IncrementTimeoutHostPath: 30, MinimumTimeoutNFS: 300, IncrementTimeoutNFS: 30},
	}
	for _, o := range opts {
		o(&p)
	}
	ctrl, err := NewController(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	recorder := record.NewFakeRecorder(1000)
	ctrl.eventRecorder = recorder
	ctrl.createProvisionedPVInterval = time.Millisecond
	t.Cleanup(func() {
		cancel()
		ctrl.runningOperations.wait()
	})
	return &harness{t: t, ctx: ctx, cancel: cancel, client: client, factory: factory, ctrl: ctrl, recorder: recorder}
}

// addAPIServerReactor makes the fake clientset act like the apiserver in
// what the controller relies on: objects get UIDs and increasing
// resourceVersions, and an update with a stale resourceVersion conflicts.
func addAPIServerReactor(client *fake.Clientset) {
	var mu sync.Mutex
	rv := 100
	client.PrependReactor("*", "*", func(action core.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		// Create and update actions have the same method set: tell them
		// apart by verb.
		withObject, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			return false, nil, nil
		}
		m, err := meta.Accessor(withObject.GetObject())
		if err != nil {
			return false, nil, nil
		}
		switch action.GetVerb() {
		case "create":
			rv++
			m.SetResourceVersion(strconv.Itoa(rv))
			if m.GetUID() == "" {
				m.SetUID(types.UID("uid-" + m.GetName()))
			}
		case "update":
			current, err := client.Tracker().Get(action.GetResource(), action.GetNamespace(), m.GetName())
			if err == nil {
				cm, _ := meta.Accessor(current)
				if m.GetResourceVersion() != "" && cm.GetResourceVersion() != m.GetResourceVersion() {
					return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), m.GetName(),
						fmt.Errorf("resourceVersion %s is stale, current %s", m.GetResourceVersion(), cm.GetResourceVersion()))
				}
			}
			rv++
			m.SetResourceVersion(strconv.Itoa(rv))
		}
		return false, nil, nil
	})
}

func (h *harness) logger() klog.Logger { return ktesting.NewLogger(h.t, ktesting.DefaultConfig) }

// addVolume stores a PV in the API, the informer and the controller cache.
func (h *harness) addVolume(pv *v1.PersistentVolume) *v1.PersistentVolume {
	h.t.Helper()
	saved, err := h.client.CoreV1().PersistentVolumes().Create(h.ctx, pv, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(saved); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ctrl.storeVolumeUpdate(h.logger(), saved); err != nil {
		h.t.Fatal(err)
	}
	return saved
}

// addClaim stores a PVC in the API, the informer and the controller cache.
func (h *harness) addClaim(pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	h.t.Helper()
	saved, err := h.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(h.ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(saved); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ctrl.storeClaimUpdate(h.logger(), saved); err != nil {
		h.t.Fatal(err)
	}
	return saved
}

func (h *harness) addClass(sc *storagev1.StorageClass) {
	h.t.Helper()
	if err := h.factory.Storage().V1().StorageClasses().Informer().GetIndexer().Add(sc); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) addPod(pod *v1.Pod) {
	h.t.Helper()
	if err := h.factory.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) addNode(node *v1.Node) {
	h.t.Helper()
	if err := h.factory.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) volume(name string) *v1.PersistentVolume {
	h.t.Helper()
	pv, err := h.client.CoreV1().PersistentVolumes().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pv
}

func (h *harness) volumeGone(name string) bool {
	_, err := h.client.CoreV1().PersistentVolumes().Get(h.ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (h *harness) claim(name string) *v1.PersistentVolumeClaim {
	h.t.Helper()
	pvc, err := h.client.CoreV1().PersistentVolumeClaims(testNamespace).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return pvc
}

func (h *harness) syncClaim(name string) error {
	return h.ctrl.syncClaim(h.ctx, h.claim(name))
}

func (h *harness) syncVolume(name string) error {
	return h.ctrl.syncVolume(h.ctx, h.volume(name))
}

// waitOperations waits until the asynchronous operations are done.
func (h *harness) waitOperations() { h.ctrl.runningOperations.wait() }

// events drains the recorded events ("Type Reason Message").
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// expectEvents checks the drained events exactly, in order.
func (h *harness) expectEvents(want ...string) {
	h.t.Helper()
	got := h.events()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		h.t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

// countWrites counts create/update/delete actions on a resource.
func (h *harness) countWrites(resource string) int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetResource().Resource != resource {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			n++
		}
	}
	return n
}

// Object builders.

func newVolume(name, size string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolume {
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource: v1.PersistentVolumeSource{
				CSI: &v1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: name},
			},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
}

func newClaim(name, size string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name)},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      modes,
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse(size)}},
			VolumeMode:       ptr.To(v1.PersistentVolumeFilesystem),
			StorageClassName: ptr.To(""),
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
}

func newClass(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(mode),
	}
}

func claimRefTo(pvc *v1.PersistentVolumeClaim, withUID bool) *v1.ObjectReference {
	ref := &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name}
	if withUID {
		ref.UID = pvc.UID
	}
	return ref
}

// boundPair returns a volume and claim bound to each other, as the
// controller leaves them.
func boundPair(pvName, claimName string) (*v1.PersistentVolume, *v1.PersistentVolumeClaim) {
	pvc := newClaim(claimName, "1Gi")
	pv := newVolume(pvName, "1Gi")
	pv.Spec.ClaimRef = claimRefTo(pvc, true)
	pv.Annotations = map[string]string{AnnBoundByController: "yes"}
	pv.Status.Phase = v1.VolumeBound
	pvc.Spec.VolumeName = pvName
	pvc.Annotations = map[string]string{AnnBindCompleted: "yes", AnnBoundByController: "yes"}
	pvc.Status = v1.PersistentVolumeClaimStatus{
		Phase:       v1.ClaimBound,
		AccessModes: pv.Spec.AccessModes,
		Capacity:    pv.Spec.Capacity,
	}
	return pv, pvc
}
