package attachdetach

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/operations"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// fixture is a controller over a fake clientset whose informer caches the
// test fills by hand (no informer runs).
type fixture struct {
	t        *testing.T
	ctx      context.Context
	logger   klog.Logger
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	adc      *Controller
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, disableForceDetachOnTimeout bool, objects ...runtime.Object) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	timers := DefaultTimerConfig
	timers.ReconcilerMaxWaitForUnmountDuration = 50 * time.Millisecond
	adc, err := NewController(ctx, client,
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes(),
		factory.Storage().V1().CSINodes(), factory.Storage().V1().CSIDrivers(), factory.Storage().V1().VolumeAttachments(),
		"",
		false, time.Minute, disableForceDetachOnTimeout, timers)
	if err != nil {
		t.Fatal(err)
	}
	p, err := adc.plugins.FindByName(plugins.CSIPluginName)
	if err != nil {
		t.Fatal(err)
	}
	p.(*plugins.CSI).SetTimeouts(time.Second, 5*time.Millisecond)
	recorder := record.NewFakeRecorder(100)
	adc.recorder = recorder
	adc.reconciler.recorder = recorder
	adc.executor = operations.NewExecutor(client, adc.plugins, recorder)
	adc.reconciler.executor = adc.executor
	// Count forced detaches (the collector's state is whichever registers
	// first; tests read the counter only).
	registerMetrics(newStateCollector(adc.podLister, adc.specs, adc.plugins, adc.asw, adc.dsw))
	f := &fixture{t: t, ctx: ctx, logger: logger, client: client, factory: factory, adc: adc, recorder: recorder}
	for _, o := range objects {
		f.cache(o)
	}
	t.Cleanup(adc.executor.Wait)
	return f
}

// cache puts obj in its informer's store.
func (f *fixture) cache(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	case *v1.Node:
		err = f.factory.Core().V1().Nodes().Informer().GetIndexer().Add(o)
	case *v1.PersistentVolumeClaim:
		err = f.factory.Core().V1().PersistentVolumeClaims().Informer().GetIndexer().Add(o)
	case *v1.PersistentVolume:
		err = f.factory.Core().V1().PersistentVolumes().Informer().GetIndexer().Add(o)
	case *storagev1.CSIDriver:
		err = f.factory.Storage().V1().CSIDrivers().Informer().GetIndexer().Add(o)
	case *storagev1.VolumeAttachment:
		err = f.factory.Storage().V1().VolumeAttachments().Informer().GetIndexer().Add(o)
	default:
		f.t.Fatalf("unexpected %T", obj)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func node(name string, managed bool) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
	if managed {
		n.Annotations = map[string]string{ControllerManagedAttachAnnotation: "true"}
	}
	return n
}

// boundCSI returns a claim bound to a CSI PV of driver "d" with handle h.
func boundCSI(ns, claim, h string, modes ...v1.PersistentVolumeAccessMode) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	if len(modes) == 0 {
		modes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	}
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns, UID: types.UID(claim + "-uid")},
		Spec:       v1.PersistentVolumeClaimSpec{VolumeName: "pv-" + h, AccessModes: modes},
		Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + h},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            modes,
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: h}},
			ClaimRef:               &v1.ObjectReference{Namespace: ns, Name: claim, UID: pvc.UID},
		},
	}
	return pvc, pv
}

func csiName(h string) v1.UniqueVolumeName { return v1.UniqueVolumeName("kubernetes.io/csi/d^" + h) }

func claimPod(ns, name, nodeName string, claims ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(ns + "-" + name)},
		Spec:       v1.PodSpec{NodeName: nodeName},
	}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: c, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}
