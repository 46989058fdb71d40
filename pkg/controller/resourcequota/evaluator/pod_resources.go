package evaluator

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The pod arithmetic below follows component-helpers' PodRequests and
// PodLimits as quota calls them: status resources considered (in-place
// resize is GA), pod-level resources applied unless skipped, overhead
// included.

// podLevelResource reports whether name may be set in pod.spec.resources.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func anyPodLevel(list corev1.ResourceList) bool {
	for name := range list {
		if podLevelResource(name) {
			return true
		}
	}
	return false
}

// podLevelResourcesSet reports whether the pod sets a supported pod-level
// request or limit.
func podLevelResourcesSet(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && (anyPodLevel(r.Requests) || anyPodLevel(r.Limits))
}

func podLevelRequestsSet(pod *corev1.Pod) bool {
	return pod.Spec.Resources != nil && anyPodLevel(pod.Spec.Resources.Requests)
}

// resizeInfeasible: the kubelet refused a resize, so the spec is not what
// the pod will get and only what it has counts.
func resizeInfeasible(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizePending {
			return c.Reason == corev1.PodReasonInfeasible
		}
	}
	return false
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	for i := range pod.Status.InitContainerStatuses {
		if pod.Status.InitContainerStatuses[i].Name == name {
			return &pod.Status.InitContainerStatuses[i]
		}
	}
	return nil
}

// perContainer picks one container's resources from its spec and status.
type perContainer func(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList

func specRequests(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Requests
}

func allocatedRequests(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	switch {
	case cs != nil && cs.AllocatedResources != nil:
		return cs.AllocatedResources
	case infeasible:
		return nil
	}
	return c.Resources.Requests
}

func actuatedRequests(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	switch {
	case cs != nil && cs.Resources != nil && cs.Resources.Requests != nil:
		return cs.Resources.Requests
	case cs != nil && cs.AllocatedResources != nil:
		return cs.AllocatedResources
	case infeasible:
		return nil
	}
	return c.Resources.Requests
}

func specLimits(c *corev1.Container, _ *corev1.ContainerStatus, _ bool) corev1.ResourceList {
	return c.Resources.Limits
}

func actuatedLimits(c *corev1.Container, cs *corev1.ContainerStatus, infeasible bool) corev1.ResourceList {
	switch {
	case cs != nil && cs.Resources != nil && cs.Resources.Limits != nil:
		return cs.Resources.Limits
	case infeasible:
		return nil
	}
	return c.Resources.Limits
}

// addInto adds src to dst in place.
func addInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; ok {
			cur.Add(q)
			dst[name] = cur
		} else {
			dst[name] = q.DeepCopy()
		}
	}
}

// maxInto raises dst to src per resource, in place.
func maxInto(dst, src corev1.ResourceList) {
	for name, q := range src {
		if cur, ok := dst[name]; !ok || q.Cmp(cur) > 0 {
			dst[name] = q.DeepCopy()
		}
	}
}

func maxOf(lists ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range lists {
		maxInto(out, l)
	}
	return out
}

// aggregateContainers sums regular and sidecar containers, then takes the
// larger of that and the peak of the init phase: each ordinary init
// container runs alone next to the sidecars started before it.
func aggregateContainers(pod *corev1.Pod, pick perContainer, infeasible bool) corev1.ResourceList {
	total := corev1.ResourceList{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		addInto(total, pick(c, containerStatus(pod, c.Name), infeasible))
	}
	sidecars := corev1.ResourceList{}
	initPeak := corev1.ResourceList{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		own := pick(c, containerStatus(pod, c.Name), infeasible)
		var phase corev1.ResourceList
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addInto(total, own)
			addInto(sidecars, own)
			phase = sidecars
		} else {
			phase = corev1.ResourceList{}
			addInto(phase, own)
			addInto(phase, sidecars)
		}
		maxInto(initPeak, phase)
	}
	maxInto(total, initPeak)
	return total
}

// podRequests is the pod's effective requests: the largest of what its
// spec asks, the kubelet allocated and the runtime actuated (only the
// latter two if a resize is infeasible), pod-level requests overriding,
// plus overhead.
func podRequests(pod *corev1.Pod, podLevel bool) corev1.ResourceList {
	infeasible := resizeInfeasible(pod)
	spec := aggregateContainers(pod, specRequests, infeasible)
	allocated := aggregateContainers(pod, allocatedRequests, infeasible)
	actuated := aggregateContainers(pod, actuatedRequests, infeasible)
	var reqs corev1.ResourceList
	if infeasible {
		reqs = maxOf(actuated, allocated)
	} else {
		reqs = maxOf(spec, actuated, allocated)
	}
	if podLevel && podLevelRequestsSet(pod) {
		for name, q := range pod.Spec.Resources.Requests {
			if podLevelResource(name) {
				reqs[name] = q
			}
		}
	}
	if pod.Spec.Overhead != nil {
		addInto(reqs, pod.Spec.Overhead)
	}
	return reqs
}

// podLimits is podRequests' counterpart for limits; overhead is only added
// to limits that are set.
func podLimits(pod *corev1.Pod, podLevel bool) corev1.ResourceList {
	infeasible := resizeInfeasible(pod)
	actuated := aggregateContainers(pod, actuatedLimits, infeasible)
	var limits corev1.ResourceList
	if infeasible {
		limits = maxOf(actuated)
	} else {
		limits = maxOf(aggregateContainers(pod, specLimits, infeasible), actuated)
	}
	if podLevel && podLevelResourcesSet(pod) {
		for name, q := range pod.Spec.Resources.Limits {
			if podLevelResource(name) {
				limits[name] = q
			}
		}
	}
	for name, q := range pod.Spec.Overhead {
		if cur, ok := limits[name]; ok && !cur.IsZero() {
			cur.Add(q)
			limits[name] = cur
		}
	}
	return limits
}

// podQOS is the pod's QoS class: the one in status if the kubelet set it,
// else computed from the spec.
func podQOS(pod *corev1.Pod, podLevel, podLevelQOSFix bool) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	if podLevel && pod.Spec.Resources != nil && (!podLevelQOSFix || podLevelResourcesSet(pod)) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	check := func(c *corev1.Container) bool {
		cq := requirementsQOS(&c.Resources)
		switch {
		case cq == corev1.PodQOSBurstable:
			class = cq
			return false
		case class == "":
			class = cq
		case class != cq:
			// BestEffort next to Guaranteed.
			class = corev1.PodQOSBurstable
			return false
		}
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !check(&pod.Spec.InitContainers[i]) {
			return class
		}
	}
	for i := range pod.Spec.Containers {
		if !check(&pod.Spec.Containers[i]) {
			return class
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS classifies one set of requirements by cpu and memory.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var class corev1.PodQOSClass
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		var rc corev1.PodQOSClass
		switch {
		case !req.Equal(lim):
			return corev1.PodQOSBurstable
		case req.IsZero():
			rc = corev1.PodQOSBestEffort
		default:
			rc = corev1.PodQOSGuaranteed
		}
		if class == "" {
			class = rc
		} else if class != rc {
			return corev1.PodQOSBurstable
		}
	}
	return class
}
