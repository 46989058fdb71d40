package resourceclaim

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim/podclaims"
)

func unwrapTombstone(obj any) any {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tombstone.Obj
	}
	return obj
}

// enqueuePod queues the claims of a pod that no longer needs them (so
// they get released) and the pod itself when it has claim work to do.
func (ec *Controller) enqueuePod(logger klog.Logger, obj any, deleted bool) {
	pod, ok := unwrapTombstone(obj).(*v1.Pod)
	if !ok {
		logger.Error(nil, "EnqueuePod called for unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	// The scheduler's claim for extended resources is only in the status;
	// it needs cleaning up like the others, whatever the feature gates say now.
	if len(pod.Spec.ResourceClaims) == 0 && pod.Status.ExtendedResourceClaimStatus == nil {
		return
	}
	if deleted {
		ec.deleted.Add(pod.UID)
	}

	if needed, reason := podNeedsClaims(pod, deleted); !needed {
		for name := range podclaims.All(pod) {
			logger.V(6).Info("Process claim", "pod", klog.KObj(pod), "claim", klog.KRef(pod.Namespace, name), "reason", reason)
			ec.queue.Add(claimKey(pod.Namespace, name))
		}
	}

	if needsWork, reason := ec.podNeedsWork(pod); needsWork {
		logger.V(6).Info("Enqueueing pod", "pod", klog.KObj(pod), "reason", reason)
		ec.queue.Add(podKeyPrefix + pod.Namespace + "/" + pod.Name)
	} else {
		logger.V(6).Info("Not enqueueing pod", "pod", klog.KObj(pod), "reason", reason)
	}
}

// podNeedsClaims reports whether the pod may still run and use its claims.
func podNeedsClaims(pod *v1.Pod, deleted bool) (bool, string) {
	switch {
	case deleted:
		return false, "pod got removed"
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		return false, "pod has terminated"
	case pod.DeletionTimestamp != nil && pod.Spec.NodeName == "":
		return false, "pod got deleted before scheduling"
	}
	return true, "pod might run"
}

// podNeedsWork reports whether syncPod has something to do for the pod: a
// claim to create from a template, or an allocated claim to reserve for it.
func (ec *Controller) podNeedsWork(pod *v1.Pod) (bool, string) {
	if pod.DeletionTimestamp != nil {
		return false, "pod is deleted"
	}
	var idle []string
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, checkOwner, err := podclaims.Name(pod, podClaim)
		if err != nil {
			return true, err.Error()
		}
		if name == nil {
			idle = append(idle, fmt.Sprintf("claim %s is not needed", podClaim.Name))
			continue
		}
		claim, err := ec.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			if podClaim.ResourceClaimTemplateName == nil {
				idle = append(idle, fmt.Sprintf("ResourceClaim for claim %s is missing and must be created by user", podClaim.Name))
				continue
			}
			podGroup, err := ec.getPodGroup(pod)
			if err != nil {
				return true, "ResourceClaim might have to be created from template: " + err.Error()
			}
			bindTo, err := podclaims.BindTo(pod, podGroup, podClaim)
			if err != nil {
				idle = append(idle, fmt.Sprintf("not sure what to do for ResourceClaim for claim %s: %v", podClaim.Name, err))
				continue
			}
			if podclaims.IsPodGroupConsumer(bindTo) {
				idle = append(idle, fmt.Sprintf("ResourceClaim needs to be created for the PodGroup claim %s", podClaim.Name))
				continue
			}
			return true, "must create ResourceClaim from template"
		}
		if err != nil {
			return true, fmt.Sprintf("internal error while checking for claim: %v", err)
		}
		if checkOwner {
			if err := podclaims.IsForPod(pod, claim, ec.features.WorkloadResourceClaims); err != nil {
				idle = append(idle, fmt.Sprintf("claim %s: %v", podClaim.Name, err))
				continue
			}
		}
		// Reservations are only made for scheduled pods; keep looking for
		// claims to create.
		if pod.Spec.NodeName == "" {
			continue
		}
		if claim.Status.Allocation != nil && !podclaims.IsReservedForPod(pod, claim, ec.features.WorkloadResourceClaims) {
			return true, fmt.Sprintf("need to reserve claim %s for pod", klog.KObj(claim))
		}
	}
	return false, "nothing to do for any claim: " + strings.Join(idle, ", ")
}

