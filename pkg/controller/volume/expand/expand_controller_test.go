package expand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

const (
	ns      = "ns"
	pvcName = "claim"
	pvName  = "vol"
	pvcUID  = "claim-uid"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

// newPVC is a PVC bound to pvName, requesting req with capacity cap.
func newPVC(req, capacity string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pvcName, UID: pvcUID, ResourceVersion: "7"},
		Spec: v1.PersistentVolumeClaimSpec{
			VolumeName: pvName,
			Resources:  v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: q(req)}},
		},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:    v1.ClaimBound,
			Capacity: v1.ResourceList{v1.ResourceStorage: q(capacity)},
		},
	}
}

// newPV is a PV of size capacity with source src, bound to newPVC.
func newPV(capacity string, src v1.PersistentVolumeSource) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: q(capacity)},
			PersistentVolumeSource: src,
			ClaimRef:               &v1.ObjectReference{Namespace: ns, Name: pvcName, UID: pvcUID},
		},
	}
}

var (
	csiSource  = v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "h"}}
	flexSource = v1.PersistentVolumeSource{FlexVolume: &v1.FlexPersistentVolumeSource{Driver: "example.com/flex"}}
	gceSource  = v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "pd"}}
)

type fixture struct {
	t        *testing.T
	expc     *Controller
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) *fixture {
	t.Helper()
	var objs []runtime.Object
	if pvc != nil {
		objs = append(objs, pvc)
	}
	if pv != nil {
		objs = append(objs, pv)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcInformer := factory.Core().V1().PersistentVolumeClaims()
	expc, err := NewController(context.Background(), client, pvcInformer)
	if err != nil {
		t.Fatal(err)
	}
	if pvc != nil {
		if err := pvcInformer.Informer().GetIndexer().Add(pvc); err != nil {
			t.Fatal(err)
		}
	}
	recorder := record.NewFakeRecorder(100)
	expc.recorder = recorder
	client.ClearActions()
	return &fixture{t: t, expc: expc, client: client, recorder: recorder}
}

func (f *fixture) sync() error {
	return f.expc.syncHandler(context.Background(), ns+"/"+pvcName)
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

// writes are the client's create/update/patch/delete actions.
func (f *fixture) writes() []core.Action {
	var out []core.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) pvc() *v1.PersistentVolumeClaim {
	f.t.Helper()
	pvc, err := f.client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), pvcName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pvc
}

func (f *fixture) pv() *v1.PersistentVolume {
	f.t.Helper()
	pv, err := f.client.CoreV1().PersistentVolumes().Get(context.Background(), pvName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return pv
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events = %q, want %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}

func TestEventHandlers(t *testing.T) {
	f := newFixture(t, nil, nil)
	unbound := newPVC("2Gi", "1Gi")
	unbound.Status.Phase = v1.ClaimPending
	bound := newPVC("1Gi", "1Gi")
	grown := newPVC("2Gi", "1Gi")
	capGrown := newPVC("2Gi", "2Gi")
	shrunk := newPVC("512Mi", "1Gi")

	tests := []struct {
		name string
		do   func()
		want int
	}{
		{"add bound", func() { f.expc.enqueuePVC(bound) }, 1},
		{"add unbound", func() { f.expc.enqueuePVC(unbound) }, 0},
		{"add tombstone ignored", func() { f.expc.enqueuePVC(struct{}{}) }, 0},
		{"update request grew", func() { f.expc.updatePVC(bound, grown) }, 1},
		{"update capacity grew", func() { f.expc.updatePVC(grown, capGrown) }, 1},
		{"update request shrank", func() { f.expc.updatePVC(bound, shrunk) }, 0},
		{"update no size change", func() { f.expc.updatePVC(bound, bound.DeepCopy()) }, 0},
		{"update grew but unbound", func() {
			u := unbound.DeepCopy()
			u.Spec.Resources.Requests[v1.ResourceStorage] = q("5Gi")
			f.expc.updatePVC(unbound, u)
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.do()
			if got := f.expc.queue.Len(); got != tc.want {
				t.Errorf("queue length = %d, want %d", got, tc.want)
			}
			for f.expc.queue.Len() > 0 {
				k, _ := f.expc.queue.Get()
				if k != ns+"/"+pvcName {
					t.Errorf("key = %q", k)
				}
				f.expc.queue.Done(k)
				f.expc.queue.Forget(k)
			}
		})
	}
}

func TestSyncNothingToDo(t *testing.T) {
	tests := []struct {
		name string
		pvc  *v1.PersistentVolumeClaim
		pv   *v1.PersistentVolume
	}{
		{"pvc gone", nil, newPV("1Gi", csiSource)},
		{"not grown", newPVC("1Gi", "1Gi"), newPV("1Gi", csiSource)},
		{"shrunk", newPVC("512Mi", "1Gi"), newPV("1Gi", gceSource)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.pvc, tc.pv)
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			wantEvents(t, f.events())
			if w := f.writes(); len(w) != 0 {
				t.Errorf("writes = %v", w)
			}
		})
	}
}

func TestSyncPVErrors(t *testing.T) {
	t.Run("pv missing", func(t *testing.T) {
		f := newFixture(t, newPVC("2Gi", "1Gi"), nil)
		err := f.sync()
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `failed to get PV "vol"`) {
			t.Errorf("err = %v", err)
		}
	})
	for name, ref := range map[string]*v1.ObjectReference{
		"no claimRef":     nil,
		"other namespace": {Namespace: "other", Name: pvcName, UID: pvcUID},
		"other claim UID": {Namespace: ns, Name: pvcName, UID: "other"},
	} {
		t.Run(name, func(t *testing.T) {
			pv := newPV("1Gi", gceSource)
			pv.Spec.ClaimRef = ref
			f := newFixture(t, newPVC("2Gi", "1Gi"), pv)
			err := f.sync()
			if err == nil || err.Error() != "persistent Volume is not bound to PVC being updated : ns/claim" {
				t.Errorf("err = %v", err)
			}
			wantEvents(t, f.events())
		})
	}
}

