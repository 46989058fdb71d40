package evaluator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

var (
	resourceClaimsGVR = resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	// ClaimObjectCount is count/resourceclaims.resource.k8s.io; this
	// evaluator owns the group/resource, so it counts objects too.
	ClaimObjectCount = ObjectCountQuotaResourceNameFor(resourceClaimsGVR.GroupResource())
)

// ResourceByDeviceClass is the quota name of devices of a class requested
// by claims: <class>.deviceclass.resource.k8s.io/devices.
func ResourceByDeviceClass(class string) corev1.ResourceName {
	return corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
}

// claimOwnersFunc lists the extended-resource claims a pod owns.
type claimOwnersFunc func(namespace string, podUID types.UID) ([]*resourceapi.ResourceClaim, error)

// claimEvaluator counts resource claims and the devices they request per
// device class. Claims the scheduler creates for a pod's extended
// resources are charged under the extended resource names too, minus what
// the pod itself is already charged.
type claimEvaluator struct {
	list          ListFuncByNamespace
	deviceClasses *deviceClassCache
	pods          corelisters.PodLister
	claimsOfPod   claimOwnersFunc
	// podFeatures measure the owner pod's usage.
	podFeatures Features
}

func (c *claimEvaluator) GroupResource() schema.GroupResource {
	return resourceClaimsGVR.GroupResource()
}

func (c *claimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := []corev1.ResourceName{}
	for _, name := range input {
		s := string(name)
		if name == ClaimObjectCount || strings.HasSuffix(s, corev1.ResourceClaimsPerClass) {
			out = append(out, name)
			continue
		}
		if class, ok := strings.CutPrefix(s, corev1.ResourceImplicitExtendedClaimsPerClass); ok && c.deviceClasses.extendedResourceOf(class) != "" {
			out = append(out, name)
			continue
		}
		if extendedResourceQuotaName(name) && c.deviceClasses.classFor(name[len(corev1.DefaultResourceRequestsPrefix):]) != nil {
			out = append(out, name)
		}
	}
	return out
}

// devicesRequested is the worst-case device count of one request: All
// counts as the most a claim can be allocated; unknown modes count 0.
func devicesRequested(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	switch mode {
	case resourceapi.DeviceAllocationModeExactCount:
		return count
	case resourceapi.DeviceAllocationModeAll:
		return resourceapi.AllocationResultsMaxSize
	}
	return 0
}

func addQuantity(list corev1.ResourceList, name corev1.ResourceName, n int64) {
	q := list[name]
	q.Add(*resource.NewQuantity(n, resource.DecimalSI))
	list[name] = q
}

func (c *claimEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	claim, ok := item.(*resourceapi.ResourceClaim)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expected *v1.ResourceClaim, got %T", item)
	}
	out := corev1.ResourceList{ClaimObjectCount: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, req := range claim.Spec.Devices.Requests {
		switch {
		case len(req.FirstAvailable) > 0:
			// Any alternative may be chosen: charge each class the most
			// any alternative could take of it.
			worst := map[corev1.ResourceName]int64{}
			for _, sub := range req.FirstAvailable {
				name := ResourceByDeviceClass(sub.DeviceClassName)
				if n := devicesRequested(sub.AllocationMode, sub.Count); n > worst[name] {
					worst[name] = n
				}
			}
			for name, n := range worst {
				addQuantity(out, name, n)
			}
		case req.Exactly != nil:
			addQuantity(out, ResourceByDeviceClass(req.Exactly.DeviceClassName), devicesRequested(req.Exactly.AllocationMode, req.Exactly.Count))
		}
	}
	c.addExtendedResourceUsage(out, c.ownerPodUsage(claim))
	return out, nil
}

// addExtendedResourceUsage charges each class's devices under the class's
// implicit and explicit extended resource names too, less what the owning
// pod's own usage already holds of them.
func (c *claimEvaluator) addExtendedResourceUsage(usage, podUsage corev1.ResourceList) {
	extra := corev1.ResourceList{}
	for name, q := range usage {
		class, ok := strings.CutSuffix(string(name), corev1.ResourceClaimsPerClass)
		if !ok || class == "" {
			continue
		}
		extra[corev1.ResourceName(corev1.ResourceImplicitExtendedClaimsPerClass+class)] = q
		if er := c.deviceClasses.extendedResourceOf(class); er != "" {
			extra[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+er)] = q
		}
	}
	for name, q := range extra {
		if inPod, ok := podUsage[name]; ok {
			q.Sub(inPod)
		}
		if q.CmpInt64(0) > 0 {
			usage[name] = q
		}
	}
}

// ownerPodUsage returns the quota usage of the pod a scheduler-created
// extended-resource claim belongs to, or nil when the claim is not one, the
// pod is gone, or the pod does not consider this claim its own (it names
// another, or an older claim of the pod exists).
func (c *claimEvaluator) ownerPodUsage(claim *resourceapi.ResourceClaim) corev1.ResourceList {
	if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" || c.pods == nil {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(claim)
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return nil
	}
	pod, err := c.pods.Pods(claim.Namespace).Get(ref.Name)
	if err != nil || pod.UID != ref.UID {
		return nil
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if st.ResourceClaimName != claim.Name {
			return nil
		}
	} else {
		owned, err := c.claimsOfPod(claim.Namespace, pod.UID)
		if err != nil {
			return nil
		}
		for _, other := range owned {
			switch other.CreationTimestamp.Compare(claim.CreationTimestamp.Time) {
			case -1:
				return nil
			case 0:
				if other.Name < claim.Name {
					return nil
				}
			}
		}
	}
	usage, err := PodUsage(pod, clock.RealClock{}, c.podFeatures)
	if err != nil {
		return nil
	}
	return usage
}

func (c *claimEvaluator) UsageStats(options UsageStatsOptions) (UsageStats, error) {
	return CalculateUsageStats(options, c.list, MatchesNoScope, c.Usage)
}

const claimsByOwnerPodIndex = "extendedResourceClaimPodUIDOwner"

func ownerPodKey(namespace string, uid types.UID) string { return namespace + "/" + string(uid) }

// indexClaimByOwnerPod indexes scheduler-created extended-resource claims
// by the pod controlling them.
func indexClaimByOwnerPod(obj interface{}) ([]string, error) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok || claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(claim)
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return nil, nil
	}
	return []string{ownerPodKey(claim.Namespace, ref.UID)}, nil
}

// claimsByOwnerPod adds the owner index to the claim informer (unless
// another user already did) and returns a lookup through it.
func claimsByOwnerPod(inf cache.SharedIndexInformer) (claimOwnersFunc, error) {
	if err := inf.AddIndexers(cache.Indexers{claimsByOwnerPodIndex: indexClaimByOwnerPod}); err != nil {
		if _, exists := inf.GetIndexer().GetIndexers()[claimsByOwnerPodIndex]; !exists {
			return nil, fmt.Errorf("failed to add resource claim pod owner indexer: %w", err)
		}
	}
	indexer := inf.GetIndexer()
	return func(namespace string, uid types.UID) ([]*resourceapi.ResourceClaim, error) {
		objs, err := indexer.ByIndex(claimsByOwnerPodIndex, ownerPodKey(namespace, uid))
		if err != nil {
			return nil, err
		}
		out := make([]*resourceapi.ResourceClaim, 0, len(objs))
		for _, o := range objs {
			claim, ok := o.(*resourceapi.ResourceClaim)
			if !ok {
				return nil, fmt.Errorf("unexpected %T in the resource claim index", o)
			}
			out = append(out, claim)
		}
		return out, nil
	}, nil
}
