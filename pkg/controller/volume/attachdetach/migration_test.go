package attachdetach

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/operationmetrics"
)

const (
	gceHandle = "projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1"
	gceName   = v1.UniqueVolumeName("kubernetes.io/csi/pd.csi.storage.gke.io^" + gceHandle)
	ebsName   = v1.UniqueVolumeName("kubernetes.io/csi/ebs.csi.aws.com^vol-0123")
)

// boundGCEPD is a claim bound to an in-tree GCE PD PV in us-central1-a.
func boundGCEPD(ns, claim string) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc, pv := boundCSI(ns, claim, "gce")
	pv.Labels = map[string]string{v1.LabelTopologyZone: "us-central1-a"}
	pv.Spec.CSI = nil
	pv.Spec.GCEPersistentDisk = &v1.GCEPersistentDiskVolumeSource{PDName: "disk-1"}
	return pvc, pv
}

func inlineEBSPod(ns, name, nodeName string, claims ...string) *v1.Pod {
	p := claimPod(ns, name, nodeName, claims...)
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "ebs", VolumeSource: v1.VolumeSource{
		AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-0123"},
	}})
	return p
}

// TestMigratedVolumesAttachThroughCSI: an in-tree GCE PD PV and an inline
// AWS EBS volume are attached by their CSI drivers, with no CSINode on the
// node (migration is complete for both), and detached when the pod goes.
func TestMigratedVolumesAttachThroughCSI(t *testing.T) {
	pvc, pv := boundGCEPD("ns", "c")
	pod := inlineEBSPod("ns", "p", "n", "c")
	f := newFixture(t, false, node("n", true), pvc, pv, pod)
	f.adc.nodeAdd(f.logger, node("n", true))
	f.adc.podAdd(f.logger, pod)
	if !f.adc.dsw.VolumeExists(gceName, "n") || !f.adc.dsw.VolumeExists(ebsName, "n") {
		t.Fatalf("desired: %+v", f.adc.dsw.GetVolumesToAttach())
	}
	f.client.PrependReactor("create", "volumeattachments", func(a core.Action) (bool, runtime.Object, error) {
		va := a.(core.CreateAction).GetObject().(*storagev1.VolumeAttachment).DeepCopy()
		va.Status.Attached = true
		f.cache(va)
		return false, nil, nil
	})
	f.client.PrependReactor("delete", "volumeattachments", func(a core.Action) (bool, runtime.Object, error) {
		name := a.(core.DeleteAction).GetName()
		_ = f.factory.Storage().V1().VolumeAttachments().Informer().GetIndexer().Delete(&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return false, nil, nil
	})
	attachOK := operationmetrics.StorageOperationDuration.WithLabelValues("kubernetes.io/csi:ebs.csi.aws.com", "volume_attach", "success", "true")
	before, _ := testutil.GetHistogramMetricCount(attachOK)

	f.reconcileUntil(func() bool {
		n, err := f.client.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
		return err == nil && len(n.Status.VolumesAttached) == 2
	})
	for _, name := range []v1.UniqueVolumeName{gceName, ebsName} {
		if f.adc.asw.GetAttachState(name, "n") != cache.AttachStateAttached {
			t.Fatalf("%s not attached", name)
		}
	}
	gceVA, err := f.client.StorageV1().VolumeAttachments().Get(f.ctx, plugins.AttachmentName(gceHandle, "pd.csi.storage.gke.io", "n"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gceVA.Spec.Attacher != "pd.csi.storage.gke.io" || ptr.Deref(gceVA.Spec.Source.PersistentVolumeName, "") != pv.Name || gceVA.Spec.Source.InlineVolumeSpec != nil {
		t.Errorf("GCE PD attachment: %+v", gceVA.Spec)
	}
	ebsVA, err := f.client.StorageV1().VolumeAttachments().Get(f.ctx, plugins.AttachmentName("vol-0123", "ebs.csi.aws.com", "n"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ebsVA.Spec.Attacher != "ebs.csi.aws.com" || ebsVA.Spec.Source.PersistentVolumeName != nil ||
		ebsVA.Spec.Source.InlineVolumeSpec == nil || ebsVA.Spec.Source.InlineVolumeSpec.CSI.VolumeHandle != "vol-0123" {
		t.Errorf("EBS attachment: %+v", ebsVA.Spec)
	}
	got, err := f.client.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, av := range got.Status.VolumesAttached {
		names = append(names, string(av.Name))
	}
	slices.Sort(names)
	if want := []string{string(ebsName), string(gceName)}; !slices.Equal(names, want) {
		t.Errorf("volumesAttached = %v, want %v", names, want)
	}
	// Events name the PV, and the translated PV for inline volumes.
	evs := f.events()
	slices.Sort(evs)
	want := []string{
		`Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "ebs.csi.aws.com-vol-0123" `,
		`Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "pv-gce" `,
	}
	if !slices.Equal(evs, want) {
		t.Errorf("events = %q", evs)
	}
	if after, _ := testutil.GetHistogramMetricCount(attachOK); after != before+1 {
		t.Errorf("migrated attach not counted with migrated=\"true\": %d -> %d", before, after)
	}

	f.adc.podDelete(f.logger, pod)
	// The kubelet reports nothing in use.
	f.adc.nodeUpdate(f.logger, node("n", true))
	f.reconcileUntil(func() bool { return len(f.adc.asw.GetAttachedVolumes()) == 0 })
	for _, va := range []*storagev1.VolumeAttachment{gceVA, ebsVA} {
		if _, err := f.client.StorageV1().VolumeAttachments().Get(f.ctx, va.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("VolumeAttachment %s not deleted: %v", va.Name, err)
		}
	}
	if vols := f.adc.asw.GetAttachedVolumes(); len(vols) != 0 {
		t.Errorf("still attached: %+v", vols)
	}
}

// reconcileUntil runs reconcile passes until cond holds (or the test
// times out).
func (f *fixture) reconcileUntil(cond func() bool) {
	f.t.Helper()
	for !cond() {
		f.reconcileFor(20 * time.Millisecond)
	}
}

// TestStartupMigratedAttachment: a VolumeAttachment of an in-tree PV that
// node status does not list is found again under the CSI name.
func TestStartupMigratedAttachment(t *testing.T) {
	_, pv := boundGCEPD("ns", "c")
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.AttachmentName(gceHandle, "pd.csi.storage.gke.io", "n")},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "pd.csi.storage.gke.io", NodeName: "n", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv.Name)}},
	}
	// Even with a driver that no longer requires attach, it is tracked so
	// that it can be detached.
	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "pd.csi.storage.gke.io"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}
	f := newFixture(t, false, node("n", true), pv, va, driver)
	if err := f.adc.populateActualStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	if st := f.adc.asw.GetAttachState(gceName, "n"); st != cache.AttachStateUncertain {
		t.Fatalf("state = %v", st)
	}
	vols := f.adc.asw.GetAttachedVolumes()
	if len(vols) != 1 || vols[0].Spec == nil || !vols[0].Spec.Migrated || vols[0].Spec.PersistentVolume.Spec.CSI == nil {
		t.Errorf("attached: %+v", vols)
	}
}

