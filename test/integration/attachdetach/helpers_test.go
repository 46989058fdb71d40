// Package attachdetach tests the persistentvolume-attach-detach-controller
// against a real apiserver. The tests play the CSI external-attacher (they
// set VolumeAttachment status) and the kubelet (they set the node's
// status.volumesInUse).
package attachdetach

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"
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

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const waitTimeout = 30 * time.Second

// testTimers keeps upstream's timing except for the populator, so that a
// missed event is repaired within the test's patience.
var testTimers = attachdetach.TimerConfig{
	ReconcilerLoopPeriod:                              100 * time.Millisecond,
	ReconcilerMaxWaitForUnmountDuration:               6 * time.Minute,
	DesiredStateOfWorldPopulatorLoopSleepPeriod:       time.Second,
	DesiredStateOfWorldPopulatorListPodsRetryDuration: 3 * time.Second,
}

type env struct {
	t   *testing.T
	c   clientset.Interface
	ns  string
	ctx context.Context
	// prefix makes cluster-scoped names unique to the test.
	prefix string
	// flexDir is the controller's --flex-volume-plugin-dir; empty for
	// none.
	flexDir string
}

func newEnv(t *testing.T, prefix string) *env {
	t.Helper()
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, prefix)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &env{t: t, c: c, ns: ns, ctx: ctx, prefix: ns}
}

// startController runs a controller with its own informers and returns a
// stop function that waits until it has stopped; it also stops at the end
// of the test.
func (e *env) startController(timers attachdetach.TimerConfig, disableForceDetachOnTimeout bool) (stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(e.c, 0)
	adc, err := attachdetach.NewController(ctx, e.c,
		factory.Core().V1().Pods(),
		factory.Core().V1().Nodes(),
		factory.Core().V1().PersistentVolumeClaims(),
		factory.Core().V1().PersistentVolumes(),
		factory.Storage().V1().CSINodes(),
		factory.Storage().V1().CSIDrivers(),
		factory.Storage().V1().VolumeAttachments(),
		e.flexDir,
		false, time.Minute, disableForceDetachOnTimeout, timers)
	if err != nil {
		e.t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		adc.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			factory.Shutdown()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

func (e *env) name(s string) string { return e.prefix + "-" + s }

// createNode creates a Ready node; managed nodes carry the annotation the
// kubelet sets for controller-managed attach/detach.
func (e *env) createNode(name string, managed bool) *v1.Node {
	e.t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if managed {
		n.Annotations = map[string]string{attachdetach.ControllerManagedAttachAnnotation: "true"}
	}
	n, err := e.c.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	n, err = e.c.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) createCSIDriver(name string, attachRequired bool) {
	e.t.Helper()
	_, err := e.c.StorageV1().CSIDrivers().Create(e.ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(attachRequired)},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.StorageV1().CSIDrivers().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// volume is a bound claim and its CSI PV.
type volume struct {
	claim, pv, driver, handle string
}

// uniqueName is the name nodes use for the volume.
func (v volume) uniqueName() v1.UniqueVolumeName {
	return v1.UniqueVolumeName("kubernetes.io/csi/" + v.driver + "^" + v.handle)
}

// createBoundVolume creates a CSI PV bound to a claim, as the PV
// controller would have bound them.
func (e *env) createBoundVolume(claim, driver string, mode v1.PersistentVolumeAccessMode) volume {
	e.t.Helper()
	size := resource.MustParse("1Gi")
	v := volume{claim: claim, pv: e.name(claim), driver: driver, handle: "handle-" + e.name(claim)}
	pvc, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{mode},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
			VolumeName:       v.pv,
			StorageClassName: ptr.To(""),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pv, err := e.c.CoreV1().PersistentVolumes().Create(e.ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: v.pv},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:            []v1.PersistentVolumeAccessMode{mode},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: v.handle}},
			ClaimRef:               &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: e.ns, Name: claim, UID: pvc.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.c.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pv.Status.Phase = v1.VolumeBound
	if _, err := e.c.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, pv, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	pvc.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, AccessModes: []v1.PersistentVolumeAccessMode{mode}, Capacity: v1.ResourceList{v1.ResourceStorage: size}}
	if _, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).UpdateStatus(e.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return v
}

