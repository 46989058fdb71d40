package attachdetach

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// createBoundInTreePV creates a PV of an in-tree source bound to a claim.
func (e *env) createBoundInTreePV(claim string, labels map[string]string, src v1.PersistentVolumeSource) string {
	e.t.Helper()
	size := resource.MustParse("1Gi")
	pvName := e.name(claim)
	pvc, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).Create(e.ctx, &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: size}},
			VolumeName:       pvName,
			StorageClassName: ptr.To(""),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	pv, err := e.c.CoreV1().PersistentVolumes().Create(e.ctx, &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: labels},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: size},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: src,
			ClaimRef:               &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: e.ns, Name: claim, UID: pvc.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = e.c.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	pv.Status.Phase = v1.VolumeBound
	if _, err := e.c.CoreV1().PersistentVolumes().UpdateStatus(e.ctx, pv, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	pvc.Status = v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, Capacity: v1.ResourceList{v1.ResourceStorage: size}}
	if _, err := e.c.CoreV1().PersistentVolumeClaims(e.ns).UpdateStatus(e.ctx, pvc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return pvName
}

// createPodWithVolumes creates a pod scheduled to node with the volumes.
func (e *env) createPodWithVolumes(name, node string, vols ...v1.Volume) *v1.Pod {
	e.t.Helper()
	pod, err := e.c.CoreV1().Pods(e.ns).Create(e.ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:   node,
			Containers: []v1.Container{{Name: "c", Image: "busybox"}},
			Volumes:    vols,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.deletePod(pod.Name) })
	return pod
}

// TestMigratedInTreeVolumes: a pod on an in-tree GCE PD PV and an inline
// AWS EBS volume, on a node whose CSINode runs both CSI drivers, gets
// VolumeAttachments named and shaped as upstream's (PV name for the PV,
// the translated PV spec for the inline volume); node status lists the
// CSI names; the attachments go with the pod.
func TestMigratedInTreeVolumes(t *testing.T) {
	e := newEnv(t, "ad-migrated")
	e.startController(testTimers, false)
	node := e.name("node")
	e.createNode(node, true)
	csiNode, err := e.c.StorageV1().CSINodes().Create(e.ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node, Annotations: map[string]string{v1.MigratedPluginsAnnotationKey: "kubernetes.io/aws-ebs,kubernetes.io/gce-pd"}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", NodeID: "i-0123"},
			{Name: "pd.csi.storage.gke.io", NodeID: "projects/p/zones/us-central1-a/instances/" + node},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.c.StorageV1().CSINodes().Delete(context.Background(), csiNode.Name, metav1.DeleteOptions{})
	})

	pdName := e.name("disk")
	pvName := e.createBoundInTreePV("gce", map[string]string{v1.LabelTopologyZone: "us-central1-a"},
		v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: pdName, FSType: "ext4"}})
	ebsID := fmt.Sprintf("vol-%x", sha256.Sum256([]byte(e.prefix)))[:21]
	pod := e.createPodWithVolumes("pod", node,
		v1.Volume{Name: "gce", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "gce"}}},
		v1.Volume{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/" + ebsID, FSType: "xfs"}}},
	)

	gce := volume{pv: pvName, driver: "pd.csi.storage.gke.io", handle: "projects/UNSPECIFIED/zones/us-central1-a/disks/" + pdName}
	ebs := volume{driver: "ebs.csi.aws.com", handle: ebsID}
	gceVA := e.waitForAttachment(gce, node)
	ebsVA := e.waitForAttachment(ebs, node)
	if gceVA.Spec.Attacher != gce.driver || gceVA.Spec.NodeName != node ||
		ptr.Deref(gceVA.Spec.Source.PersistentVolumeName, "") != pvName || gceVA.Spec.Source.InlineVolumeSpec != nil {
		t.Errorf("GCE PD VolumeAttachment spec %+v", gceVA.Spec)
	}
	inline := ebsVA.Spec.Source.InlineVolumeSpec
	if ebsVA.Spec.Attacher != ebs.driver || ebsVA.Spec.NodeName != node || ebsVA.Spec.Source.PersistentVolumeName != nil || inline == nil {
		t.Fatalf("EBS VolumeAttachment spec %+v", ebsVA.Spec)
	}
	if inline.CSI == nil || inline.CSI.Driver != ebs.driver || inline.CSI.VolumeHandle != ebsID || inline.CSI.FSType != "xfs" ||
		inline.CSI.VolumeAttributes["partition"] != "0" || !slices.Equal(inline.AccessModes, []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}) ||
		ptr.Deref(inline.VolumeMode, "") != v1.PersistentVolumeFilesystem {
		t.Errorf("EBS inline spec %+v", inline)
	}
	e.markAttached(gceVA)
	e.markAttached(ebsVA)
	e.waitForVolumesAttached(node, gce.uniqueName(), ebs.uniqueName())
	e.waitForEvent(pod, v1.EventTypeNormal, "SuccessfulAttachVolume", fmt.Sprintf("AttachVolume.Attach succeeded for volume %q ", "ebs.csi.aws.com-"+ebsID))

	e.deletePod(pod.Name)
	e.waitForAttachmentGone(gceVA.Name)
	e.waitForAttachmentGone(ebsVA.Name)
	e.waitForVolumesAttached(node)
}

