package evaluator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/utils/clock"
)

// legacyObjectCountAliases: these resources were quota'd by plain names
// before count/<resource> existed; both names keep working.
var legacyObjectCountAliases = map[schema.GroupVersionResource]corev1.ResourceName{
	corev1.SchemeGroupVersion.WithResource("configmaps"):             corev1.ResourceConfigMaps,
	corev1.SchemeGroupVersion.WithResource("resourcequotas"):         corev1.ResourceQuotas,
	corev1.SchemeGroupVersion.WithResource("replicationcontrollers"): corev1.ResourceReplicationControllers,
	corev1.SchemeGroupVersion.WithResource("secrets"):                corev1.ResourceSecrets,
}

// NewEvaluators returns the evaluators with their own accounting (pods,
// services, persistentvolumeclaims, resourceclaims) and the aliased object
// counts. Everything else is counted by object-count evaluators the quota
// monitor adds as it discovers resources.
//
// f lists objects (normally ListerFuncForResourceFunc over the shared
// informers). i supplies the pod lister and the DeviceClass and
// ResourceClaim informers that charging DRA extended resources needs; with
// a nil i, claims are charged only by device class.
func NewEvaluators(f ListerForResourceFunc, i informers.SharedInformerFactory, features Features) ([]Evaluator, error) {
	claims := &claimEvaluator{list: ListResourceUsingListerFunc(f, resourceClaimsGVR), podFeatures: features}
	if i != nil {
		// DynamicResourceAllocation and DRAExtendedResource are GA and
		// locked on in v1.37.
		claims.deviceClasses = newDeviceClassCache()
		if _, err := i.Resource().V1().DeviceClasses().Informer().AddEventHandler(claims.deviceClasses); err != nil {
			return nil, fmt.Errorf("failed to add device class informer event handler: %w", err)
		}
		owners, err := claimsByOwnerPod(i.Resource().V1().ResourceClaims().Informer())
		if err != nil {
			return nil, err
		}
		claims.claimsOfPod = owners
		claims.pods = i.Core().V1().Pods().Lister()
	}
	out := []Evaluator{
		NewPodEvaluator(f, clock.RealClock{}, features),
		NewServiceEvaluator(f),
		NewPersistentVolumeClaimEvaluator(f),
		claims,
	}
	for gvr, alias := range legacyObjectCountAliases {
		out = append(out, NewObjectCountEvaluator(gvr.GroupResource(), ListResourceUsingListerFunc(f, gvr), alias))
	}
	return out, nil
}

// ignoredResources are never quota'd: virtual resources that are not
// stored, and events, which never were.
var ignoredResources = map[schema.GroupResource]struct{}{
	{Group: "", Resource: "bindings"}:                                      {},
	{Group: "", Resource: "componentstatuses"}:                             {},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
	{Group: "", Resource: "events"}:                                        {},
	{Group: eventsv1.GroupName, Resource: "events"}:                        {},
}

// DefaultIgnoredResources returns a copy of the resources quota ignores.
func DefaultIgnoredResources() map[schema.GroupResource]struct{} {
	out := make(map[schema.GroupResource]struct{}, len(ignoredResources))
	for gr := range ignoredResources {
		out[gr] = struct{}{}
	}
	return out
}

// UpdateFilter reports whether an update of an object of resource may
// change quota usage, and so should trigger a recalculation.
type UpdateFilter func(resource schema.GroupVersionResource, oldObj, newObj interface{}) bool

// DefaultUpdateFilter recalculates on the updates that change usage: a pod
// resized, changing its Terminating scope or becoming terminal; a service
// changing between ClusterIP-like, NodePort and LoadBalancer; any claim
// update. Adds are charged by admission; deletes always recalculate.
func DefaultUpdateFilter() UpdateFilter {
	return func(gvr schema.GroupVersionResource, oldObj, newObj interface{}) bool {
		switch gvr.GroupResource() {
		case podsGVR.GroupResource():
			oldPod, ok1 := oldObj.(*corev1.Pod)
			newPod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return false
			}
			// InPlacePodVerticalScaling is GA and locked on.
			if containerResourcesChanged(oldPod, newPod) || IsTerminating(oldPod) != IsTerminating(newPod) {
				return true
			}
			return QuotaV1Pod(oldPod, clock.RealClock{}) && !QuotaV1Pod(newPod, clock.RealClock{})
		case servicesGVR.GroupResource():
			oldSvc, ok1 := oldObj.(*corev1.Service)
			newSvc, ok2 := newObj.(*corev1.Service)
			return ok1 && ok2 && QuotaServiceType(oldSvc) != QuotaServiceType(newSvc)
		case pvcsGVR.GroupResource():
			oldPVC, ok1 := oldObj.(*corev1.PersistentVolumeClaim)
			newPVC, ok2 := newObj.(*corev1.PersistentVolumeClaim)
			return ok1 && ok2 && PVCRequiresReplenish(oldPVC, newPVC)
		}
		return false
	}
}

// containerResourcesChanged reports whether the runtime reports other
// resources for a container than before (an in-place resize took effect).
func containerResourcesChanged(oldPod, newPod *corev1.Pod) bool {
	return statusResourcesChanged(oldPod.Status.ContainerStatuses, newPod.Status.ContainerStatuses) ||
		statusResourcesChanged(oldPod.Status.InitContainerStatuses, newPod.Status.InitContainerStatuses)
}

func statusResourcesChanged(oldStatuses, newStatuses []corev1.ContainerStatus) bool {
	for i := range oldStatuses {
		for j := range newStatuses {
			if newStatuses[j].Name != oldStatuses[i].Name {
				continue
			}
			if !apiequality.Semantic.DeepEqual(oldStatuses[i].Resources, newStatuses[j].Resources) {
				return true
			}
			break
		}
	}
	return false
}
