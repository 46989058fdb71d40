package expand

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	clientset "k8s.io/client-go/kubernetes"
)

// resizeConditions are the PVC condition types owned by volume resizing.
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

// setClaimResizer sets the storage-resizer annotation, through the status
// subresource like every PVC write of this controller.
func setClaimResizer(ctx context.Context, pvc *v1.PersistentVolumeClaim, resizerName string, client clientset.Interface) (*v1.PersistentVolumeClaim, error) {
	newPVC := pvc.DeepCopy()
	setResizer(newPVC, resizerName)
	return patchPVCStatus(ctx, pvc, newPVC, client)
}

func setResizer(pvc *v1.PersistentVolumeClaim, resizerName string) {
	if val, ok := pvc.Annotations[VolumeResizerKey]; ok && val == resizerName {
		return
	}
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, VolumeResizerKey, resizerName)
}

// markControllerResizeInProgress: Resizing condition, allocated size and
// ControllerResizeInProgress status, resizer annotation.
func markControllerResizeInProgress(ctx context.Context, pvc *v1.PersistentVolumeClaim, resizerName string, newSize resource.Quantity, client clientset.Interface) (*v1.PersistentVolumeClaim, error) {
	newPVC := pvc.DeepCopy()
	mergeResizeConditions(newPVC, []v1.PersistentVolumeClaimCondition{{
		Type:               v1.PersistentVolumeClaimResizing,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
	}}, false)
	setStorageResourceStatus(newPVC, v1.PersistentVolumeClaimControllerResizeInProgress)
	if newPVC.Status.AllocatedResources == nil {
		newPVC.Status.AllocatedResources = v1.ResourceList{}
	}
	newPVC.Status.AllocatedResources[v1.ResourceStorage] = newSize
	setResizer(newPVC, resizerName)
	return patchPVCStatus(ctx, pvc, newPVC, client)
}

// markForFSResize: FileSystemResizePending condition (other resize
// conditions kept) and NodeResizePending status.
func markForFSResize(ctx context.Context, pvc *v1.PersistentVolumeClaim, client clientset.Interface) (*v1.PersistentVolumeClaim, error) {
	newPVC := pvc.DeepCopy()
	setStorageResourceStatus(newPVC, v1.PersistentVolumeClaimNodeResizePending)
	mergeResizeConditions(newPVC, []v1.PersistentVolumeClaimCondition{{
		Type:               v1.PersistentVolumeClaimFileSystemResizePending,
		Status:             v1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Message:            "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
	}}, true)
	return patchPVCStatus(ctx, pvc, newPVC, client)
}

// markResizeFinished: capacity set, storage resize status and all resize
// conditions cleared.
func markResizeFinished(ctx context.Context, pvc *v1.PersistentVolumeClaim, newSize resource.Quantity, client clientset.Interface) (*v1.PersistentVolumeClaim, error) {
	newPVC := pvc.DeepCopy()
	if newPVC.Status.Capacity == nil {
		newPVC.Status.Capacity = v1.ResourceList{}
	}
	newPVC.Status.Capacity[v1.ResourceStorage] = newSize
	delete(newPVC.Status.AllocatedResourceStatuses, v1.ResourceStorage)
	if len(newPVC.Status.AllocatedResourceStatuses) == 0 {
		newPVC.Status.AllocatedResourceStatuses = nil
	}
	mergeResizeConditions(newPVC, nil, false)
	return patchPVCStatus(ctx, pvc, newPVC, client)
}

func setStorageResourceStatus(pvc *v1.PersistentVolumeClaim, status v1.ClaimResourceStatus) {
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] = status
}

// mergeResizeConditions sets the given resize conditions, keeping
// non-resize conditions; other resize conditions are kept only with keepOld.
// An existing condition with the same type and status is left as it is.
func mergeResizeConditions(pvc *v1.PersistentVolumeClaim, conds []v1.PersistentVolumeClaimCondition, keepOld bool) {
	pending := map[v1.PersistentVolumeClaimConditionType]int{}
	for i, c := range conds {
		pending[c.Type] = i
	}
	merged := []v1.PersistentVolumeClaimCondition{}
	for _, old := range pvc.Status.Conditions {
		if !resizeConditions[old.Type] {
			merged = append(merged, old)
			continue
		}
		if i, ok := pending[old.Type]; ok {
			if conds[i].Status != old.Status {
				merged = append(merged, conds[i])
			} else {
				merged = append(merged, old)
			}
			delete(pending, old.Type)
		} else if keepOld {
			merged = append(merged, old)
		}
	}
	for i, c := range conds {
		if _, ok := pending[c.Type]; ok && pending[c.Type] == i {
			merged = append(merged, c)
		}
	}
	pvc.Status.Conditions = merged
}