// flexScript is a FlexVolume driver that appends each call (command and
// arguments, tab-separated) to a log and attaches everything as
// /dev/fake0.
const flexScript = `#!/bin/sh
cmd="$1"
{ printf '%%s' "$1"; shift; for a in "$@"; do printf '\t%%s' "$a"; done; echo; } >> %q
case "$cmd" in
init) echo '{"status":"Success","capabilities":{"attach":true}}';;
attach) echo '{"status":"Success","device":"/dev/fake0"}';;
isattached) echo '{"status":"Success","attached":true}';;
detach) echo '{"status":"Success"}';;
*) echo '{"status":"Not supported"}'; exit 1;;
esac
`

// TestFlexVolume: a driver in the flex volume plugin directory is called
// to attach a pod's FlexVolume to its node, the device it returns is
// published in node status, and the driver detaches the volume once the
// pod is gone.
func TestFlexVolume(t *testing.T) {
	e := newEnv(t, "ad-flex")
	e.flexDir = filepath.Join(t.TempDir(), "exec")
	callLog := filepath.Join(t.TempDir(), "calls")
	driverDir := filepath.Join(e.flexDir, "example.com~fake")
	if err := os.MkdirAll(driverDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(driverDir, "fake"), []byte(fmt.Sprintf(flexScript, callLog)), 0o755); err != nil {
		t.Fatal(err)
	}
	e.startController(testTimers, false)
	node := e.name("node")
	e.createNode(node, true)
	pod := e.createPodWithVolumes("pod", node, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{FlexVolume: &v1.FlexVolumeSource{
		Driver: "example.com/fake", FSType: "ext4", Options: map[string]string{"volumeID": "v-1"},
	}}})

	const unique = v1.UniqueVolumeName("example.com/fake/data")
	framework.Eventually(t, waitTimeout, "flex volume in node status", func(ctx context.Context) (bool, error) {
		n, err := e.c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.Equal(n.Status.VolumesAttached, []v1.AttachedVolume{{Name: unique, DevicePath: "/dev/fake0"}}), nil
	})
	attach := e.flexCalls(callLog, "attach")
	if len(attach) == 0 || len(attach[0]) != 3 || attach[0][2] != node ||
		!strings.Contains(attach[0][1], `"volumeID":"v-1"`) || !strings.Contains(attach[0][1], `"kubernetes.io/pvOrVolumeName":"data"`) {
		t.Errorf("attach calls %q", attach)
	}
	e.waitForEvent(pod, v1.EventTypeNormal, "SuccessfulAttachVolume", `AttachVolume.Attach succeeded for volume "data" `)

	e.deletePod(pod.Name)
	framework.Eventually(t, waitTimeout, "driver detach call", func(context.Context) (bool, error) {
		for _, c := range e.flexCalls(callLog, "detach") {
			if slices.Equal(c, []string{"detach", "data", node}) {
				return true, nil
			}
		}
		return false, nil
	})
	e.waitForVolumesAttached(node)
}

// flexCalls returns the logged driver calls of cmd, split into arguments.
func (e *env) flexCalls(log, cmd string) [][]string {
	e.t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		e.t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if args := strings.Split(line, "\t"); args[0] == cmd {
			out = append(out, args)
		}
	}
	return out
}