// enqueuePodGroup is enqueuePod for PodGroups; it also queues the group's
// pods, whose status may now be able to point at the group's claims.
func (ec *Controller) enqueuePodGroup(logger klog.Logger, obj any, deleted bool) {
	podGroup, ok := unwrapTombstone(obj).(*schedulingapi.PodGroup)
	if !ok {
		logger.Error(nil, "enqueuePodGroup called for unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	if len(podGroup.Spec.ResourceClaims) == 0 {
		return
	}
	if deleted {
		ec.deleted.Add(podGroup.UID)
		// A PodGroup that is gone releases its claims.
		for i := range podGroup.Spec.ResourceClaims {
			name, _, err := podclaims.NameForPodGroup(podGroup, &podGroup.Spec.ResourceClaims[i])
			if err == nil && name != nil {
				ec.queue.Add(claimKey(podGroup.Namespace, *name))
			}
		}
	}

	if needsWork, reason := ec.podGroupNeedsWork(podGroup); needsWork {
		logger.V(6).Info("Enqueueing PodGroup", "podgroup", klog.KObj(podGroup), "reason", reason)
		ec.queue.Add(podGroupKeyPrefix + podGroup.Namespace + "/" + podGroup.Name)
	}

	members, err := ec.podIndexer.ByIndex(podGroupMembersIndex, podGroup.Namespace+"/"+podGroup.Name)
	if err != nil {
		utilruntime.HandleErrorWithLogger(logger, err, "Unable to list Pods for PodGroup", "podgroup", klog.KObj(podGroup))
		return
	}
	for _, member := range members {
		ec.enqueuePod(logger, member, false)
	}
}

// podGroupNeedsWork reports whether a claim of the PodGroup still has to
// be created from its template.
func (ec *Controller) podGroupNeedsWork(podGroup *schedulingapi.PodGroup) (bool, string) {
	if podGroup.DeletionTimestamp != nil {
		return false, "PodGroup is deleted"
	}
	var idle []string
	for i := range podGroup.Spec.ResourceClaims {
		groupClaim := &podGroup.Spec.ResourceClaims[i]
		name, checkOwner, err := podclaims.NameForPodGroup(podGroup, groupClaim)
		if err != nil {
			return true, err.Error()
		}
		if name == nil {
			idle = append(idle, fmt.Sprintf("claim %s is not needed", groupClaim.Name))
			continue
		}
		claim, err := ec.claimLister.ResourceClaims(podGroup.Namespace).Get(*name)
		if apierrors.IsNotFound(err) {
			if groupClaim.ResourceClaimTemplateName != nil {
				return true, "must create ResourceClaim from template"
			}
			idle = append(idle, fmt.Sprintf("ResourceClaim %s for claim %s is missing and must be created by user", *name, groupClaim.Name))
			continue
		}
		if err != nil {
			return true, fmt.Sprintf("internal error while checking for claim: %v", err)
		}
		if checkOwner {
			if err := podclaims.IsForPodGroup(podGroup, claim); err != nil {
				idle = append(idle, fmt.Sprintf("claim %s: %v", groupClaim.Name, err))
			}
		}
	}
	return false, "nothing to do for any claim: " + strings.Join(idle, ", ")
}

// enqueueClaim queues an added or updated claim (its reservedFor may list
// consumers that are gone) and every known pod and PodGroup using it.
func (ec *Controller) enqueueClaim(logger klog.Logger, oldObj, newObj any) {
	oldClaim, _ := unwrapTombstone(oldObj).(*resourceapi.ResourceClaim)
	newClaim, _ := newObj.(*resourceapi.ResourceClaim)
	claim := newClaim
	if claim == nil {
		claim = oldClaim
	}
	if claim == nil {
		return
	}
	if newClaim != nil {
		ec.queue.Add(claimKey(claim.Namespace, claim.Name))
	} else {
		// Forget a claim this controller created recently, or its pod would
		// keep finding it in the mutation cache and wait up to an hour for a
		// replacement. Upstream omits this.
		ec.claimCache.OnDelete(claim)
	}

	key := claim.Namespace + "/" + claim.Name
	pods, err := ec.podIndexer.ByIndex(podClaimIndex, key)
	if err != nil {
		logger.Error(err, "Failed to list pods from cache")
		return
	}
	for _, pod := range pods {
		ec.enqueuePod(logger, pod, false)
	}
	if ec.features.WorkloadResourceClaims {
		groups, err := ec.podGroupIndexer.ByIndex(podGroupClaimIndex, key)
		if err != nil {
			logger.Error(err, "Failed to list PodGroups from cache")
			return
		}
		for _, group := range groups {
			ec.enqueuePodGroup(logger, group, false)
		}
	}
}

// enqueueTemplate queues the pods and PodGroups that use a template which
// just appeared or changed: their claim may now be creatable.
func (ec *Controller) enqueueTemplate(logger klog.Logger, obj any) {
	template, ok := unwrapTombstone(obj).(*resourceapi.ResourceClaimTemplate)
	if !ok {
		utilruntime.HandleErrorWithLogger(logger, nil, "EnqueueResourceClaimTemplate called for unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	key := template.Namespace + "/" + template.Name
	pods, err := ec.podIndexer.ByIndex(podTemplateIndex, key)
	if err != nil {
		utilruntime.HandleErrorWithLogger(logger, err, "Unable to list pods for claim template", "resourceClaimTemplate", klog.KObj(template))
		return
	}
	for _, pod := range pods {
		ec.enqueuePod(logger, pod, false)
	}
	if ec.features.WorkloadResourceClaims {
		groups, err := ec.podGroupIndexer.ByIndex(podGroupTemplateIndex, key)
		if err != nil {
			utilruntime.HandleErrorWithLogger(logger, err, "Unable to list PodGroups for claim template", "resourceClaimTemplate", klog.KObj(template))
			return
		}
		for _, group := range groups {
			ec.enqueuePodGroup(logger, group, false)
		}
	}
}

// getPodGroup returns the pod's PodGroup, nil for a pod without one.
func (ec *Controller) getPodGroup(pod *v1.Pod) (*schedulingapi.PodGroup, error) {
	group := podclaims.PodGroupName(pod)
	if group == "" {
		return nil, nil
	}
	if !ec.features.GenericWorkload {
		return nil, nonRetryableError{fmt.Errorf("Pod is a member of PodGroup %s but %s feature is disabled", group, GenericWorkload)} //nolint:staticcheck // upstream's wording
	}
	return ec.podGroupLister.PodGroups(pod.Namespace).Get(group)
}

// podClaimKeys indexes a pod by the namespace/name of every claim it uses
// through spec.resourceClaims (not the extended-resource claim: its events
// reach the controller through the pod).
func podClaimKeys(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	keys := sets.New[string]()
	for i := range pod.Spec.ResourceClaims {
		// Index functions must not fail: claims that cannot be resolved
		// (not created yet, unknown API) are left out.
		if name, _, err := podclaims.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil {
			keys.Insert(pod.Namespace + "/" + *name)
		}
	}
	return sets.List(keys), nil
}

// podTemplateKeys indexes a pod by the namespace/name of its claim templates.
func podTemplateKeys(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	keys := sets.New[string]()
	for _, podClaim := range pod.Spec.ResourceClaims {
		if podClaim.ResourceClaimTemplateName != nil {
			keys.Insert(pod.Namespace + "/" + *podClaim.ResourceClaimTemplateName)
		}
	}
	return sets.List(keys), nil
}

// podGroupMemberKeys indexes a pod by namespace/name of its PodGroup.
func podGroupMemberKeys(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if group := podclaims.PodGroupName(pod); group != "" {
		return []string{pod.Namespace + "/" + group}, nil
	}
	return nil, nil
}

// podGroupClaimKeys indexes a PodGroup by the claims it uses.
func podGroupClaimKeys(obj any) ([]string, error) {
	podGroup, ok := obj.(*schedulingapi.PodGroup)
	if !ok {
		return nil, nil
	}
	keys := sets.New[string]()
	for i := range podGroup.Spec.ResourceClaims {
		if name, _, err := podclaims.NameForPodGroup(podGroup, &podGroup.Spec.ResourceClaims[i]); err == nil && name != nil {
			keys.Insert(podGroup.Namespace + "/" + *name)
		}
	}
	return sets.List(keys), nil
}

// podGroupTemplateKeys indexes a PodGroup by its claim templates.
func podGroupTemplateKeys(obj any) ([]string, error) {
	podGroup, ok := obj.(*schedulingapi.PodGroup)
	if !ok {
		return nil, nil
	}
	keys := sets.New[string]()
	for _, groupClaim := range podGroup.Spec.ResourceClaims {
		if groupClaim.ResourceClaimTemplateName != nil {
			keys.Insert(podGroup.Namespace + "/" + *groupClaim.ResourceClaimTemplateName)
		}
	}
	return sets.List(keys), nil
}

// claimPodOwnerKeys indexes a claim by namespace/UID of the pod controlling it.
func claimPodOwnerKeys(obj any) ([]string, error) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, owner := range claim.OwnerReferences {
		if isPodController(owner) {
			keys = append(keys, claim.Namespace+"/"+string(owner.UID))
		}
	}
	return keys, nil
}

// claimPodGroupOwnerKeys indexes a claim by namespace/UID of the PodGroup
// controlling it.
func claimPodGroupOwnerKeys(obj any) ([]string, error) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return nil, nil
	}
	owner := metav1.GetControllerOfNoCopy(claim)
	if owner == nil || owner.Kind != "PodGroup" || !strings.HasPrefix(owner.APIVersion, schedulingapi.GroupName+"/") {
		return nil, nil
	}
	return []string{claim.Namespace + "/" + string(owner.UID)}, nil
}

func isPodController(owner metav1.OwnerReference) bool {
	return ptr.Deref(owner.Controller, false) && owner.APIVersion == "v1" && owner.Kind == "Pod"
}
