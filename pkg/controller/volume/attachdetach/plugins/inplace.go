package plugins

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Plugin names of the in-tree attachable plugins that were not migrated to
// CSI. Their devices are reached by the node itself (iSCSI login, FC
// scan), so the controller's attach and detach do nothing, but the volume
// is still reported in node.status.volumesAttached, which the kubelet
// waits for before mounting.
const (
	ISCSIPluginName = "kubernetes.io/iscsi"
	FCPluginName    = "kubernetes.io/fc"
)

// nodeAttached implements the no-op half shared by iSCSI and FC.
type nodeAttached struct{}

func (nodeAttached) CanAttach(*Spec) (bool, error) { return true, nil }

func (nodeAttached) Attach(context.Context, *Spec, types.NodeName) (string, error) { return "", nil }

func (nodeAttached) Detach(context.Context, string, types.NodeName) error { return nil }

func (nodeAttached) VolumesAreAttached(_ context.Context, specs []*Spec, _ types.NodeName) (map[*Spec]bool, error) {
	attached := make(map[*Spec]bool, len(specs))
	for _, s := range specs {
		attached[s] = true
	}
	return attached, nil
}

// ISCSI is the iSCSI plugin.
type ISCSI struct{ nodeAttached }

func (ISCSI) Name() string { return ISCSIPluginName }

func (ISCSI) CanSupport(spec *Spec) bool {
	return spec != nil && ((spec.Volume != nil && spec.Volume.ISCSI != nil) ||
		(spec.PersistentVolume != nil && spec.PersistentVolume.Spec.ISCSI != nil))
}

// VolumeName is "<target portal>:<IQN>:<LUN>".
func (ISCSI) VolumeName(spec *Spec) (string, error) {
	var portal, iqn string
	var lun int32
	switch {
	case spec.Volume != nil && spec.Volume.ISCSI != nil:
		src := spec.Volume.ISCSI
		portal, iqn, lun = src.TargetPortal, src.IQN, src.Lun
	case spec.PersistentVolume != nil && spec.PersistentVolume.Spec.ISCSI != nil:
		src := spec.PersistentVolume.Spec.ISCSI
		portal, iqn, lun = src.TargetPortal, src.IQN, src.Lun
	default:
		return "", errors.New("Spec does not reference an ISCSI volume type") //nolint:staticcheck // upstream's message
	}
	return fmt.Sprintf("%v:%v:%v", portal, iqn, lun), nil
}

// FC is the Fibre Channel plugin.
type FC struct{ nodeAttached }

func (FC) Name() string { return FCPluginName }

func (FC) CanSupport(spec *Spec) bool {
	return spec != nil && ((spec.Volume != nil && spec.Volume.FC != nil) ||
		(spec.PersistentVolume != nil && spec.PersistentVolume.Spec.FC != nil))
}

// VolumeName is "[<target WWNs>]:<LUN>", or "[<WWIDs>]"; empty (an
// unusable volume) when the source has neither.
func (FC) VolumeName(spec *Spec) (string, error) {
	var src *v1.FCVolumeSource
	switch {
	case spec.Volume != nil && spec.Volume.FC != nil:
		src = spec.Volume.FC
	case spec.PersistentVolume != nil && spec.PersistentVolume.Spec.FC != nil:
		src = spec.PersistentVolume.Spec.FC
	default:
		return "", errors.New("Spec does not reference a FibreChannel volume type") //nolint:staticcheck // upstream's message
	}
	switch {
	case len(src.TargetWWNs) != 0 && src.Lun != nil:
		return fmt.Sprintf("%v:%v", src.TargetWWNs, *src.Lun), nil
	case len(src.WWIDs) != 0:
		return fmt.Sprintf("%v", src.WWIDs), nil
	}
	return "", nil
}