// createPod creates a pod already scheduled to node, using the claims.
func (e *env) createPod(name, node string, claims ...string) *v1.Pod {
	e.t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	for i, claim := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{
			Name:         fmt.Sprintf("vol-%d", i),
			VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
		})
	}
	pod, err := e.c.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.deletePod(pod.Name) })
	return pod
}

// deletePod removes the pod at once, as a kubelet finishing it would.
func (e *env) deletePod(name string) {
	err := e.c.CoreV1().Pods(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("deleting pod %s: %v", name, err)
	}
}

// attachmentName is the VolumeAttachment name upstream computes: "csi-"
// and the SHA-256 of volume handle, driver and node name.
func attachmentName(v volume, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(v.handle+v.driver+node)))
}

// waitForAttachment waits for the volume's VolumeAttachment on node and
// deletes it at the end of the test.
func (e *env) waitForAttachment(v volume, node string) *storagev1.VolumeAttachment {
	e.t.Helper()
	name := attachmentName(v, node)
	var va *storagev1.VolumeAttachment
	framework.Eventually(e.t, waitTimeout, "VolumeAttachment "+name, func(ctx context.Context) (bool, error) {
		got, err := e.c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		va = got
		return err == nil, err
	})
	e.t.Cleanup(func() {
		_ = e.c.StorageV1().VolumeAttachments().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return va
}

// createAttachment creates the VolumeAttachment the controller would
// create, as an earlier controller that crashed before writing node status.
func (e *env) createAttachment(v volume, node string) *storagev1.VolumeAttachment {
	e.t.Helper()
	va, err := e.c.StorageV1().VolumeAttachments().Create(e.ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: attachmentName(v, node)},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: v.driver,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(v.pv)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.c.StorageV1().VolumeAttachments().Delete(context.Background(), va.Name, metav1.DeleteOptions{})
	})
	return va
}

// markAttached plays the external-attacher.
func (e *env) markAttached(va *storagev1.VolumeAttachment) *storagev1.VolumeAttachment {
	e.t.Helper()
	va = va.DeepCopy()
	va.Status.Attached = true
	va, err := e.c.StorageV1().VolumeAttachments().UpdateStatus(e.ctx, va, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return va
}

// setVolumesInUse plays the kubelet reporting mounted volumes.
func (e *env) setVolumesInUse(node string, names ...v1.UniqueVolumeName) {
	e.t.Helper()
	framework.Eventually(e.t, waitTimeout, "volumesInUse update", func(ctx context.Context) (bool, error) {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Status.VolumesInUse = names
		_, err = e.c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// waitForVolumesAttached waits until node status lists exactly names (with
// empty device paths, as CSI attaches report).
func (e *env) waitForVolumesAttached(node string, names ...v1.UniqueVolumeName) {
	e.t.Helper()
	want := make([]string, 0, len(names))
	for _, n := range names {
		want = append(want, string(n))
	}
	slices.Sort(want)
	var last []string
	framework.Eventually(e.t, waitTimeout, fmt.Sprintf("node %s volumesAttached %v", node, want), func(ctx context.Context) (bool, error) {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = last[:0]
		for _, av := range n.Status.VolumesAttached {
			if av.DevicePath != "" {
				return false, fmt.Errorf("volume %s has device path %q", av.Name, av.DevicePath)
			}
			last = append(last, string(av.Name))
		}
		slices.Sort(last)
		return slices.Equal(last, want), nil
	})
}

func (e *env) waitForAttachmentGone(name string) {
	e.t.Helper()
	framework.Eventually(e.t, waitTimeout, "VolumeAttachment "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := e.c.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// consistently fails the test if cond stops holding within d.
func (e *env) consistently(d time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := cond(e.ctx)
		if err != nil || !ok {
			e.t.Fatalf("%s no longer holds: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitForEvent waits for an attachdetach-controller event on the pod.
func (e *env) waitForEvent(pod *v1.Pod, typ, reason, message string) {
	e.t.Helper()
	framework.Eventually(e.t, waitTimeout, reason+" event on "+pod.Name, func(ctx context.Context) (bool, error) {
		events, err := e.c.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.UID == pod.UID && ev.Source.Component == "attachdetach-controller" && ev.Type == typ && ev.Reason == reason && ev.Message == message {
				return true, nil
			}
		}
		return false, nil
	})
}
