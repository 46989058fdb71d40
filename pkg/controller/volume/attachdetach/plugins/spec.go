// Package plugins holds the volume plugins the attach/detach controller can
// attach with: CSI (through VolumeAttachment objects handled by the
// driver's external-attacher), the iSCSI and Fibre Channel plugins, whose
// controller-side attach is a no-op but which kubelets still expect to see
// in node.status.volumesAttached, and FlexVolume drivers found in the flex
// volume plugin directory. In-tree sources with a CSI driver (GCE PD, AWS
// EBS, ...) are translated to CSI first (see migration.go).
package plugins

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Spec is the volume a pod needs: either a PersistentVolume reached through
// a claim, or a volume source inlined in the pod.
type Spec struct {
	PersistentVolume *v1.PersistentVolume
	Volume           *v1.Volume
	// ReadOnly is the claim reference's readOnly flag (PV specs only).
	ReadOnly bool
	// Migrated: PersistentVolume is the CSI translation of an in-tree
	// source.
	Migrated bool
	// InlineVolumeSpecForCSIMigration: the translated source was a pod's
	// inline volume, so no PV object exists; the VolumeAttachment carries
	// the translated PV spec instead of a PV name.
	InlineVolumeSpecForCSIMigration bool
}

// SpecFromPV wraps a PV. The caller must not share pv with an informer.
func SpecFromPV(pv *v1.PersistentVolume, readOnly bool) *Spec {
	return &Spec{PersistentVolume: pv, ReadOnly: readOnly}
}

// SpecFromVolume wraps a pod's inline volume.
func SpecFromVolume(vol *v1.Volume) *Spec {
	return &Spec{Volume: vol}
}

// Name is the PV name, or the pod volume's name for inline volumes. Events
// and messages name volumes by it.
func (s *Spec) Name() string {
	switch {
	case s == nil:
		return ""
	case s.Volume != nil:
		return s.Volume.Name
	case s.PersistentVolume != nil:
		return s.PersistentVolume.Name
	}
	return ""
}

// UniqueVolumeName is how nodes and the controller name a volume:
// "<plugin name>/<plugin's volume name>", e.g.
// "kubernetes.io/csi/ebs.csi.aws.com^vol-0123".
func UniqueVolumeName(p Plugin, spec *Spec) (v1.UniqueVolumeName, error) {
	if p == nil {
		return "", fmt.Errorf("volumePlugin should not be nil. volumeSpec.Name=%q", spec.Name())
	}
	name, err := p.VolumeName(spec)
	if err != nil || name == "" {
		return "", fmt.Errorf("failed to GetVolumeName from volumePlugin for volumeSpec %q err=%v", spec.Name(), err)
	}
	return v1.UniqueVolumeName(p.Name() + "/" + name), nil
}

// SplitUniqueName splits a unique volume name into the plugin name (which
// has exactly one "/") and the plugin's volume name.
func SplitUniqueName(name v1.UniqueVolumeName) (plugin, volume string, err error) {
	parts := strings.SplitN(string(name), "/", 3)
	if len(parts) != 3 {
		return "", "", fmt.Errorf("cannot split volume unique name %s to plugin/volume components", name)
	}
	return parts[0] + "/" + parts[1], parts[2], nil
}

// IsMultiAttachAllowed tells whether the volume may be attached to several
// nodes at once. Only PVs say so reliably (ReadWriteMany / ReadOnlyMany);
// for a nil spec, a PV without access modes or an inline volume, the
// attacher is left to refuse.
func IsMultiAttachAllowed(spec *Spec) bool {
	if spec == nil {
		return true
	}
	if spec.Volume != nil && (spec.Volume.AzureDisk != nil || spec.Volume.Cinder != nil) {
		return false
	}
	if spec.PersistentVolume == nil {
		return true
	}
	modes := spec.PersistentVolume.Spec.AccessModes
	if len(modes) == 0 {
		return true
	}
	for _, m := range modes {
		if m == v1.ReadWriteMany || m == v1.ReadOnlyMany {
			return true
		}
	}
	return false
}

// MetricPluginName is the volume_plugin / plugin_name metric label: the
// plugin name, with ":<driver>" appended for CSI volumes.
func MetricPluginName(pluginName string, spec *Spec) string {
	if spec != nil {
		if spec.Volume != nil && spec.Volume.CSI != nil {
			return pluginName + ":" + spec.Volume.CSI.Driver
		}
		if spec.PersistentVolume != nil && spec.PersistentVolume.Spec.CSI != nil {
			return pluginName + ":" + spec.PersistentVolume.Spec.CSI.Driver
		}
	}
	return pluginName
}

// ErrNoPluginMatched is returned when no plugin supports a spec.
var ErrNoPluginMatched = errors.New("no volume plugin matched")
