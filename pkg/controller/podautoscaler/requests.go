package podautoscaler

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// calculateRequests returns each pod's request of resource (milli-value)
// that utilization is measured against: the named container's, or else
// the pod-level request when the pod sets one, or else the sum over its
// containers and sidecars. podLevel is the PodLevelResources feature.
func calculateRequests(pods []*v1.Pod, container string, res v1.ResourceName, podLevel bool) (map[string]int64, error) {
	requests := make(map[string]int64, len(pods))
	for _, pod := range pods {
		var request int64
		var err error
		// A container named in the HPA wins over pod-level requests.
		if podLevel && container == "" && podLevelRequestsSet(pod) {
			request, err = podLevelRequest(pod, res)
		} else {
			request, err = containersRequest(pod, container, res)
		}
		if err != nil {
			return nil, err
		}
		requests[pod.Name] = request
	}
	return requests, nil
}

// podLevelResource reports whether name can be set at pod level.
func podLevelResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// podLevelRequestsSet reports whether the pod requests any resource at pod
// level.
func podLevelRequestsSet(pod *v1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for name := range pod.Spec.Resources.Requests {
		if podLevelResource(name) {
			return true
		}
	}
	return false
}

// podLevelRequest is what the scheduler accounts for the pod: the pod-level
// request of res if set, else the containers' effective request, plus the
// pod overhead.
func podLevelRequest(pod *v1.Pod, res v1.ResourceName) (int64, error) {
	total, found := effectiveContainerRequests(pod)[res]
	if q, ok := pod.Spec.Resources.Requests[res]; ok && podLevelResource(res) {
		total, found = q.DeepCopy(), true
	}
	if q, ok := pod.Spec.Overhead[res]; ok {
		total.Add(q)
		found = true
	}
	if !found {
		return 0, fmt.Errorf("missing pod-level request for %s in Pod %s", res, pod.Name)
	}
	return total.MilliValue(), nil
}

// effectiveContainerRequests is the pod's peak container request per
// resource: the regular containers and sidecars together, or an init
// container with the sidecars started before it, whichever is larger.
func effectiveContainerRequests(pod *v1.Pod) v1.ResourceList {
	total := v1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addResources(total, c.Resources.Requests)
	}
	sidecars := v1.ResourceList{}
	peakInit := v1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			addResources(sidecars, c.Resources.Requests)
			addResources(total, c.Resources.Requests)
			maxResources(peakInit, sidecars)
			continue
		}
		during := sidecars.DeepCopy()
		addResources(during, c.Resources.Requests)
		maxResources(peakInit, during)
	}
	maxResources(total, peakInit)
	return total
}

func addResources(into, add v1.ResourceList) {
	for name, q := range add {
		cur := into[name]
		cur.Add(q)
		into[name] = cur
	}
}

func maxResources(into, other v1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q.DeepCopy()
		}
	}
}

func isSidecar(c v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// containersRequest sums the request of res over the regular containers and
// sidecars, or takes the named container's. Every counted container must
// request res.
func containersRequest(pod *v1.Pod, container string, res v1.ResourceName) (int64, error) {
	containers := append([]v1.Container{}, pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			containers = append(containers, c)
		}
	}
	var total int64
	for _, c := range containers {
		if container != "" && c.Name != container {
			continue
		}
		q, ok := c.Resources.Requests[res]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", res, c.Name, pod.Name)
		}
		total += q.MilliValue()
		if container != "" {
			// Container names are unique within a pod.
			return total, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return total, nil
}
