package controller

import v1 "k8s.io/api/core/v1"

// TrimPodForCache drops from a pod the parts of its spec no controller of
// this manager reads, before the pod enters a shared informer's cache:
// commands, arguments, probes, lifecycle hooks, volume mounts and the
// container security contexts, environment entries that name no Secret,
// and volumes that are neither claims, nor attachable, nor carry a Secret
// (the service account's projected token volume, ConfigMaps, emptyDirs,
// the downward API). Pods are the largest and most numerous objects cached;
// these parts are a large share of each.
//
// Metadata and status are untouched, and so is every field a controller
// reads: names, images, ports, resources, restart policies, node and
// scheduling fields, claims, and the Secret references the legacy token
// cleaner looks for. A pod's spec is immutable where it was trimmed and
// the pods/status endpoint ignores the spec sent, so status writes of a
// cached pod lose nothing; a controller that updates a pod itself must read
// the full pod first (the StatefulSet controller does).
//
// The SELinux warning controller reads volumes, mounts and security
// contexts: callers keep whole pods when it runs.
func TrimPodForCache(pod *v1.Pod) {
	UpdateContainers(&pod.Spec, trimContainer)
	pod.Spec.Volumes = keep(pod.Spec.Volumes, func(v *v1.Volume) bool { return !unreadVolume(&v.VolumeSource) })
}

// UpdateContainers calls update on each init, regular and ephemeral
// container of spec, in place (an ephemeral container as a Container: the
// two types have the same fields).
func UpdateContainers(spec *v1.PodSpec, update func(*v1.Container)) {
	for i := range spec.InitContainers {
		update(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		update(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		c := v1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		update(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = v1.EphemeralContainerCommon(c)
	}
}

func trimContainer(c *v1.Container) {
	c.Command, c.Args, c.WorkingDir = nil, nil, ""
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	c.VolumeMounts, c.VolumeDevices, c.SecurityContext = nil, nil, nil
	c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "", "", ""
	c.Env = keep(c.Env, func(e *v1.EnvVar) bool { return e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil })
	c.EnvFrom = keep(c.EnvFrom, func(e *v1.EnvFromSource) bool { return e.SecretRef != nil })
}

// unreadVolume reports a source no controller looks at: not a claim, not
// attachable, no Secret in it.
func unreadVolume(src *v1.VolumeSource) bool {
	switch {
	case src.EmptyDir != nil, src.ConfigMap != nil, src.DownwardAPI != nil:
		return true
	case src.Projected != nil:
		for _, p := range src.Projected.Sources {
			if p.Secret != nil {
				return false
			}
		}
		return true
	}
	return false
}

// keep returns the elements of s for which want holds, in a slice of their
// own size when any is dropped: the original backing array would otherwise
// stay reachable, dropped elements and all.
func keep[T any](s []T, want func(*T) bool) []T {
	n := 0
	for i := range s {
		if want(&s[i]) {
			n++
		}
	}
	switch n {
	case len(s):
		return s
	case 0:
		return nil
	}
	kept := make([]T, 0, n)
	for i := range s {
		if want(&s[i]) {
			kept = append(kept, s[i])
		}
	}
	return kept
}
