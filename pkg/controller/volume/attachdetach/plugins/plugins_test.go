package plugins

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func csiPV(name, driver, handle string, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            modes,
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle}},
		},
	}
}

type csiFixture struct {
	client      *fake.Clientset
	drivers     cache.Indexer
	attachments cache.Indexer
	plugin      *CSI
}

func newCSIFixture(objects ...runtime.Object) *csiFixture {
	client := fake.NewClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f := &csiFixture{
		client:      client,
		drivers:     factory.Storage().V1().CSIDrivers().Informer().GetIndexer(),
		attachments: factory.Storage().V1().VolumeAttachments().Informer().GetIndexer(),
	}
	f.plugin = NewCSI(client, factory.Storage().V1().CSIDrivers().Lister(), factory.Storage().V1().VolumeAttachments().Lister())
	f.plugin.SetTimeouts(2*time.Second, 10*time.Millisecond)
	return f
}

func TestAttachmentName(t *testing.T) {
	// printf 'vol-1driver.example.comnode-1' | sha256sum
	want := "csi-5a7c28392c118ae9fba26e6f716c7416b8403b65be3ba37ec7513846f80b9e58"
	if got := AttachmentName("vol-1", "driver.example.com", "node-1"); got != want {
		t.Errorf("AttachmentName = %s, want %s", got, want)
	}
}

func TestCSIVolumeNameAndCanAttach(t *testing.T) {
	f := newCSIFixture()
	_ = f.drivers.Add(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "noattach"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}})
	_ = f.drivers.Add(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "attach"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}})
	_ = f.drivers.Add(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "unset"}})
	m := NewManager(FC{}, ISCSI{}, f.plugin)

	pvSpec := SpecFromPV(csiPV("pv", "missing", "h1"), false)
	name, err := UniqueVolumeName(f.plugin, pvSpec)
	if err != nil || name != "kubernetes.io/csi/missing^h1" {
		t.Errorf("unique name = %q, %v", name, err)
	}
	for driver, want := range map[string]bool{"missing": true, "noattach": false, "attach": true, "unset": true} {
		spec := SpecFromPV(csiPV("pv", driver, "h"), false)
		if got := m.IsAttachable(spec); got != want {
			t.Errorf("driver %s: attachable = %v, want %v", driver, got, want)
		}
		if p, err := m.FindDetachableBySpec(spec); err != nil || p == nil {
			t.Errorf("driver %s: CSI volumes must always be detachable, got %v, %v", driver, p, err)
		}
	}
	inline := SpecFromVolume(&v1.Volume{Name: "eph", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "attach"}}})
	if m.IsAttachable(inline) {
		t.Error("inline CSI volumes are ephemeral and never attached")
	}
	if _, err := f.plugin.VolumeName(inline); err == nil {
		t.Error("inline CSI volume has no attach name")
	}
	if _, err := m.FindBySpec(SpecFromVolume(&v1.Volume{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})); err != ErrNoPluginMatched {
		t.Errorf("emptyDir: got %v, want ErrNoPluginMatched", err)
	}
	if _, err := m.FindBySpec(nil); err == nil {
		t.Error("nil spec must not match")
	}
}

func TestInPlacePlugins(t *testing.T) {
	m := NewManager(FC{}, ISCSI{})
	cases := []struct {
		spec *Spec
		want v1.UniqueVolumeName
	}{
		{SpecFromVolume(&v1.Volume{Name: "i", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "10.0.0.1:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 3}}}),
			"kubernetes.io/iscsi/10.0.0.1:3260:iqn.2001-04.com.example:storage:3"},
		{SpecFromPV(&v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{FC: &v1.FCVolumeSource{TargetWWNs: []string{"500a0981891b8dc5", "500a0981991b8dc5"}, Lun: ptr.To[int32](2)}}}}, false),
			"kubernetes.io/fc/[500a0981891b8dc5 500a0981991b8dc5]:2"},
		{SpecFromVolume(&v1.Volume{Name: "f", VolumeSource: v1.VolumeSource{FC: &v1.FCVolumeSource{WWIDs: []string{"3600508b400105e210000900000490000"}}}}),
			"kubernetes.io/fc/[3600508b400105e210000900000490000]"},
	}
	for _, c := range cases {
		p, err := m.FindAttachableBySpec(c.spec)
		if err != nil || p == nil {
			t.Fatalf("%s: not attachable: %v", c.want, err)
		}
		if got, err := UniqueVolumeName(p, c.spec); err != nil || got != c.want {
			t.Errorf("unique name = %q, %v; want %q", got, err, c.want)
		}
		if path, err := p.Attach(context.Background(), c.spec, "node"); path != "" || err != nil {
			t.Errorf("attach = %q, %v", path, err)
		}
	}
	// An FC source with neither WWNs+LUN nor WWIDs has no usable name.
	empty := SpecFromVolume(&v1.Volume{Name: "f", VolumeSource: v1.VolumeSource{FC: &v1.FCVolumeSource{}}})
	if _, err := UniqueVolumeName(FC{}, empty); err == nil {
		t.Error("empty FC source must not get a unique name")
	}
}

