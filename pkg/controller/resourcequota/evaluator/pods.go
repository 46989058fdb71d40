package evaluator

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
)

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	// podObjectCount counts pods in any phase; "pods" only live ones.
	podObjectCount = ObjectCountQuotaResourceNameFor(podsGVR.GroupResource())
)

// podResources are the fixed names the pod evaluator measures.
var podResources = []corev1.ResourceName{
	podObjectCount,
	corev1.ResourceCPU,
	corev1.ResourceMemory,
	corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU,
	corev1.ResourceRequestsMemory,
	corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU,
	corev1.ResourceLimitsMemory,
	corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods,
}

// podResourcePrefixes name families it measures too (hugepages of any size).
var podResourcePrefixes = []string{corev1.ResourceHugePagesPrefix, corev1.ResourceRequestsHugePagesPrefix}

// nativeResource: unprefixed names and *kubernetes.io/ names are native.
func nativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// extendedResourceQuotaName reports whether a quota name is a request of an
// extended resource: requests.<non-native name>, or the implicit
// requests.deviceclass.resource.kubernetes.io/<class> of DRA. Extended
// resources cannot be overcommitted, so only requests are quota'd.
func extendedResourceQuotaName(name corev1.ResourceName) bool {
	s := string(name)
	implicit := strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix+resourceapi.ResourceDeviceClassPrefix)
	return (!nativeResource(name) || implicit) && strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}

// extendedResourceName reports whether a pod may request name as an
// extended resource (example.com/gpu), or a DRA device class by its
// implicit name.
func extendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, resourceapi.ResourceDeviceClassPrefix) {
		return true
	}
	if nativeResource(name) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// podEvaluator measures pods: counts and compute resources of pods that
// are not terminal.
type podEvaluator struct {
	list     ListFuncByNamespace
	clock    clock.Clock
	features Features
}

// Features are the feature gates the quota evaluators consult.
type Features struct {
	// PodLevelResources charges pod-level requests and limits.
	PodLevelResources bool
	// PodLevelResourcesFixKubeletQOSClass: an empty pod-level resources
	// stanza does not change the pod's QoS class.
	PodLevelResourcesFixKubeletQOSClass bool
}

// NewPodEvaluator measures pods listed through f; clk decides when a
// deleting pod's grace period is over.
func NewPodEvaluator(f ListerForResourceFunc, clk clock.Clock, features Features) Evaluator {
	return &podEvaluator{list: ListResourceUsingListerFunc(f, podsGVR), clock: clk, features: features}
}

func (p *podEvaluator) GroupResource() schema.GroupResource { return podsGVR.GroupResource() }

func (p *podEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := Intersection(input, podResources)
	for _, name := range input {
		if ContainsPrefix(podResourcePrefixes, name) {
			out = append(out, name)
		}
		if extendedResourceQuotaName(name) {
			out = append(out, name)
		}
	}
	return out
}

func (p *podEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	return PodUsage(item, p.clock, p.features)
}

func (p *podEvaluator) UsageStats(options UsageStatsOptions) (UsageStats, error) {
	matches := func(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object) (bool, error) {
		return podMatchesScope(sel, obj, p.features)
	}
	return CalculateUsageStats(options, p.list, matches, p.Usage)
}

func asPod(obj runtime.Object) (*corev1.Pod, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("expected *v1.Pod, got %T", obj)
	}
	return pod, nil
}

// PodUsage is what a pod is charged. count/pods always counts it; the
// compute resources and "pods" only while it is not terminal (see
// QuotaV1Pod).
func PodUsage(obj runtime.Object, clk clock.Clock, features Features) (corev1.ResourceList, error) {
	pod, err := asPod(obj)
	if err != nil {
		return corev1.ResourceList{}, err
	}
	out := corev1.ResourceList{podObjectCount: *resource.NewQuantity(1, resource.DecimalSI)}
	if !QuotaV1Pod(pod, clk) {
		return out, nil
	}
	podLevel := features.PodLevelResources
	return Add(out, podComputeUsage(podRequests(pod, podLevel), podLimits(pod, podLevel))), nil
}

// podComputeUsage maps a pod's requests and limits to quota names.
func podComputeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	pairs := []struct{ res, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	}
	for _, p := range pairs {
		if q, ok := requests[p.res]; ok {
			out[p.res] = q
			out[p.req] = q
		}
		if q, ok := limits[p.res]; ok {
			out[p.lim] = q
		}
	}
	for name, q := range requests {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			out[name] = q
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		}
		if extendedResourceName(name) {
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		}
	}
	return out
}

// QuotaV1Pod reports whether a pod is charged compute quota: not once it
// has succeeded or failed, and not once it has been deleting longer than
// its grace period (a lost node must not hold quota hostage).
func QuotaV1Pod(pod *corev1.Pod, clk clock.Clock) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		if clk.Now().After(pod.DeletionTimestamp.Add(grace)) {
			return false
		}
	}
	return true
}

// IsTerminating: a pod with an active deadline will end by itself.
func IsTerminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

func isBestEffort(pod *corev1.Pod, features Features) bool {
	return podQOS(pod, features.PodLevelResources, features.PodLevelResourcesFixKubeletQOSClass) == corev1.PodQOSBestEffort
}

// podMatchesScope decides the pod scopes. Scopes pods do not have (e.g.
// VolumeAttributesClass) never match.
func podMatchesScope(sel corev1.ScopedResourceSelectorRequirement, obj runtime.Object, features Features) (bool, error) {
	pod, err := asPod(obj)
	if err != nil {
		return false, err
	}
	switch sel.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !IsTerminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(pod, features), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(pod, features), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if sel.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		return podPriorityClassMatches(pod, sel)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return usesCrossNamespacePodAffinity(pod), nil
	}
	return false, nil
}

// podPriorityClassMatches evaluates an In/NotIn/DoesNotExist expression on
// the pod's priority class; a pod without one has no such label.
func podPriorityClassMatches(pod *corev1.Pod, sel corev1.ScopedResourceSelectorRequirement) (bool, error) {
	s, err := scopeSelectorAsLabelSelector(sel)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	set := labels.Set{}
	if pod.Spec.PriorityClassName != "" {
		set[string(corev1.ResourceQuotaScopePriorityClass)] = pod.Spec.PriorityClassName
	}
	return s.Matches(set), nil
}

// crossNamespaceTerm: a term naming namespaces or selecting them reaches
// beyond the pod's own namespace.
func crossNamespaceTerm(t *corev1.PodAffinityTerm) bool {
	return len(t.Namespaces) != 0 || t.NamespaceSelector != nil
}

func anyCrossNamespace(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) bool {
	for i := range required {
		if crossNamespaceTerm(&required[i]) {
			return true
		}
	}
	for i := range preferred {
		if crossNamespaceTerm(&preferred[i].PodAffinityTerm) {
			return true
		}
	}
	return false
}

func usesCrossNamespacePodAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	if pa := a.PodAffinity; pa != nil && anyCrossNamespace(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	if aa := a.PodAntiAffinity; aa != nil && anyCrossNamespace(aa.RequiredDuringSchedulingIgnoredDuringExecution, aa.PreferredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	return false
}
