package attachdetach

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// isPodTerminated: the pod has finished, or is being deleted and none of
// its containers runs any more. Its volumes are no longer needed.
func isPodTerminated(pod *v1.Pod) bool {
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		return true
	}
	return pod.DeletionTimestamp != nil &&
		notRunning(pod.Status.InitContainerStatuses) &&
		notRunning(pod.Status.ContainerStatuses) &&
		notRunning(pod.Status.EphemeralContainerStatuses)
}

func notRunning(statuses []v1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

// wantsVolumes tells whether the pod's volumes belong in the desired state
// (true) or should leave it (false).
func wantsVolumes(pod *v1.Pod) bool {
	if pod == nil || len(pod.Spec.Volumes) == 0 {
		return true
	}
	return !isPodTerminated(pod)
}

// nodeLocal: the volume's source lives on the node (a pod's own files,
// API data projected into it, host paths). No attach plugin and no CSI
// migration handles these, so they need no spec: nearly every pod has one
// (its service account token), and resolving them was most of the work of
// each pod event and each metrics scrape.
func nodeLocal(v *v1.Volume) bool {
	return v.EmptyDir != nil || v.Secret != nil || v.ConfigMap != nil || v.Projected != nil ||
		v.DownwardAPI != nil || v.HostPath != nil || v.Image != nil
}

// volumeSpecs resolves pod volumes to volume specs.
type volumeSpecs struct {
	pvcLister corelisters.PersistentVolumeClaimLister
	pvLister  corelisters.PersistentVolumeLister
}

// forPodVolume returns the spec of one pod volume: the bound PV (deep
// copied) for claims and generic ephemeral volumes, the volume itself for
// inline sources; in-tree sources with a CSI driver are translated to CSI.
func (vs volumeSpecs) forPodVolume(logger klog.Logger, podVolume v1.Volume, pod *v1.Pod) (*plugins.Spec, error) {
	spec, claimName, err := vs.inTreeSpec(logger, podVolume, pod)
	if err != nil {
		return nil, err
	}
	spec, err = plugins.TranslateIfMigratable(logger, spec, pod.Namespace)
	if err != nil {
		return nil, fmt.Errorf("error performing CSI migration checks and translation for PVC %q/%q: %w", pod.Namespace, claimName, err)
	}
	return spec, nil
}

// inTreeSpec is forPodVolume before translation; it also returns the claim
// name (empty for inline volumes).
func (vs volumeSpecs) inTreeSpec(logger klog.Logger, podVolume v1.Volume, pod *v1.Pod) (*plugins.Spec, string, error) {
	var claimName string
	var readOnly bool
	if src := podVolume.PersistentVolumeClaim; src != nil {
		claimName, readOnly = src.ClaimName, src.ReadOnly
	}
	isEphemeral := podVolume.Ephemeral != nil
	if isEphemeral {
		claimName = ephemeralutil.VolumeClaimName(pod, &podVolume)
	}
	if claimName == "" {
		return plugins.SpecFromVolume(&podVolume), "", nil
	}
	logger.V(10).Info("Found PVC", "PVC", klog.KRef(pod.Namespace, claimName))

	pvc, err := vs.pvcLister.PersistentVolumeClaims(pod.Namespace).Get(claimName)
	if err != nil {
		return nil, claimName, fmt.Errorf("error processing PVC %q/%q: failed to find PVC %s/%s in PVCInformer cache: %v", pod.Namespace, claimName, pod.Namespace, claimName, err)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, claimName, fmt.Errorf("error processing PVC %q/%q: PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)",
			pod.Namespace, claimName, pod.Namespace, claimName, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	if isEphemeral {
		if err := ephemeralutil.VolumeIsForPod(pod, pvc); err != nil {
			return nil, claimName, err
		}
	}
	pv, err := vs.pvLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		return nil, claimName, fmt.Errorf("error processing PVC %q/%q: failed to find PV %q in PVInformer cache: %v", pod.Namespace, claimName, pvc.Spec.VolumeName, err)
	}
	if pv.Spec.ClaimRef == nil {
		return nil, claimName, fmt.Errorf("error processing PVC %q/%q: found PV object %q but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim",
			pod.Namespace, claimName, pv.Name)
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, claimName, fmt.Errorf("error processing PVC %q/%q: found PV object %q but its pv.Spec.ClaimRef.UID (%q) does not point to claim.UID (%q)",
			pod.Namespace, claimName, pv.Name, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	logger.V(10).Info("Extracted volumeSpec from bound PV and PVC", "PVC", klog.KRef(pod.Namespace, claimName), "pvcUID", pvc.UID, "PV", klog.KRef("", pv.Name))
	return plugins.SpecFromPV(pv.DeepCopy(), readOnly), claimName, nil
}

// processPodVolumes adds (add) or removes the pod's attachable volumes in
// the desired state. Pods on unmanaged nodes are ignored.
func (adc *Controller) processPodVolumes(logger klog.Logger, pod *v1.Pod, add bool) {
	if pod == nil {
		return
	}
	if len(pod.Spec.Volumes) == 0 {
		logger.V(10).Info("Skipping processing of pod, it has no volumes", "pod", klog.KObj(pod))
		return
	}
	node := types.NodeName(pod.Spec.NodeName)
	if node == "" {
		logger.V(10).Info("Skipping processing of pod, it is not scheduled to a node", "pod", klog.KObj(pod))
		return
	}
	if !adc.dsw.NodeExists(node) {
		logger.V(4).Info("Skipping processing of pod, it is scheduled to node which is not managed by the controller", "node", klog.KRef("", string(node)), "pod", klog.KObj(pod))
		return
	}
	for _, podVolume := range pod.Spec.Volumes {
		if nodeLocal(&podVolume) {
			continue
		}
		spec, err := adc.specs.forPodVolume(logger, podVolume, pod)
		if err != nil {
			logger.V(10).Info("Error processing volume for pod", "pod", klog.KObj(pod), "volumeName", podVolume.Name, "err", err)
			continue
		}
		p, err := adc.plugins.FindAttachableBySpec(spec)
		if err != nil || p == nil {
			logger.V(10).Info("Skipping volume for pod, it does not implement attacher interface", "pod", klog.KObj(pod), "volumeName", podVolume.Name, "err", err)
			continue
		}
		if add {
			if _, err := adc.dsw.AddPod(pod, spec, node); err != nil {
				logger.V(10).Info("Failed to add volume for pod to desiredStateOfWorld", "pod", klog.KObj(pod), "volumeName", podVolume.Name, "err", err)
			}
			continue
		}
		name, err := plugins.UniqueVolumeName(p, spec)
		if err != nil {
			logger.V(10).Info("Failed to delete volume for pod from desiredStateOfWorld. GetUniqueVolumeNameFromSpec failed", "pod", klog.KObj(pod), "volumeName", podVolume.Name, "err", err)
			continue
		}
		adc.dsw.DeletePod(pod.UID, name, node)
	}
}
