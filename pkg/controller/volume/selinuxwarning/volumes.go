package selinuxwarning

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// Names of the volume plugins kube-controller-manager knows. Only volumes
// of these plugins are compared; others (emptyDir, secret, ...) are private
// to a pod.
const (
	pluginCSI      = plugins.CSIPluginName
	pluginHostPath = "kubernetes.io/host-path"
	pluginNFS      = "kubernetes.io/nfs"
	pluginFC       = plugins.FCPluginName
	pluginISCSI    = plugins.ISCSIPluginName
)

// podVolumeSpec resolves a pod volume to its PV (claims and generic
// ephemeral volumes) or inline source, translated to CSI when the in-tree
// plugin was migrated. It fails while a claim is not bound yet.
func (c *Controller) podVolumeSpec(logger klog.Logger, vol v1.Volume, pod *v1.Pod) (*plugins.Spec, error) {
	spec, claim, err := c.inTreeSpec(vol, pod)
	if err != nil {
		return nil, err
	}
	spec, err = plugins.TranslateIfMigratable(logger, spec, pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("error performing CSI migration checks and translation for PVC %q/%q: %w", pod.Namespace, claim, err)
	}
	return spec, nil
}

func (c *Controller) inTreeSpec(vol v1.Volume, pod *v1.Pod) (*plugins.Spec, string, error) {
	var claim string
	var readOnly bool
	if src := vol.PersistentVolumeClaim; src != nil {
		claim, readOnly = src.ClaimName, src.ReadOnly
	}
	if vol.Ephemeral != nil {
		claim = ephemeralutil.VolumeClaimName(pod, &vol)
	}
	if claim == "" {
		return plugins.SpecFromVolume(&vol), "", nil
	}
	pvc, err := c.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(claim)
	if err != nil {
		return nil, claim, fmt.Errorf("error processing PVC %q/%q: %w", pod.Namespace, claim, err)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, claim, fmt.Errorf("error processing PVC %q/%q: not bound", pod.Namespace, claim)
	}
	if vol.Ephemeral != nil {
		if err := ephemeralutil.VolumeIsForPod(pod, pvc); err != nil {
			return nil, claim, err
		}
	}
	pv, err := c.pvLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		return nil, claim, fmt.Errorf("error processing PVC %q/%q: %w", pod.Namespace, claim, err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, claim, fmt.Errorf("error processing PVC %q/%q: PV %q is not bound to it", pod.Namespace, claim, pv.Name)
	}
	return plugins.SpecFromPV(pv.DeepCopy(), readOnly), claim, nil
}

// pluginFor names the plugin of spec, "" when none of the known ones.
func pluginFor(spec *plugins.Spec) string {
	var pv v1.PersistentVolumeSpec
	var vol v1.VolumeSource
	if spec.PersistentVolume != nil {
		pv = spec.PersistentVolume.Spec
	}
	if spec.Volume != nil {
		vol = spec.Volume.VolumeSource
	}
	switch {
	case pv.CSI != nil || vol.CSI != nil:
		return pluginCSI
	case pv.HostPath != nil || vol.HostPath != nil:
		return pluginHostPath
	case pv.NFS != nil || vol.NFS != nil:
		return pluginNFS
	case pv.FC != nil || vol.FC != nil:
		return pluginFC
	case pv.ISCSI != nil || vol.ISCSI != nil:
		return pluginISCSI
	}
	return ""
}

// uniqueVolumeName is "<plugin>/<plugin's volume name>", the name nodes
// use for the volume, so two pods' specs of one volume compare equal.
func uniqueVolumeName(plugin string, spec *plugins.Spec) (v1.UniqueVolumeName, error) {
	name, err := pluginVolumeName(plugin, spec)
	if err != nil || name == "" {
		return "", fmt.Errorf("failed to get unique volume name for volume %q: %v", spec.Name(), err)
	}
	return v1.UniqueVolumeName(plugin + "/" + name), nil
}

func pluginVolumeName(plugin string, spec *plugins.Spec) (string, error) {
	pv, vol := spec.PersistentVolume, spec.Volume
	switch plugin {
	case pluginCSI:
		// Inline CSI volumes have no volume handle, as upstream they fail.
		if pv == nil || pv.Spec.CSI == nil {
			return "", errors.New("CSI volume source not found in persistent volume spec")
		}
		return pv.Spec.CSI.Driver + "^" + pv.Spec.CSI.VolumeHandle, nil
	case pluginHostPath:
		if vol != nil && vol.HostPath != nil {
			return vol.HostPath.Path, nil
		}
		return pv.Spec.HostPath.Path, nil
	case pluginNFS:
		if vol != nil && vol.NFS != nil {
			return vol.NFS.Server + "/" + vol.NFS.Path, nil
		}
		return pv.Spec.NFS.Server + "/" + pv.Spec.NFS.Path, nil
	case pluginFC:
		return plugins.FC{}.VolumeName(spec)
	case pluginISCSI:
		return plugins.ISCSI{}.VolumeName(spec)
	}
	return "", fmt.Errorf("unknown plugin %q", plugin)
}

// csiDriverName is the CSI driver of spec, "" for other volumes.
func csiDriverName(spec *plugins.Spec) string {
	if spec.Volume != nil && spec.Volume.CSI != nil {
		return spec.Volume.CSI.Driver
	}
	if spec.PersistentVolume != nil && spec.PersistentVolume.Spec.CSI != nil {
		return spec.PersistentVolume.Spec.CSI.Driver
	}
	return ""
}

// supportsContextMount tells whether the kubelet would mount the volume
// with -o context: FC and iSCSI always, CSI when its CSIDriver says
// seLinuxMount: true (a missing CSIDriver means no), others never.
func (c *Controller) supportsContextMount(plugin string, spec *plugins.Spec) (bool, error) {
	switch plugin {
	case pluginFC, pluginISCSI:
		return true, nil
	case pluginCSI:
		driver, err := c.csiDriverLister.Get(csiDriverName(spec))
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return ptr.Deref(driver.Spec.SELinuxMount, false), nil
	}
	return false, nil
}
