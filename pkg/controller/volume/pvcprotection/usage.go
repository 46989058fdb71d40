package pvcprotection

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
)

// podUsage decides whether one pod counts as a user of pvc. Deletion and the
// Unused condition have different rules.
type podUsage func(logger klog.Logger, pod *v1.Pod, pvc *v1.PersistentVolumeClaim) bool

// livePodList is the pods of one namespace read from the apiserver, listed
// at most once per batch: many PVCs of a namespace deleted together then
// cost one list instead of one each. A failed list is retried by the next
// PVC of the batch.
type livePodList struct {
	pods   []v1.Pod
	listed bool
}

// isBeingUsed reports whether a pod uses pvc by the rule uses. The informer
// is asked first because a pod found there settles it cheaply; but a pod
// missing from it may simply not have arrived yet, so "unused" is only
// concluded from a live list.
func (c *Controller) isBeingUsed(ctx context.Context, pvc *v1.PersistentVolumeClaim, live *livePodList, uses podUsage) (bool, error) {
	logger := klog.FromContext(ctx)
	used, err := c.usedInCache(logger, pvc, uses)
	if err != nil {
		// The live list below decides instead.
		logger.Error(err, "Cache-based check of the PVC's pods failed", "PVC", klog.KObj(pvc))
	} else if used {
		return true, nil
	}
	return c.usedLive(ctx, pvc, live, uses)
}

func (c *Controller) usedInCache(logger klog.Logger, pvc *v1.PersistentVolumeClaim, uses podUsage) (bool, error) {
	logger.V(4).Info("Looking for Pods using PVC in the Informer's cache", "PVC", klog.KObj(pvc))
	pods, err := ephemeral.PodsForPVC(c.podIndexer, pvc.Namespace, pvc.Name)
	if err != nil {
		return false, fmt.Errorf("cache-based list of pods failed while processing %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	for _, pod := range pods {
		// The index only says the pod names the claim; for an ephemeral
		// volume the claim must also be the one created for this pod.
		if uses(logger, pod, pvc) {
			return true, nil
		}
	}
	logger.V(4).Info("No Pod using PVC was found in the Informer's cache", "PVC", klog.KObj(pvc))
	return false, nil
}

func (c *Controller) usedLive(ctx context.Context, pvc *v1.PersistentVolumeClaim, live *livePodList, uses podUsage) (bool, error) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Looking for Pods using PVC", "PVC", klog.KObj(pvc))
	if !live.listed {
		logger.V(4).Info("Live listing Pods in namespace", "namespace", pvc.Namespace)
		// No resourceVersion: a quorum read, never older than the cache.
		list, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("live list of pods failed: %w", err)
		}
		live.pods, live.listed = list.Items, true
	}
	for i := range live.pods {
		if uses(logger, &live.pods[i], pvc) {
			return true, nil
		}
	}
	logger.V(2).Info("PVC is unused", "PVC", klog.KObj(pvc))
	return false, nil
}

// podBlocksDeletion is the rule for removing the finalizer. Only scheduled
// pods count: the kubelet sees a pod once it is scheduled and refuses to
// start one whose claim is being deleted. A pod naming the claim directly
// keeps it even after finishing, until the pod object is gone. Through an
// ephemeral volume the claim must be the pod's own, and a pod already shut
// down does not count (see podIsShutDown).
func podBlocksDeletion(logger klog.Logger, pod *v1.Pod, pvc *v1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if namesClaim(vol, pvc) || !podIsShutDown(pod) && ownsEphemeralClaim(pod, vol, pvc) {
			logger.V(2).Info("Pod uses PVC", "pod", klog.KObj(pod), "PVC", klog.KObj(pvc))
			return true
		}
	}
	return false
}

// podReferencesPVC is the rule for the Unused condition: any pod that has
// not terminated and references the claim, scheduled or not.
func podReferencesPVC(logger klog.Logger, pod *v1.Pod, pvc *v1.PersistentVolumeClaim) bool {
	if isPodTerminated(pod) {
		return false
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if namesClaim(vol, pvc) || ownsEphemeralClaim(pod, vol, pvc) {
			logger.V(4).Info("Pod references PVC for unused tracking", "pod", klog.KObj(pod), "PVC", klog.KObj(pvc))
			return true
		}
	}
	return false
}

func namesClaim(vol *v1.Volume, pvc *v1.PersistentVolumeClaim) bool {
	return vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ClaimName == pvc.Name
}

func ownsEphemeralClaim(pod *v1.Pod, vol *v1.Volume, pvc *v1.PersistentVolumeClaim) bool {
	return vol.Ephemeral != nil && ephemeralutil.VolumeClaimName(pod, vol) == pvc.Name && ephemeralutil.VolumeIsForPod(pod, pvc) == nil
}

// podIsShutDown reports whether the kubelet is done with the pod, or it was
// force-deleted: deleting with a zero grace period. Such a pod only waits
// for its finalizers; counting it as a user could deadlock with a pod
// finalizer that waits for the claim to go.
func podIsShutDown(pod *v1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// isPodTerminated reports whether the pod finished, or is being deleted
// and none of its containers runs anymore.
func isPodTerminated(pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodFailed, v1.PodSucceeded:
		return true
	}
	return pod.DeletionTimestamp != nil &&
		noneRunning(pod.Status.InitContainerStatuses) &&
		noneRunning(pod.Status.ContainerStatuses) &&
		noneRunning(pod.Status.EphemeralContainerStatuses)
}

// noneRunning reports whether every status is terminated or waiting.
func noneRunning(statuses []v1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}
