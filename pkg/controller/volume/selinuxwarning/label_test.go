package selinuxwarning

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

func TestOptionsToLabel(t *testing.T) {
	for _, tc := range []struct {
		opts *v1.SELinuxOptions
		want string
	}{
		{nil, ""},
		{&v1.SELinuxOptions{}, ""},
		{&v1.SELinuxOptions{User: "system_u", Role: "system_r", Type: "container_t", Level: "s0:c0,c1"}, "system_u:system_r:container_t:s0:c0,c1"},
		{&v1.SELinuxOptions{Type: "container_t", Level: "s0:c0,c1"}, "::container_t:s0:c0,c1"},
		{&v1.SELinuxOptions{Level: "s0:c0,c1"}, ":::s0:c0,c1"},
	} {
		if got := optionsToLabel(tc.opts); got != tc.want {
			t.Errorf("optionsToLabel(%+v) = %q, want %q", tc.opts, got, tc.want)
		}
	}
}

func TestParseLabel(t *testing.T) {
	if got, want := parseLabel("u:r:t:s0:c1,c2"), (labelParts{"u", "r", "t", "s0:c1,c2"}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := parseLabel("u:r"), (labelParts{"u", "r", "", ""}); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := parseLabel(""); got != (labelParts{}) {
		t.Errorf("got %q", got)
	}
}

func TestLabelsConflict(t *testing.T) {
	for _, tc := range []struct {
		a, b     string
		conflict bool
	}{
		{"", "", false},
		{"u:r:t:s0:c1,c2", "u:r:t:s0:c1,c2", false},
		{"u:r:t:s0:c1,c2", "u:r:t:s0:c98,c99", true},
		{"u:r:t1:s0", "u:r:t2:s0", true},
		{"u1:r:t:s0", "u2:r:t:s0", true},
		// Unset user, role or type is filled by the node: no conflict.
		{"::t:s0", "u:r:t:s0", false},
		{":r:t:s0", "u::t:s0", false},
		{":::s0", "u:r:t:s0", false},
		// An unset level still conflicts with a set one.
		{"u:r:t", "u:r:t:s0", true},
		{"", ":::s0:c1,c2", true},
		{"u:r:t", "u:r", false},
	} {
		if got := labelsConflict(parseLabel(tc.a), parseLabel(tc.b)); got != tc.conflict {
			t.Errorf("labelsConflict(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.conflict)
		}
		if got := labelsConflict(parseLabel(tc.b), parseLabel(tc.a)); got != tc.conflict {
			t.Errorf("labelsConflict(%q, %q) = %v, want %v", tc.b, tc.a, got, tc.conflict)
		}
	}
}

func TestEventMessage(t *testing.T) {
	same := Conflict{PropertyName: "SELinuxLabel", Pod: objName("ns", "pod1"), PropertyValue: "a", OtherPod: objName("ns", "pod2"), OtherPropertyValue: "b"}
	want := `SELinuxLabel "a" conflicts with pod pod2 that uses the same volume as this pod with SELinuxLabel "b". If both pods land on the same node, only one of them may access the volume.`
	if got := same.EventMessage(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	other := same
	other.OtherPod = objName("ns2", "pod2")
	want = `SELinuxLabel"a" conflicts with another pod that uses the same volume as this pod with a different SELinuxLabel. If both pods land on the same node, only one of them may access the volume.`
	if got := other.EventMessage(); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func TestUniqueVolumeName(t *testing.T) {
	inline := func(src v1.VolumeSource) *plugins.Spec {
		return plugins.SpecFromVolume(&v1.Volume{Name: "v", VolumeSource: src})
	}
	pv := func(src v1.PersistentVolumeSource) *plugins.Spec {
		return plugins.SpecFromPV(&v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src}}, false)
	}
	for _, tc := range []struct {
		spec *plugins.Spec
		want v1.UniqueVolumeName
	}{
		{inline(v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "srv", Path: "/exp"}}), "kubernetes.io/nfs/srv//exp"},
		{pv(v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "srv", Path: "/exp"}}), "kubernetes.io/nfs/srv//exp"},
		{inline(v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}), "kubernetes.io/host-path//data"},
		{pv(v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data"}}), "kubernetes.io/host-path//data"},
		{inline(v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{TargetPortal: "p", IQN: "iqn", Lun: 2}}), "kubernetes.io/iscsi/p:iqn:2"},
		{pv(v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}), "kubernetes.io/csi/d^h"},
	} {
		got, err := uniqueVolumeName(pluginFor(tc.spec), tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("got %q, %v; want %q", got, err, tc.want)
		}
	}
	// Inline CSI volumes have no handle to name them by.
	spec := inline(v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d"}})
	if _, err := uniqueVolumeName(pluginFor(spec), spec); err == nil {
		t.Error("inline CSI volume got a name")
	}
}
