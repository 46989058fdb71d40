// Package podclaims answers the questions every DRA controller asks about a
// pod's (or PodGroup's) ResourceClaims: which ResourceClaim object does an
// entry of spec.resourceClaims stand for, was that claim really generated
// for this pod, is it reserved for it, and to whom should a reservation
// point. The resourceclaim and device-taint-eviction controllers share it.
package podclaims

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// PodGroupsResource is the resource name a ReservedFor entry uses for a
// scheduling.k8s.io PodGroup.
const PodGroupsResource = "podgroups"

var (
	// ErrNotCreated is wrapped when a claim from a template has no entry in
	// the owner's status yet: the claim still has to be generated.
	ErrNotCreated = errors.New("ResourceClaim not created yet")

	// ErrUnsupported is wrapped when neither resourceClaimName nor
	// resourceClaimTemplateName is set, i.e. the API grew a field this code
	// does not know.
	ErrUnsupported = errors.New("none of the supported fields are set")
)

// Name resolves a pod's spec.resourceClaims entry to a ResourceClaim name.
//
//   - (name, false, nil): the entry names an existing claim directly.
//   - (name, true, nil): the claim was generated from a template; the caller
//     must check it with IsForPod before trusting it.
//   - (nil, _, nil): the claim was deliberately not created.
//   - an error wrapping ErrNotCreated or ErrUnsupported otherwise.
func Name(pod *v1.Pod, podClaim *v1.PodResourceClaim) (*string, bool, error) {
	if podClaim.ResourceClaimName != nil {
		return podClaim.ResourceClaimName, false, nil
	}
	if podClaim.ResourceClaimTemplateName == nil {
		return nil, false, fmt.Errorf(`pod "%s/%s", spec.resourceClaim %q: %w`, pod.Namespace, pod.Name, podClaim.Name, ErrUnsupported)
	}
	for _, status := range pod.Status.ResourceClaimStatuses {
		if status.Name == podClaim.Name {
			return status.ResourceClaimName, true, nil
		}
	}
	return nil, false, fmt.Errorf(`pod "%s/%s": %w`, pod.Namespace, pod.Name, ErrNotCreated)
}

// NameForPodGroup is Name for a PodGroup's spec.resourceClaims entry.
func NameForPodGroup(podGroup *schedulingapi.PodGroup, groupClaim *schedulingapi.PodGroupResourceClaim) (*string, bool, error) {
	if groupClaim.ResourceClaimName != nil {
		return groupClaim.ResourceClaimName, false, nil
	}
	if groupClaim.ResourceClaimTemplateName == nil {
		return nil, false, fmt.Errorf("PodGroup %s/%s, spec.resourceClaim %s: %w", podGroup.Namespace, podGroup.Name, groupClaim.Name, ErrUnsupported)
	}
	for _, status := range podGroup.Status.ResourceClaimStatuses {
		if status.Name == groupClaim.Name {
			return status.ResourceClaimName, true, nil
		}
	}
	return nil, false, fmt.Errorf("PodGroup %s/%s: %w", podGroup.Namespace, podGroup.Name, ErrNotCreated)
}

// PodGroupName returns the name of the PodGroup the pod belongs to, "" if none.
func PodGroupName(pod *v1.Pod) string {
	if pod.Spec.SchedulingGroup == nil || pod.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *pod.Spec.SchedulingGroup.PodGroupName
}

