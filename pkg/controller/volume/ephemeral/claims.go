package ephemeral

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
)

// PodPVCIndex names the pod informer index from AddPodPVCIndexer. The name
// is upstream's so that every controller sharing the pod informer (this
// one, the PVC protection controller, ...) installs it only once.
const PodPVCIndex = "pod-pvc-index"

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
			claim = ephemeralutil.VolumeClaimName(pod, vol)
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