// patchPVCStatus sends a strategic merge patch from oldPVC to newPVC to the
// status subresource, with oldPVC's resourceVersion as a precondition. On
// failure it returns oldPVC.
func patchPVCStatus(ctx context.Context, oldPVC, newPVC *v1.PersistentVolumeClaim, client clientset.Interface) (*v1.PersistentVolumeClaim, error) {
	patch, err := twoWayPatch(oldPVC, newPVC, v1.PersistentVolumeClaim{})
	if err == nil {
		patch, err = withResourceVersion(patch, oldPVC.ResourceVersion)
	}
	if err != nil {
		return oldPVC, fmt.Errorf("patchPVCStatus failed to patch PVC %q: %v", oldPVC.Name, err)
	}
	updated, err := client.CoreV1().PersistentVolumeClaims(oldPVC.Namespace).
		Patch(ctx, oldPVC.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return oldPVC, fmt.Errorf("patchPVCStatus failed to patch PVC %q: %v", oldPVC.Name, err)
	}
	return updated, nil
}

// patchPV sends a strategic merge patch from oldPV to newPV (no
// resourceVersion precondition). On failure it returns oldPV.
func patchPV(ctx context.Context, oldPV, newPV *v1.PersistentVolume, client clientset.Interface) (*v1.PersistentVolume, error) {
	patch, err := twoWayPatch(oldPV, newPV, v1.PersistentVolume{})
	if err != nil {
		return oldPV, fmt.Errorf("error Creating two way merge patch for PV %q with error : %v", oldPV.Name, err)
	}
	updated, err := client.CoreV1().PersistentVolumes().Patch(ctx, oldPV.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return oldPV, fmt.Errorf("error Patching PV %q with error : %v", oldPV.Name, err)
	}
	return updated, nil
}

func twoWayPatch(oldObj, newObj, schema interface{}) ([]byte, error) {
	oldData, err := json.Marshal(oldObj)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal old data: %v", err)
	}
	newData, err := json.Marshal(newObj)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal new data: %v", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, schema)
	if err != nil {
		return nil, fmt.Errorf("failed to create 2 way merge patch: %v", err)
	}
	return patch, nil
}

// withResourceVersion adds metadata.resourceVersion to a JSON patch.
func withResourceVersion(patch []byte, resourceVersion string) ([]byte, error) {
	var m map[string]interface{}
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("error unmarshalling patch: %v", err)
	}
	meta, _ := m["metadata"].(map[string]interface{})
	if meta == nil {
		meta = map[string]interface{}{}
		m["metadata"] = meta
	}
	meta["resourceVersion"] = resourceVersion
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("error marshalling json patch: %v", err)
	}
	return out, nil
}

func updatePVSize(ctx context.Context, pv *v1.PersistentVolume, newSize resource.Quantity, client clientset.Interface) (*v1.PersistentVolume, error) {
	clone := pv.DeepCopy()
	if clone.Spec.Capacity == nil {
		clone.Spec.Capacity = v1.ResourceList{}
	}
	clone.Spec.Capacity[v1.ResourceStorage] = newSize
	return patchPV(ctx, pv, clone, client)
}

func addAnnPreResizeCapacity(ctx context.Context, pv *v1.PersistentVolume, oldCapacity resource.Quantity, client clientset.Interface) error {
	if metav1.HasAnnotation(pv.ObjectMeta, AnnPreResizeCapacity) {
		return nil
	}
	clone := pv.DeepCopy()
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, AnnPreResizeCapacity, oldCapacity.String())
	_, err := patchPV(ctx, pv, clone, client)
	return err
}

func deleteAnnPreResizeCapacity(ctx context.Context, pv *v1.PersistentVolume, client clientset.Interface) error {
	if !metav1.HasAnnotation(pv.ObjectMeta, AnnPreResizeCapacity) {
		return nil
	}
	clone := pv.DeepCopy()
	delete(clone.Annotations, AnnPreResizeCapacity)
	_, err := patchPV(ctx, pv, clone, client)
	return err
}
