package selinuxwarning

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// mountedVolumes returns the names of the pod's volumes that some container
// mounts (in first-mount order) and, per volume, the effective SELinux
// options of each container mounting it.
func mountedVolumes(pod *v1.Pod) ([]string, map[string][]*v1.SELinuxOptions) {
	var names []string
	opts := map[string][]*v1.SELinuxOptions{}
	visit := func(mounts []v1.VolumeMount, sc *v1.SecurityContext) {
		o := effectiveSELinuxOptions(pod, sc)
		for _, m := range mounts {
			if !slices.Contains(names, m.Name) {
				names = append(names, m.Name)
			}
			if o != nil {
				opts[m.Name] = append(opts[m.Name], o)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		visit(pod.Spec.InitContainers[i].VolumeMounts, pod.Spec.InitContainers[i].SecurityContext)
	}
	for i := range pod.Spec.Containers {
		visit(pod.Spec.Containers[i].VolumeMounts, pod.Spec.Containers[i].SecurityContext)
	}
	for i := range pod.Spec.EphemeralContainers {
		visit(pod.Spec.EphemeralContainers[i].VolumeMounts, pod.Spec.EphemeralContainers[i].SecurityContext)
	}
	return names, opts
}

// effectiveSELinuxOptions: the container's options replace the pod's as a
// whole.
func effectiveSELinuxOptions(pod *v1.Pod, sc *v1.SecurityContext) *v1.SELinuxOptions {
	if sc != nil && sc.SELinuxOptions != nil {
		return sc.SELinuxOptions
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.SELinuxOptions
	}
	return nil
}

// errMultipleLabels: the containers of one pod use a volume with different
// labels, which no mount can satisfy.
type errMultipleLabels struct{ labels []string }

func (e *errMultipleLabels) Error() string {
	return fmt.Sprintf("multiple SELinux labels found: %v", e.labels)
}

// mountLabel is the label the kubelet would pass as -o context for a volume
// mounted by containers with opts: "" when none sets a label, the pod opted
// into Recursive relabeling or the plugin cannot mount with a context.
func mountLabel(pod *v1.Pod, opts []*v1.SELinuxOptions, supportsContextMount bool) (string, error) {
	labels := sets.New[string]()
	for _, o := range opts {
		labels.Insert(optionsToLabel(o))
	}
	if labels.Len() > 1 {
		return "", &errMultipleLabels{labels: sets.List(labels)}
	}
	if labels.Len() == 0 || !supportsContextMount || podPolicy(pod) == v1.SELinuxChangePolicyRecursive {
		return "", nil
	}
	label, _ := labels.PopAny()
	return label, nil
}

// podPolicy is the pod's SELinuxChangePolicy, MountOption when unset.
func podPolicy(pod *v1.Pod) v1.PodSELinuxChangePolicy {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SELinuxChangePolicy != nil {
		return *sc.SELinuxChangePolicy
	}
	return v1.SELinuxChangePolicyMountOption
}
