package attachdetach

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kcache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
)

func TestPodVolumesInDesiredState(t *testing.T) {
	pvc1, pv1 := boundCSI("ns", "c1", "h1")
	pvc2, pv2 := boundCSI("ns", "c2", "h2")
	pvc2.Status.Phase = v1.ClaimPending
	f := newFixture(t, false, node("managed", true), node("plain", false), pvc1, pv1, pvc2, pv2)
	// Node informer events make nodes managed.
	f.adc.nodeAdd(f.logger, node("managed", true))
	f.adc.nodeAdd(f.logger, node("plain", false))
	dsw := f.adc.dsw
	if !dsw.NodeExists("managed") || dsw.NodeExists("plain") {
		t.Fatal("only annotated nodes are managed")
	}

	onManaged := claimPod("ns", "p", "managed", "c1", "c2")
	onPlain := claimPod("ns", "q", "plain", "c1")
	unscheduled := claimPod("ns", "r", "", "c1")
	for _, p := range []*v1.Pod{onManaged, onPlain, unscheduled} {
		f.cache(p)
		f.adc.podAdd(f.logger, p)
	}
	if !dsw.VolumeExists(csiName("h1"), "managed") {
		t.Error("bound claim of a pod on a managed node must be wanted")
	}
	if dsw.VolumeExists(csiName("h2"), "managed") {
		t.Error("unbound claim has nothing to attach")
	}
	if dsw.VolumeExists(csiName("h1"), "plain") {
		t.Error("unmanaged node")
	}

	// The claim binds: the PVC worker adds the volume.
	bound := pvc2.DeepCopy()
	bound.Status.Phase = v1.ClaimBound
	f.cache(bound)
	if err := f.adc.syncPVC(f.ctx, "ns/c2"); err != nil {
		t.Fatal(err)
	}
	if !dsw.VolumeExists(csiName("h2"), "managed") {
		t.Error("volume must be wanted once its claim is bound")
	}

	// A finished pod's volumes go.
	done := onManaged.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	f.adc.podAdd(f.logger, done)
	if dsw.VolumeExists(csiName("h1"), "managed") || dsw.VolumeExists(csiName("h2"), "managed") {
		t.Error("terminated pod's volumes must leave the desired state")
	}
	f.adc.podAdd(f.logger, onManaged)
	// So do a deleted pod's, also from a tombstone.
	f.adc.podDelete(f.logger, cacheTombstone(onManaged))
	if len(dsw.GetVolumesToAttach()) != 0 {
		t.Errorf("left: %v", dsw.GetVolumesToAttach())
	}
}

func TestEphemeralAndInlineVolumes(t *testing.T) {
	owner := claimPod("ns", "p", "n")
	owner.Spec.Volumes = []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
		{Name: "inline-csi", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}}},
		{Name: "iscsi", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "1.2.3.4:3260", IQN: "iqn.x", Lun: 1}}},
		{Name: "empty", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pvc, pv := boundCSI("ns", "p-scratch", "eph")
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: owner.UID, Controller: ptr.To(true)}}
	f := newFixture(t, false, node("n", true), pvc, pv, owner)
	f.adc.nodeAdd(f.logger, node("n", true))
	f.adc.podAdd(f.logger, owner)
	got := map[v1.UniqueVolumeName]bool{}
	for _, v := range f.adc.dsw.GetVolumesToAttach() {
		got[v.VolumeName] = true
	}
	want := map[v1.UniqueVolumeName]bool{csiName("eph"): true, "kubernetes.io/iscsi/1.2.3.4:3260:iqn.x:1": true}
	if len(got) != len(want) || !got[csiName("eph")] || !got["kubernetes.io/iscsi/1.2.3.4:3260:iqn.x:1"] {
		t.Errorf("wanted volumes %v, want %v", got, want)
	}

	// A claim of the ephemeral name not owned by the pod is not its volume.
	f2 := newFixture(t, false, node("n", true))
	stranger := pvc.DeepCopy()
	stranger.OwnerReferences = nil
	f2.cache(stranger)
	f2.cache(pv)
	f2.adc.nodeAdd(f2.logger, node("n", true))
	f2.adc.podAdd(f2.logger, owner)
	if f2.adc.dsw.VolumeExists(csiName("eph"), "n") {
		t.Error("ephemeral claim not owned by the pod must be ignored")
	}
}

func cacheTombstone(obj interface{}) interface{} {
	return kcache.DeletedFinalStateUnknown{Key: "ns/p", Obj: obj}
}

func TestStartupRebuildsState(t *testing.T) {
	pvcKept, pvKept := boundCSI("ns", "kept", "kept")
	pvcVA, pvVA := boundCSI("ns", "viava", "viava")
	_, pvIdle := boundCSI("ns", "idle", "idle")
	n := node("n", true)
	n.Status.VolumesAttached = []v1.AttachedVolume{{Name: csiName("kept"), DevicePath: "/dev/x"}, {Name: csiName("idle")}}
	n.Status.VolumesInUse = []v1.UniqueVolumeName{csiName("kept")}
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-whatever"},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: "n", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pvVA.Name)}},
	}
	inline := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-inline"},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: "n"},
	}
	f := newFixture(t, false, n, pvcKept, pvKept, pvcVA, pvVA, pvIdle, va, inline,
		claimPod("ns", "a", "n", "kept"), claimPod("ns", "b", "n", "viava"))

	if err := f.adc.populateActualStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	if err := f.adc.populateDesiredStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	asw := f.adc.asw
	states := map[v1.UniqueVolumeName]cache.AttachedVolume{}
	for _, v := range asw.GetAttachedVolumes() {
		states[v.VolumeName] = v
	}
	if kept := states[csiName("kept")]; kept.Spec == nil || kept.DevicePath != "/dev/x" || !kept.MountedByNode || asw.GetAttachState(csiName("kept"), "n") != cache.AttachStateAttached {
		t.Errorf("kept volume: %+v", kept)
	}
	if idle := states[csiName("idle")]; idle.Spec != nil || idle.MountedByNode || asw.GetAttachState(csiName("idle"), "n") != cache.AttachStateAttached {
		t.Errorf("idle volume (no pod) keeps a nil spec and is not in use: %+v", idle)
	}
	if asw.GetAttachState(csiName("viava"), "n") != cache.AttachStateUncertain || states[csiName("viava")].Spec == nil {
		t.Errorf("VolumeAttachment not in node status must be uncertain with its spec: %+v", states[csiName("viava")])
	}
	if !f.adc.dsw.VolumeExists(csiName("kept"), "n") || !f.adc.dsw.VolumeExists(csiName("viava"), "n") || f.adc.dsw.VolumeExists(csiName("idle"), "n") {
		t.Errorf("desired: %+v", f.adc.dsw.GetVolumesToAttach())
	}
	if len(states) != 3 {
		t.Errorf("states: %+v", states)
	}
}
