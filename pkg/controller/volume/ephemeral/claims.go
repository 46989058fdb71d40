package ephemeral

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// PodPVCIndex names the pod informer index from AddPodPVCIndexer. The name
// is upstream's so that every controller sharing the pod informer (this
// one, the PVC protection controller, ...) installs it only once.
const PodPVCIndex = "pod-pvc-index"

// VolumeClaimName is the name of the PVC backing the generic ephemeral
// volume vol of pod. It is derived from the two names only, so a PVC of that
// name may belong to something else: check it with VolumeIsForPod.
func VolumeClaimName(pod *v1.Pod, vol *v1.Volume) string {
	return pod.Name + "-" + vol.Name
}

// VolumeIsForPod returns an error unless pvc was created for pod, that is
// lives in its namespace and is controlled by it. The message is the one
// users see in events, so it names both objects.
func VolumeIsForPod(pod *v1.Pod, pvc *v1.PersistentVolumeClaim) error {
	if pvc.Namespace != pod.Namespace || !metav1.IsControlledBy(pvc, pod) {
		return fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
	}
	return nil
}

// PodPVCIndexKey is the PodPVCIndex key of the claim namespace/name.
func PodPVCIndexKey(namespace, name string) string {
	return namespace + "/" + name
}

// podPVCKeys indexes a pod under every claim it names, directly or through
// an ephemeral volume.
func podPVCKeys(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var claim string
		switch {
		case vol.PersistentVolumeClaim != nil:
			claim = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			claim = VolumeClaimName(pod, vol)
		}
		if claim != "" {
			keys = append(keys, PodPVCIndexKey(pod.Namespace, claim))
		}
	}
	return keys, nil
}

// AddPodPVCIndexer adds PodPVCIndex to the pod informer unless a controller
// sharing it already did.
func AddPodPVCIndexer(podInformer cache.SharedIndexInformer) error {
	if _, ok := podInformer.GetIndexer().GetIndexers()[PodPVCIndex]; ok {
		return nil
	}
	return podInformer.AddIndexers(cache.Indexers{PodPVCIndex: podPVCKeys})
}

// PodsForPVC returns the pods of the indexer that name the claim
// namespace/name. The caller still has to check each volume: for an
// ephemeral volume only a PVC passing VolumeIsForPod is the pod's.
func PodsForPVC(podIndexer cache.Indexer, namespace, name string) ([]*v1.Pod, error) {
	objs, err := podIndexer.ByIndex(PodPVCIndex, PodPVCIndexKey(namespace, name))
	if err != nil {
		return nil, err
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*v1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}
