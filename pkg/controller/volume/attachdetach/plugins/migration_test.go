package plugins

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

func gcePDPV(name, pdName, zone string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: pdName, FSType: "ext4"}},
		},
	}
}

func TestTranslateInTreeSpecs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	m := NewManager(FC{}, ISCSI{}, newCSIFixture().plugin)

	cases := map[string]struct {
		spec       *Spec
		unique     v1.UniqueVolumeName
		inline     bool
		inTreeName string
	}{
		"GCE PD PV": {
			spec:       SpecFromPV(gcePDPV("pv-gce", "disk-1", "us-central1-a"), true),
			unique:     "kubernetes.io/csi/pd.csi.storage.gke.io^projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1",
			inTreeName: "kubernetes.io/gce-pd",
		},
		"inline AWS EBS": {
			spec:       SpecFromVolume(&v1.Volume{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-east-1a/vol-0123456789abcdef0"}}}),
			unique:     "kubernetes.io/csi/ebs.csi.aws.com^vol-0123456789abcdef0",
			inline:     true,
			inTreeName: "kubernetes.io/aws-ebs",
		},
		"inline Azure Disk": {
			spec:       SpecFromVolume(&v1.Volume{Name: "az", VolumeSource: v1.VolumeSource{AzureDisk: &v1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/disks/d"}}}),
			unique:     "kubernetes.io/csi/disk.csi.azure.com^/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/disks/d",
			inline:     true,
			inTreeName: "kubernetes.io/azure-disk",
		},
		"Cinder PV": {
			spec:       SpecFromPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-cinder"}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{Cinder: &v1.CinderPersistentVolumeSource{VolumeID: "c-1"}}}}, false),
			unique:     "kubernetes.io/csi/cinder.csi.openstack.org^c-1",
			inTreeName: "kubernetes.io/cinder",
		},
		"vSphere PV": {
			spec:       SpecFromPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-vs"}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{VsphereVolume: &v1.VsphereVirtualDiskVolumeSource{VolumePath: "[ds] vol.vmdk"}}}}, false),
			unique:     "kubernetes.io/csi/csi.vsphere.vmware.com^[ds] vol.vmdk",
			inTreeName: "kubernetes.io/vsphere-volume",
		},
		"Portworx PV": {
			spec:       SpecFromPV(&v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-px"}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{PortworxVolume: &v1.PortworxVolumeSource{VolumeID: "px-1"}}}}, false),
			unique:     "kubernetes.io/csi/pxd.portworx.com^px-1",
			inTreeName: "kubernetes.io/portworx-volume",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := InTreePluginName(c.spec); got != c.inTreeName {
				t.Errorf("in-tree plugin = %q, want %q", got, c.inTreeName)
			}
			// Not attachable as they are: no plugin handles in-tree sources.
			if m.IsAttachable(c.spec) {
				t.Fatal("untranslated in-tree spec must not be attachable")
			}
			out, err := TranslateIfMigratable(logger, c.spec, "ns")
			if err != nil {
				t.Fatal(err)
			}
			if !out.Migrated || out.InlineVolumeSpecForCSIMigration != c.inline || out.Volume != nil || out.ReadOnly != c.spec.ReadOnly {
				t.Errorf("translated spec flags: %+v", out)
			}
			p, err := m.FindAttachableBySpec(out)
			if err != nil || p == nil || p.Name() != CSIPluginName {
				t.Fatalf("translated spec not attachable by CSI: %v, %v", p, err)
			}
			if got, err := UniqueVolumeName(p, out); err != nil || got != c.unique {
				t.Errorf("unique name = %q, %v; want %q", got, err, c.unique)
			}
		})
	}

	// CSI and other sources are left alone.
	csi := SpecFromPV(csiPV("pv", "d", "h"), false)
	if out, err := TranslateIfMigratable(logger, csi, "ns"); err != nil || out != csi || out.Migrated {
		t.Errorf("CSI spec changed: %+v, %v", out, err)
	}
	if _, err := TranslateIfMigratable(logger, nil, "ns"); err == nil {
		t.Error("nil spec must fail")
	}
	// A source the library cannot translate fails.
	bad := SpecFromVolume(&v1.Volume{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://a/b/c"}}})
	if _, err := TranslateIfMigratable(logger, bad, "ns"); err == nil {
		t.Error("untranslatable EBS ID must fail")
	}
}

// An inline volume has no PV: its attachment carries the translated PV
// spec; a PV's attachment names the PV.
func TestCSIAttachMigratedSources(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	inline := SpecFromVolume(&v1.Volume{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-1", FSType: "xfs"}}})
	pv := SpecFromPV(gcePDPV("pv-gce", "disk-1", "us-central1-a"), false)
	for name, c := range map[string]struct {
		spec           *Spec
		driver, handle string
	}{
		"inline": {inline, "ebs.csi.aws.com", "vol-1"},
		"pv":     {pv, "pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCSIFixture()
			f.plugin.SetTimeouts(50*time.Millisecond, 10*time.Millisecond)
			spec, err := TranslateIfMigratable(logger, c.spec, "ns")
			if err != nil {
				t.Fatal(err)
			}
			// Times out (nobody plays the external-attacher): only the
			// created object matters here.
			_, _ = f.plugin.Attach(ctx, spec, "node-1")
			va, err := f.client.StorageV1().VolumeAttachments().Get(ctx, AttachmentName(c.handle, c.driver, "node-1"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if va.Spec.Attacher != c.driver || va.Spec.NodeName != "node-1" {
				t.Errorf("attacher/node = %s/%s", va.Spec.Attacher, va.Spec.NodeName)
			}
			src := va.Spec.Source
			if spec.InlineVolumeSpecForCSIMigration {
				if src.PersistentVolumeName != nil || src.InlineVolumeSpec == nil {
					t.Fatalf("inline source = %+v", src)
				}
				got := src.InlineVolumeSpec
				if got.CSI == nil || got.CSI.Driver != c.driver || got.CSI.VolumeHandle != c.handle || got.CSI.FSType != "xfs" ||
					got.CSI.VolumeAttributes["partition"] != "0" ||
					len(got.AccessModes) != 1 || got.AccessModes[0] != v1.ReadWriteOnce ||
					ptr.Deref(got.VolumeMode, "") != v1.PersistentVolumeFilesystem {
					t.Errorf("inline spec = %+v", got)
				}
			} else if ptr.Deref(src.PersistentVolumeName, "") != "pv-gce" || src.InlineVolumeSpec != nil {
				t.Errorf("PV source = %+v", src)
			}
		})
	}
}