func TestIsMultiAttachAllowed(t *testing.T) {
	cases := map[string]struct {
		spec *Spec
		want bool
	}{
		"nil":       {nil, true},
		"RWO":       {SpecFromPV(csiPV("pv", "d", "h", v1.ReadWriteOnce), false), false},
		"RWOP":      {SpecFromPV(csiPV("pv", "d", "h", v1.ReadWriteOncePod), false), false},
		"RWX":       {SpecFromPV(csiPV("pv", "d", "h", v1.ReadWriteOnce, v1.ReadWriteMany), false), true},
		"ROX":       {SpecFromPV(csiPV("pv", "d", "h", v1.ReadOnlyMany), false), true},
		"no modes":  {SpecFromPV(csiPV("pv", "d", "h"), false), true},
		"inline":    {SpecFromVolume(&v1.Volume{VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{}}}), true},
		"cinder":    {SpecFromVolume(&v1.Volume{VolumeSource: v1.VolumeSource{Cinder: &v1.CinderVolumeSource{}}}), false},
		"azureDisk": {SpecFromVolume(&v1.Volume{VolumeSource: v1.VolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{}}}), false},
	}
	for name, c := range cases {
		if got := IsMultiAttachAllowed(c.spec); got != c.want {
			t.Errorf("%s: got %v, want %v", name, got, c.want)
		}
	}
}

func TestSplitUniqueName(t *testing.T) {
	p, v, err := SplitUniqueName("kubernetes.io/csi/driver^vol/with/slash")
	if err != nil || p != "kubernetes.io/csi" || v != "driver^vol/with/slash" {
		t.Errorf("got %q %q %v", p, v, err)
	}
	if _, _, err := SplitUniqueName("nodomain"); err == nil {
		t.Error("expected an error")
	}
}

func TestCSIAttachCreatesAttachmentAndWaits(t *testing.T) {
	f := newCSIFixture()
	spec := SpecFromPV(csiPV("pv-1", "driver.example.com", "vol-1", v1.ReadWriteOnce), false)
	name := AttachmentName("vol-1", "driver.example.com", "node-1")

	// The external-attacher reports success a little later.
	go func() {
		time.Sleep(50 * time.Millisecond)
		va, err := f.client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("VolumeAttachment not created: %v", err)
			return
		}
		va.Status.Attached = true
		_ = f.attachments.Add(va)
	}()
	path, err := f.plugin.Attach(context.Background(), spec, "node-1")
	if err != nil || path != "" {
		t.Fatalf("Attach = %q, %v", path, err)
	}
	va, err := f.client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if va.Spec.Attacher != "driver.example.com" || va.Spec.NodeName != "node-1" || ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != "pv-1" ||
		va.Spec.Source.InlineVolumeSpec != nil || len(va.Labels) != 0 || len(va.Annotations) != 0 || len(va.Finalizers) != 0 {
		t.Errorf("unexpected VolumeAttachment %+v", va)
	}
}

