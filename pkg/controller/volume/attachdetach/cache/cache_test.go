package cache

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

func manager() *plugins.Manager { return plugins.NewManager(plugins.ISCSI{}, plugins.FC{}) }

func iscsiSpec(iqn string) *plugins.Spec {
	return plugins.SpecFromVolume(&v1.Volume{Name: iqn, VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "p", IQN: iqn}}})
}

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")}}
}

func TestDesiredStateOfWorld(t *testing.T) {
	d := NewDesiredStateOfWorld(manager())
	spec := iscsiSpec("iqn-1")
	if _, err := d.AddPod(pod("p1"), spec, "n1"); err == nil {
		t.Fatal("AddPod on an unmanaged node must fail")
	}
	d.AddNode("n1")
	d.AddNode("n2")
	name, err := d.AddPod(pod("p1"), spec, "n1")
	if err != nil || name != "kubernetes.io/iscsi/p:iqn-1:0" {
		t.Fatalf("AddPod = %q, %v", name, err)
	}
	if _, err := d.AddPod(pod("p2"), spec, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddPod(pod("p3"), spec, "n2"); err != nil {
		t.Fatal(err)
	}
	notAttachable := plugins.SpecFromVolume(&v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if _, err := d.AddPod(pod("p1"), notAttachable, "n1"); err == nil {
		t.Error("AddPod of a non-attachable volume must fail")
	}

	vols := d.GetVolumesToAttach()
	if len(vols) != 2 {
		t.Fatalf("volumes to attach: %+v", vols)
	}
	if got := d.GetVolumePodsOnNodes([]types.NodeName{"n1"}, name); len(got) != 2 {
		t.Errorf("pods on n1: %v", got)
	}
	if len(d.GetPodsToAdd()) != 3 {
		t.Errorf("pods to add: %v", d.GetPodsToAdd())
	}

	d.SetMultiAttachError(name, "n2")
	for _, v := range d.GetVolumesToAttach() {
		if v.MultiAttachErrorReported != (v.NodeName == "n2") {
			t.Errorf("multi-attach flag on %s = %v", v.NodeName, v.MultiAttachErrorReported)
		}
	}

	if err := d.DeleteNode("n2"); err == nil {
		t.Error("DeleteNode must refuse a node with volumes")
	}
	d.DeletePod("p3-uid", name, "n2")
	if d.VolumeExists(name, "n2") {
		t.Error("volume must go with its last pod")
	}
	if err := d.DeleteNode("n2"); err != nil || d.NodeExists("n2") {
		t.Errorf("DeleteNode: %v", err)
	}
	d.DeletePod("p1-uid", name, "n1")
	if !d.VolumeExists(name, "n1") {
		t.Error("volume still needed by p2")
	}
}

func TestActualStateOfWorld(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	a := NewActualStateOfWorld(manager())
	spec := iscsiSpec("iqn-1")

	name, err := a.AddVolumeNode(logger, "", spec, "n1", "/dev/sdb", true)
	if err != nil || name != "kubernetes.io/iscsi/p:iqn-1:0" {
		t.Fatalf("AddVolumeNode = %q, %v", name, err)
	}
	if got := a.GetAttachState(name, "n1"); got != AttachStateAttached {
		t.Errorf("state = %v", got)
	}
	// A freshly attached volume counts as mounted until the node says.
	vols := a.GetAttachedVolumesForNode("n1")
	if len(vols) != 1 || !vols[0].MountedByNode || vols[0].DevicePath != "/dev/sdb" {
		t.Errorf("attached volumes: %+v", vols)
	}
	a.SetVolumesMountedByNode(logger, nil, "n1")
	if a.GetAttachedVolumes()[0].MountedByNode {
		t.Error("node reported nothing in use")
	}

	report := a.GetVolumesToReportAttached(logger)
	if want := []v1.AttachedVolume{{Name: name, DevicePath: "/dev/sdb"}}; len(report["n1"]) != 1 || report["n1"][0] != want[0] {
		t.Errorf("report = %v", report)
	}
	if report := a.GetVolumesToReportAttached(logger); len(report) != 0 {
		t.Errorf("report after reading = %v, want nothing new", report)
	}
	a.SetNodeStatusUpdateNeeded(logger, "n1")
	if ok, vols := a.GetVolumesToReportAttachedForNode(logger, "n1"); !ok || len(vols) != 1 {
		t.Errorf("forced report = %v %v", ok, vols)
	}

	// Uncertain attachments are not reported and do not block others.
	if err := a.MarkVolumeAsUncertain(logger, name, spec, "n2"); err != nil {
		t.Fatal(err)
	}
	if a.GetAttachState(name, "n2") != AttachStateUncertain {
		t.Error("want uncertain")
	}
	if nodes := a.GetNodesForAttachedVolume(name); len(nodes) != 1 || nodes[0] != "n1" {
		t.Errorf("confirmed nodes = %v", nodes)
	}
	if _, ok := a.GetVolumesToReportAttached(logger)["n2"]; ok {
		t.Error("uncertain volume reported")
	}
	if per := a.GetAttachedVolumesPerNode(); len(per) != 1 || len(per["n1"]) != 1 {
		t.Errorf("per node = %v", per)
	}

	// Detach request time is kept until reset.
	first, err := a.SetDetachRequestTime(logger, name, "n1")
	if err != nil || first > time.Second {
		t.Fatalf("SetDetachRequestTime = %v, %v", first, err)
	}
	time.Sleep(10 * time.Millisecond)
	if again, _ := a.SetDetachRequestTime(logger, name, "n1"); again < 10*time.Millisecond {
		t.Errorf("detach request time restarted: %v", again)
	}
	a.ResetDetachRequestTime(logger, name, "n1")
	for _, v := range a.GetAttachedVolumesForNode("n1") {
		if !v.DetachRequestedTime.IsZero() {
			t.Error("detach request time not reset")
		}
	}

	// Removing from the report marks the node for an update; detaching
	// forgets the volume.
	if err := a.RemoveVolumeFromReportAsAttached(name, "n1"); err != nil {
		t.Fatal(err)
	}
	if ok, vols := a.GetVolumesToReportAttachedForNode(logger, "n1"); !ok || len(vols) != 0 {
		t.Errorf("report after removal = %v %v", ok, vols)
	}
	a.AddVolumeToReportAsAttached(logger, name, "n1")
	if ok, vols := a.GetVolumesToReportAttachedForNode(logger, "n1"); !ok || len(vols) != 1 {
		t.Errorf("report after re-adding = %v %v", ok, vols)
	}
	a.MarkVolumeAsDetached(name, "n1")
	if a.GetAttachState(name, "n1") != AttachStateDetached {
		t.Error("want detached")
	}
	if ok, vols := a.GetVolumesToReportAttachedForNode(logger, "n1"); !ok || len(vols) != 0 {
		t.Errorf("report after detach = %v %v", ok, vols)
	}
	// Reporting a volume no longer attached is ignored.
	a.AddVolumeToReportAsAttached(logger, name, "n1")
	if ok, _ := a.GetVolumesToReportAttachedForNode(logger, "n1"); ok {
		t.Error("detached volume reported again")
	}
	if _, err := a.AddVolumeNode(logger, "", nil, "n1", "", true); err == nil {
		t.Error("a nil spec needs a name")
	}
}

func TestReportIsSortedAndKeepsNilSpecs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	a := NewActualStateOfWorld(manager())
	for _, n := range []v1.UniqueVolumeName{"kubernetes.io/csi/d^c", "kubernetes.io/csi/d^a", "kubernetes.io/csi/d^b"} {
		if err := a.MarkVolumeAsAttached(logger, n, nil, "node", ""); err != nil {
			t.Fatal(err)
		}
	}
	got := a.GetVolumesToReportAttached(logger)["node"]
	if len(got) != 3 || got[0].Name != "kubernetes.io/csi/d^a" || got[2].Name != "kubernetes.io/csi/d^c" {
		t.Errorf("report = %v", got)
	}
	if a.GetAttachedVolumes()[0].Spec != nil {
		t.Error("spec must stay nil")
	}
}

func TestMessages(t *testing.T) {
	v := VolumeToAttach{VolumeName: "kubernetes.io/csi/d^h", Spec: plugins.SpecFromPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}}, false), NodeName: "n"}
	if got, want := v.Message("AttachVolume.Attach succeeded", ""), `AttachVolume.Attach succeeded for volume "pv-1" `; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := v.Message("AttachVolume.Attach failed", ErrSuffix(errString("boom"))), `AttachVolume.Attach failed for volume "pv-1" : boom`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	v.Spec = nil
	if got, want := v.Message("x", "y"), `x for volume "nil" y`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
