package statefulset

import (
	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The PVC retention policy is carried out by the garbage collector through
// owner references on the claims, which this file keeps in line with the
// policy:
//
//	whenScaled  whenDeleted  claim of a wanted pod  claim of a condemned pod
//	Retain      Retain       -                      -
//	Retain      Delete       set                    set
//	Delete      Retain       -                      pod
//	Delete      Delete       set                    pod
//
// Each reference is a controller reference. Claims whose references point
// at an older set or pod of the same name, or that another controller
// manages, are left alone (apart from dropping our own references when
// another controller showed up).

const (
	retainPolicy = apps.RetainPersistentVolumeClaimRetentionPolicyType
	deletePolicy = apps.DeletePersistentVolumeClaimRetentionPolicyType
)

// retentionPolicy returns the set's policy, Retain/Retain when unset.
func retentionPolicy(set *apps.StatefulSet) apps.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return *p
	}
	return apps.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retainPolicy, WhenScaled: retainPolicy}
}

// refersTo reports whether ref names obj as a gvk, whatever its UID.
func refersTo(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == obj.GetName()
}

// hasOwnerRef reports whether target lists owner (by UID) among its owners.
func hasOwnerRef(target, owner metav1.Object) bool {
	for _, ref := range target.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwnerRef reports whether the first reference of claim naming obj
// carries another UID: it was written for an earlier object of that name.
func hasStaleOwnerRef(claim *v1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for i := range claim.OwnerReferences {
		if refersTo(&claim.OwnerReferences[i], obj, gvk) {
			return claim.OwnerReferences[i].UID != obj.GetUID()
		}
	}
	return false
}

// hasUnexpectedController reports, for a policy that deletes anything,
// whether claim is controlled by something other than set and pod, or
// names them with the wrong UID.
func hasUnexpectedController(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	p := retentionPolicy(set)
	if p.WhenScaled == retainPolicy && p.WhenDeleted == retainPolicy {
		return false
	}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		switch {
		case refersTo(ref, set, controllerKind):
			if ref.UID != set.UID {
				return true
			}
		case refersTo(ref, pod, podKind):
			if ref.UID != pod.UID {
				return true
			}
		case ref.Controller != nil && *ref.Controller:
			return true
		}
	}
	return false
}

// hasNonControllerOwner reports whether set or pod own claim without being
// marked its controller.
func hasNonControllerOwner(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	for _, ref := range claim.OwnerReferences {
		if (ref.UID == set.UID || ref.UID == pod.UID) && (ref.Controller == nil || !*ref.Controller) {
			return true
		}
	}
	return false
}

// wantedClaimOwners says which of set and pod should own pod's claims.
func wantedClaimOwners(set *apps.StatefulSet, pod *v1.Pod) (bySet, byPod bool) {
	p := retentionPolicy(set)
	condemned := !inOrdinalRange(pod, set)
	switch {
	case p.WhenScaled == retainPolicy && p.WhenDeleted == deletePolicy:
		return true, false
	case p.WhenScaled == deletePolicy && p.WhenDeleted == retainPolicy:
		return false, condemned
	case p.WhenScaled == deletePolicy && p.WhenDeleted == deletePolicy:
		return !condemned, condemned
	default:
		// Retain/Retain, and any value we do not know, which is treated
		// as Retain.
		return false, false
	}
}

// claimOwnerUpToDate reports whether claim's owner references agree with
// the retention policy (or are in a state we must not touch).
func claimOwnerUpToDate(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) bool {
	if hasStaleOwnerRef(claim, set, controllerKind) || hasStaleOwnerRef(claim, pod, podKind) {
		// Left by a previous set or pod of the same name: not ours.
		return true
	}
	if hasUnexpectedController(claim, set, pod) {
		// Someone else manages it: up to date once we are off it.
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	}
	if hasNonControllerOwner(claim, set, pod) {
		return false
	}
	bySet, byPod := wantedClaimOwners(set, pod)
	return hasOwnerRef(claim, set) == bySet && hasOwnerRef(claim, pod) == byPod
}

// setClaimOwners rewrites claim's references to set and pod to match the
// retention policy; other owners are kept. With another controller in
// place, our references are only removed.
func setClaimOwners(claim *v1.PersistentVolumeClaim, set *apps.StatefulSet, pod *v1.Pod) {
	unexpected := hasUnexpectedController(claim, set, pod)
	refs := make([]metav1.OwnerReference, 0, len(claim.OwnerReferences)+1)
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		if !refersTo(ref, set, controllerKind) && !refersTo(ref, pod, podKind) {
			refs = append(refs, *ref)
		}
	}
	if !unexpected {
		bySet, byPod := wantedClaimOwners(set, pod)
		if byPod {
			refs = addControllerRef(refs, pod, podKind)
		}
		if bySet {
			refs = addControllerRef(refs, set, controllerKind)
		}
	}
	claim.OwnerReferences = refs
}

// addControllerRef appends a controller reference to owner unless one with
// its UID is already there.
func addControllerRef(refs []metav1.OwnerReference, owner metav1.Object, gvk schema.GroupVersionKind) []metav1.OwnerReference {
	for _, ref := range refs {
		if ref.UID == owner.GetUID() {
			return refs
		}
	}
	return append(refs, *metav1.NewControllerRef(owner, gvk))
}