func TestCSIAttachExistingAndErrors(t *testing.T) {
	spec := SpecFromPV(csiPV("pv-1", "d", "vol-1"), false)
	name := AttachmentName("vol-1", "d", "node-1")

	t.Run("existing attached attachment is not recreated", func(t *testing.T) {
		f := newCSIFixture()
		_ = f.attachments.Add(&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: storagev1.VolumeAttachmentStatus{Attached: true}})
		if _, err := f.plugin.Attach(context.Background(), spec, "node-1"); err != nil {
			t.Fatal(err)
		}
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "create" {
				t.Errorf("unexpected %v", a)
			}
		}
	})
	t.Run("attach error", func(t *testing.T) {
		f := newCSIFixture()
		_ = f.attachments.Add(&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "rpc error: disk busy"}}})
		if _, err := f.plugin.Attach(context.Background(), spec, "node-1"); err == nil || err.Error() != "rpc error: disk busy" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("attachment being deleted", func(t *testing.T) {
		f := newCSIFixture()
		_ = f.attachments.Add(&storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: ptr.To(metav1.Now())}, Status: storagev1.VolumeAttachmentStatus{Attached: true}})
		if _, err := f.plugin.Attach(context.Background(), spec, "node-1"); err == nil || err.Error() != "volume attachment is being deleted" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newCSIFixture()
		f.plugin.SetTimeouts(100*time.Millisecond, 10*time.Millisecond)
		_, err := f.plugin.Attach(context.Background(), spec, "node-1")
		if err == nil || err.Error() != "timed out waiting for external-attacher of d CSI driver to attach volume vol-1" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("create failure", func(t *testing.T) {
		f := newCSIFixture()
		f.client.PrependReactor("create", "volumeattachments", func(core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(storagev1.Resource("volumeattachments"), name, nil)
		})
		_, err := f.plugin.Attach(context.Background(), spec, "node-1")
		if err == nil || !strings.HasPrefix(err.Error(), "kubernetes.io/csi: attacher.Attach failed: ") {
			t.Errorf("got %v", err)
		}
	})
}

func TestCSIDetach(t *testing.T) {
	name := AttachmentName("vol-1", "d", "node-1")
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}}

	f := newCSIFixture(va)
	if err := f.plugin.Detach(context.Background(), "d^vol-1", "node-1"); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if _, err := f.client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("VolumeAttachment not deleted: %v", err)
	}

	// Still in the cache with a detach error: the detach fails.
	f = newCSIFixture(va.DeepCopy())
	failed := va.DeepCopy()
	failed.Status.DetachError = &storagev1.VolumeError{Message: "still published"}
	_ = f.attachments.Add(failed)
	if err := f.plugin.Detach(context.Background(), "d^vol-1", "node-1"); err == nil || err.Error() != "still published" {
		t.Errorf("got %v", err)
	}

	// Already gone is fine; a malformed name is not.
	f = newCSIFixture()
	if err := f.plugin.Detach(context.Background(), "d^vol-1", "node-1"); err != nil {
		t.Errorf("missing VolumeAttachment: %v", err)
	}
	if err := f.plugin.Detach(context.Background(), "no-separator", "node-1"); err == nil {
		t.Error("expected an error for a malformed volume name")
	}
}

func TestCSIVolumesAreAttached(t *testing.T) {
	attached := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: AttachmentName("a", "d", "n")}, Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	onlyInAPI := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: AttachmentName("api", "d", "n")}, Status: storagev1.VolumeAttachmentStatus{Attached: true}}
	f := newCSIFixture(onlyInAPI)
	_ = f.attachments.Add(attached)
	_ = f.drivers.Add(&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "skip"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}})
	specs := map[string]*Spec{
		"a":       SpecFromPV(csiPV("pa", "d", "a"), false),
		"api":     SpecFromPV(csiPV("pb", "d", "api"), false),
		"missing": SpecFromPV(csiPV("pc", "d", "missing"), false),
		"skip":    SpecFromPV(csiPV("pd", "skip", "x"), false),
	}
	var list []*Spec
	for _, s := range specs {
		list = append(list, s)
	}
	got, err := f.plugin.VolumesAreAttached(context.Background(), list, "n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a": true, "api": true, "missing": false, "skip": true}
	for k, s := range specs {
		if got[s] != want[k] {
			t.Errorf("%s: attached = %v, want %v", k, got[s], want[k])
		}
	}
}