// IsForPod returns an error (worded for users) unless the claim was
// generated for the pod: same namespace and controlled by the pod or, with
// acceptPodGroupOwner (DRAWorkloadResourceClaims), by the pod's PodGroup.
func IsForPod(pod *v1.Pod, claim *resourceapi.ResourceClaim, acceptPodGroupOwner bool) error {
	if claim.Namespace != pod.Namespace {
		return fmt.Errorf("ResourceClaim %s/%s is not in the same namespace as Pod %s/%s", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
	}
	if metav1.IsControlledBy(claim, pod) {
		return nil
	}
	group := PodGroupName(pod)
	if !acceptPodGroupOwner || group == "" {
		return fmt.Errorf("ResourceClaim %s/%s was not created for Pod %s/%s (Pod is not owner)", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
	}
	// The pod does not know its PodGroup's UID, so the controller reference
	// is matched by group, kind and name (any version).
	owner := metav1.GetControllerOfNoCopy(claim)
	if owner == nil || owner.Kind != "PodGroup" || owner.Name != group ||
		!strings.HasPrefix(owner.APIVersion, schedulingapi.GroupName+"/") {
		return fmt.Errorf("ResourceClaim %s/%s was not created for Pod %s/%s (neither Pod nor PodGroup %s is the owner)", claim.Namespace, claim.Name, pod.Namespace, pod.Name, group)
	}
	return nil
}

// IsForPodGroup returns an error unless the claim was generated for the PodGroup.
func IsForPodGroup(podGroup *schedulingapi.PodGroup, claim *resourceapi.ResourceClaim) error {
	if claim.Namespace != podGroup.Namespace {
		return fmt.Errorf("ResourceClaim %s/%s is not in the same namespace as PodGroup %s/%s", claim.Namespace, claim.Name, podGroup.Namespace, podGroup.Name)
	}
	if !metav1.IsControlledBy(claim, podGroup) {
		return fmt.Errorf("ResourceClaim %s/%s was not created for PodGroup %s/%s (PodGroup is not owner)", claim.Namespace, claim.Name, podGroup.Namespace, podGroup.Name)
	}
	return nil
}

// IsReservedForPod reports whether claim.status.reservedFor lists the pod
// or, with acceptPodGroup (DRAWorkloadResourceClaims), the pod's PodGroup.
func IsReservedForPod(pod *v1.Pod, claim *resourceapi.ResourceClaim, acceptPodGroup bool) bool {
	group := PodGroupName(pod)
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.UID == pod.UID {
			return true
		}
		if acceptPodGroup && group != "" && IsPodGroupConsumer(consumer) && consumer.Name == group {
			return true
		}
	}
	return false
}

// IsPodConsumer reports whether a ReservedFor entry is a pod.
func IsPodConsumer(consumer resourceapi.ResourceClaimConsumerReference) bool {
	return consumer.APIGroup == "" && consumer.Resource == "pods"
}

// IsPodGroupConsumer reports whether a ReservedFor entry is a PodGroup.
func IsPodGroupConsumer(consumer resourceapi.ResourceClaimConsumerReference) bool {
	return consumer.APIGroup == schedulingapi.GroupName && consumer.Resource == PodGroupsResource
}

// BindTo returns the ReservedFor entry to use for the pod's claim: its
// PodGroup when the PodGroup declares the very same claim (podGroup is only
// passed with DRAWorkloadResourceClaims), the pod itself otherwise.
func BindTo(pod *v1.Pod, podGroup *schedulingapi.PodGroup, podClaim *v1.PodResourceClaim) (resourceapi.ResourceClaimConsumerReference, error) {
	if podClaim.ResourceClaimName == nil && podClaim.ResourceClaimTemplateName == nil {
		return resourceapi.ResourceClaimConsumerReference{}, fmt.Errorf("Pod %s/%s claim %s: %w", pod.Namespace, pod.Name, podClaim.Name, ErrUnsupported) //nolint:staticcheck // upstream's wording
	}
	if podGroup != nil {
		group := PodGroupName(pod)
		if group == "" {
			return resourceapi.ResourceClaimConsumerReference{}, fmt.Errorf("Pod %s/%s does not belong to a PodGroup", pod.Namespace, pod.Name) //nolint:staticcheck // upstream's wording
		}
		if pod.Namespace != podGroup.Namespace || group != podGroup.Name {
			return resourceapi.ResourceClaimConsumerReference{}, fmt.Errorf("Pod %s/%s belongs to PodGroup %s/%s, not PodGroup %s/%s", pod.Namespace, pod.Name, pod.Namespace, group, podGroup.Namespace, podGroup.Name) //nolint:staticcheck // upstream's wording
		}
		for _, groupClaim := range podGroup.Spec.ResourceClaims {
			if groupClaim.ResourceClaimName == nil && groupClaim.ResourceClaimTemplateName == nil {
				return resourceapi.ResourceClaimConsumerReference{}, fmt.Errorf("PodGroup %s/%s claim %s: %w", podGroup.Namespace, podGroup.Name, groupClaim.Name, ErrUnsupported)
			}
			if groupClaim.Name == podClaim.Name &&
				ptr.Equal(groupClaim.ResourceClaimName, podClaim.ResourceClaimName) &&
				ptr.Equal(groupClaim.ResourceClaimTemplateName, podClaim.ResourceClaimTemplateName) {
				return resourceapi.ResourceClaimConsumerReference{
					APIGroup: schedulingapi.GroupName,
					Resource: PodGroupsResource,
					Name:     podGroup.Name,
					UID:      podGroup.UID,
				}, nil
			}
		}
	}
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID}, nil
}

// All yields the name of every ResourceClaim the pod uses that exists by
// now, with whether IsForPod has to confirm it: the resolvable entries of
// spec.resourceClaims, then the claim the scheduler made for extended
// resources backed by DRA (status.extendedResourceClaimStatus).
func All(pod *v1.Pod) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		if pod == nil {
			return
		}
		for i := range pod.Spec.ResourceClaims {
			name, checkOwner, err := Name(pod, &pod.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			if !yield(*name, checkOwner) {
				return
			}
		}
		if ext := pod.Status.ExtendedResourceClaimStatus; ext != nil && ext.ResourceClaimName != "" {
			yield(ext.ResourceClaimName, true)
		}
	}
}

// StatusEqual compares two pod.status.resourceClaimStatuses lists entry by
// entry (order matters; it rarely changes).
func StatusEqual(a, b []v1.PodResourceClaimStatus) bool {
	return slices.EqualFunc(a, b, func(x, y v1.PodResourceClaimStatus) bool {
		return x.Name == y.Name && ptr.Equal(x.ResourceClaimName, y.ResourceClaimName)
	})
}

// ExtendedStatusEqual compares two pod.status.extendedResourceClaimStatus values.
func ExtendedStatusEqual(a, b *v1.PodExtendedResourceClaimStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ResourceClaimName == b.ResourceClaimName && slices.Equal(a.RequestMappings, b.RequestMappings)
}