func TestSyncCSIWaitsForExternalResizer(t *testing.T) {
	t.Run("request grew", func(t *testing.T) {
		f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", csiSource))
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		wantEvents(t, f.events(), "Normal ExternalExpanding waiting for an external controller to expand this PVC")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("CSI PVC must not be written: %v", w)
		}
	})
	t.Run("pre-resize annotation", func(t *testing.T) {
		pv := newPV("2Gi", csiSource)
		pv.Annotations = map[string]string{AnnPreResizeCapacity: "1Gi"}
		f := newFixture(t, newPVC("2Gi", "2Gi"), pv)
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		wantEvents(t, f.events(), "Normal ExternalExpanding waiting for an external controller to expand this PVC")
	})
}

func TestSyncMigratedPlugins(t *testing.T) {
	tests := []struct {
		src    v1.PersistentVolumeSource
		plugin string
		driver string
	}{
		{gceSource, "kubernetes.io/gce-pd", "pd.csi.storage.gke.io"},
		{v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "v"}}, "kubernetes.io/aws-ebs", "ebs.csi.aws.com"},
		{v1.PersistentVolumeSource{Cinder: &v1.CinderPersistentVolumeSource{VolumeID: "v"}}, "kubernetes.io/cinder", "cinder.csi.openstack.org"},
		{v1.PersistentVolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}}, "kubernetes.io/azure-disk", "disk.csi.azure.com"},
		{v1.PersistentVolumeSource{AzureFile: &v1.AzureFilePersistentVolumeSource{SecretName: "s", ShareName: "sh"}}, "kubernetes.io/azure-file", "file.csi.azure.com"},
		{v1.PersistentVolumeSource{VsphereVolume: &v1.VsphereVirtualDiskVolumeSource{VolumePath: "p"}}, "kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"},
		{v1.PersistentVolumeSource{PortworxVolume: &v1.PortworxVolumeSource{VolumeID: "v"}}, "kubernetes.io/portworx-volume", "pxd.portworx.com"},
	}
	for _, tc := range tests {
		t.Run(tc.plugin, func(t *testing.T) {
			f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", tc.src))
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			wantEvents(t, f.events(), fmt.Sprintf("Normal ExternalExpanding CSI migration enabled for %s; waiting for external resizer to expand the pvc", tc.plugin))
			w := f.writes()
			if len(w) != 1 {
				t.Fatalf("writes = %v, want one PVC status patch", w)
			}
			p := w[0].(core.PatchAction)
			if p.GetResource().Resource != "persistentvolumeclaims" || p.GetSubresource() != "status" {
				t.Errorf("patched %s/%s", p.GetResource().Resource, p.GetSubresource())
			}
			var patch struct {
				Metadata struct {
					ResourceVersion string            `json:"resourceVersion"`
					Annotations     map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(p.GetPatch(), &patch); err != nil {
				t.Fatal(err)
			}
			if patch.Metadata.ResourceVersion != "7" {
				t.Errorf("patch lacks the resourceVersion precondition: %s", p.GetPatch())
			}
			if got := f.pvc().Annotations[VolumeResizerKey]; got != tc.driver {
				t.Errorf("resizer annotation = %q, want %q", got, tc.driver)
			}
		})
	}
}

func TestSyncMigratedFailures(t *testing.T) {
	t.Run("patch fails", func(t *testing.T) {
		f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", gceSource))
		f.client.PrependReactor("patch", "persistentvolumeclaims", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("boom")
		})
		err := f.sync()
		want := `error setting resizer annotation to pvc ns/claim, with error patchPVCStatus failed to patch PVC "claim": boom`
		if err == nil || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
		wantEvents(t, f.events(),
			"Normal ExternalExpanding CSI migration enabled for kubernetes.io/gce-pd",
			"Warning ExternalExpanding "+want)
	})
	t.Run("no CSI driver name", func(t *testing.T) {
		f := newFixture(t, newPVC("2Gi", "1Gi"), newPV("1Gi", gceSource))
		f.expc.translator = failingTranslator{}
		err := f.sync()
		want := "error getting CSI driver name for pvc ns/claim, with error nope"
		if err == nil || err.Error() != want {
			t.Errorf("err = %v, want %s", err, want)
		}
		wantEvents(t, f.events(),
			"Normal ExternalExpanding CSI migration enabled for kubernetes.io/gce-pd",
			"Warning ExternalExpanding "+want)
		if w := f.writes(); len(w) != 0 {
			t.Errorf("writes = %v", w)
		}
	})
}

type failingTranslator struct{}

func (failingTranslator) GetCSINameFromInTreeName(string) (string, error) {
	return "", errors.New("nope")
}

func TestTranslatorUnknownPlugin(t *testing.T) {
	if _, err := (inTreeTranslator{}).GetCSINameFromInTreeName("kubernetes.io/nfs"); err == nil {
		t.Error("want error for a plugin without CSI migration")
	}
	if got := inTreePluginNameForPV(newPV("1Gi", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}})); got != "" {
		t.Errorf("NFS PV mapped to %q", got)
	}
}