// installFlexDriver writes a FlexVolume driver script that logs its calls
// (command and arguments, tab-separated) to callLog and answers init with
// the attach capability and every other command with success.
func installFlexDriver(t *testing.T, pluginDir, callLog string) {
	t.Helper()
	dir := filepath.Join(pluginDir, "example.com~fake")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
cmd="$1"
{ printf '%%s' "$1"; shift; for a in "$@"; do printf '\t%%s' "$a"; done; echo; } >> %q
case "$cmd" in
init) echo '{"status":"Success","capabilities":{"attach":true}}';;
attach) echo '{"status":"Success","device":"/dev/fake0"}';;
isattached) echo '{"status":"Success","attached":true}';;
detach) echo '{"status":"Success"}';;
*) echo '{"status":"Not supported"}'; exit 1;;
esac
`, callLog)
	if err := os.WriteFile(filepath.Join(dir, "fake"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestFlexVolumeAttachDetach(t *testing.T) {
	pluginDir, callLog := t.TempDir(), filepath.Join(t.TempDir(), "calls")
	installFlexDriver(t, pluginDir, callLog)
	pod := claimPod("ns", "p", "n")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{FlexVolume: &v1.FlexVolumeSource{Driver: "example.com/fake", Options: map[string]string{"id": "1"}}}}}
	f := newFixture(t, false, node("n", true), pod)
	prober, err := plugins.NewFlexProber(f.logger, pluginDir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.adc.plugins.SetProber(f.logger, prober)
	f.adc.nodeAdd(f.logger, node("n", true))
	f.adc.podAdd(f.logger, pod)
	const name = v1.UniqueVolumeName("example.com/fake/data")
	if !f.adc.dsw.VolumeExists(name, "n") {
		t.Fatalf("desired: %+v", f.adc.dsw.GetVolumesToAttach())
	}
	f.reconcileUntil(func() bool {
		n, err := f.client.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
		return err == nil && len(n.Status.VolumesAttached) == 1
	})
	got, err := f.client.CoreV1().Nodes().Get(f.ctx, "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (v1.AttachedVolume{Name: name, DevicePath: "/dev/fake0"}); len(got.Status.VolumesAttached) != 1 || got.Status.VolumesAttached[0] != want {
		t.Errorf("volumesAttached = %v, want %v", got.Status.VolumesAttached, want)
	}

	f.adc.podDelete(f.logger, pod)
	// The kubelet reports nothing in use.
	f.adc.nodeUpdate(f.logger, node("n", true))
	f.reconcileUntil(func() bool { return len(f.adc.asw.GetAttachedVolumes()) == 0 })
	if st := f.adc.asw.GetAttachState(name, "n"); st != cache.AttachStateDetached {
		t.Errorf("state after pod deletion = %v", st)
	}
	b, err := os.ReadFile(callLog)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		args := strings.Split(line, "\t")
		switch args[0] {
		case "attach":
			if len(args) != 3 || args[2] != "n" || !strings.Contains(args[1], `"id":"1"`) {
				t.Errorf("attach call %q", args)
			}
		case "detach":
			if len(args) != 3 || args[1] != "data" || args[2] != "n" {
				t.Errorf("detach call %q", args)
			}
		}
		if !slices.Contains(cmds, args[0]) {
			cmds = append(cmds, args[0])
		}
	}
	if want := []string{"init", "getvolumename", "attach", "detach"}; !slices.Equal(cmds, want) {
		t.Errorf("commands = %v, want %v", cmds, want)
	}
}
