package controller

import (
	"unique"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxInternedAnnotation bounds the annotation values interned: short ones
// (checksums, scrape ports, restart stamps) repeat across a template's
// pods; long ones, such as a last-applied configuration, rarely repeat and
// hashing them would cost more than it saves.
const maxInternedAnnotation = 256

// InternForCache makes obj share one copy of each string that many cached
// objects repeat: namespaces, label and annotation keys and values, owner
// references, and for pods, nodes and EndpointSlices the node names,
// images and status vocabulary. Decoding gives every object its own copy
// of every string, so a Deployment's pods each held the same bytes; after
// this the cache holds them once. Values are never changed, only where
// their bytes live; strings unique to one object (names, UIDs, IPs,
// resource versions) are left alone, interning them would save nothing.
//
// Lists that a template's pods all carry alike (containers, tolerations,
// owner references) are shared the same way: equal lists become one.
//
// Cached objects are read-only, so sharing is safe: a string can't be
// changed in place, a map replaced here is a copy with the same entries,
// and a controller copies a cached object before changing it (DeepCopy
// gives the copy lists of its own).
func InternForCache(obj interface{}) {
	if m, ok := obj.(metav1.Object); ok {
		internObjectMeta(m)
	}
	switch o := obj.(type) {
	case *v1.Pod:
		internPodSpec(&o.Spec)
		internPodStatus(&o.Status)
	case *v1.Node:
		internNodeStatus(&o.Status)
	case *discoveryv1.EndpointSlice:
		for i := range o.Endpoints {
			internEndpoint(&o.Endpoints[i])
		}
	}
}

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internAs interns a string-typed value (condition types, phases, ...).
func internAs[S ~string](s S) S { return S(intern(string(s))) }

func internPtr(p *string) *string {
	if p == nil {
		return nil
	}
	s := intern(*p)
	return &s
}

// internMap returns a copy of m with interned keys and the values keep
// accepts interned (a map key can't be replaced in place).
func internMap(m map[string]string, keep func(string) bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if keep(v) {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

func always(string) bool { return true }

func shortValue(v string) bool { return len(v) <= maxInternedAnnotation }

func internObjectMeta(m metav1.Object) {
	m.SetNamespace(intern(m.GetNamespace()))
	m.SetGenerateName(intern(m.GetGenerateName()))
	if l := m.GetLabels(); len(l) > 0 {
		m.SetLabels(internMap(l, always))
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		m.SetAnnotations(internMap(a, shortValue))
	}
	if f := m.GetFinalizers(); len(f) > 0 {
		for i := range f {
			f[i] = intern(f[i])
		}
	}
	if refs := m.GetOwnerReferences(); len(refs) > 0 {
		m.SetOwnerReferences(sharedOwnerRefs.canonical(refs, internOwnerRef))
	}
}

func internOwnerRef(r *metav1.OwnerReference) {
	r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
	r.UID = types.UID(intern(string(r.UID)))
}

var (
	sharedContainers  sliceCanon[v1.Container, *v1.Container]
	sharedTolerations sliceCanon[v1.Toleration, *v1.Toleration]
	sharedOwnerRefs   sliceCanon[metav1.OwnerReference, *metav1.OwnerReference]
)

func internPodSpec(spec *v1.PodSpec) {
	spec.NodeName = intern(spec.NodeName)
	spec.SchedulerName = intern(spec.SchedulerName)
	spec.ServiceAccountName = intern(spec.ServiceAccountName)
	spec.DeprecatedServiceAccount = intern(spec.DeprecatedServiceAccount)
	spec.PriorityClassName = intern(spec.PriorityClassName)
	spec.RestartPolicy = internAs(spec.RestartPolicy)
	spec.DNSPolicy = internAs(spec.DNSPolicy)
	spec.Subdomain = intern(spec.Subdomain)
	spec.RuntimeClassName = internPtr(spec.RuntimeClassName)
	if len(spec.NodeSelector) > 0 {
		spec.NodeSelector = internMap(spec.NodeSelector, always)
	}
	for i := range spec.EphemeralContainers {
		internContainerCommon(&spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	for i := range spec.ImagePullSecrets {
		spec.ImagePullSecrets[i].Name = intern(spec.ImagePullSecrets[i].Name)
	}
	spec.InitContainers = sharedContainers.canonical(spec.InitContainers, internContainer)
	spec.Containers = sharedContainers.canonical(spec.Containers, internContainer)
	spec.Tolerations = sharedTolerations.canonical(spec.Tolerations, internToleration)
}

func internToleration(t *v1.Toleration) {
	t.Key, t.Value = intern(t.Key), intern(t.Value)
	t.Operator, t.Effect = internAs(t.Operator), internAs(t.Effect)
}

func internContainerCommon(c *v1.EphemeralContainerCommon) {
	container := v1.Container(*c)
	internContainer(&container)
	*c = v1.EphemeralContainerCommon(container)
}

func internContainer(c *v1.Container) {
	c.Name, c.Image = intern(c.Name), intern(c.Image)
	c.ImagePullPolicy = internAs(c.ImagePullPolicy)
	c.TerminationMessagePath = intern(c.TerminationMessagePath)
	c.TerminationMessagePolicy = internAs(c.TerminationMessagePolicy)
	for i := range c.Ports {
		p := &c.Ports[i]
		p.Name, p.HostIP, p.Protocol = intern(p.Name), intern(p.HostIP), internAs(p.Protocol)
	}
	for i := range c.Env {
		c.Env[i].Name = intern(c.Env[i].Name)
	}
}

func internPodStatus(s *v1.PodStatus) {
	s.Phase = internAs(s.Phase)
	s.QOSClass = internAs(s.QOSClass)
	s.Reason = intern(s.Reason)
	s.HostIP = intern(s.HostIP)
	for i := range s.HostIPs {
		s.HostIPs[i].IP = intern(s.HostIPs[i].IP)
	}
	s.NominatedNodeName = intern(s.NominatedNodeName)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = internAs(c.Type), internAs(c.Status)
		c.Reason = intern(c.Reason)
	}
	for _, statuses := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range statuses {
			internContainerStatus(&statuses[i])
		}
	}
}

func internContainerStatus(c *v1.ContainerStatus) {
	c.Name, c.Image, c.ImageID = intern(c.Name), intern(c.Image), intern(c.ImageID)
	for _, state := range []*v1.ContainerState{&c.State, &c.LastTerminationState} {
		if w := state.Waiting; w != nil {
			w.Reason = intern(w.Reason)
		}
		if t := state.Terminated; t != nil {
			t.Reason = intern(t.Reason)
		}
	}
}

func internNodeStatus(s *v1.NodeStatus) {
	s.Phase = internAs(s.Phase)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = internAs(c.Type), internAs(c.Status)
		c.Reason, c.Message = intern(c.Reason), intern(c.Message)
	}
	for i := range s.Images {
		names := s.Images[i].Names
		for j := range names {
			names[j] = intern(names[j])
		}
	}
	info := &s.NodeInfo
	info.KernelVersion, info.OSImage = intern(info.KernelVersion), intern(info.OSImage)
	info.ContainerRuntimeVersion = intern(info.ContainerRuntimeVersion)
	info.KubeletVersion = intern(info.KubeletVersion)
	info.OperatingSystem, info.Architecture = intern(info.OperatingSystem), intern(info.Architecture)
}

func internEndpoint(e *discoveryv1.Endpoint) {
	e.NodeName = internPtr(e.NodeName)
	e.Zone = internPtr(e.Zone)
	if r := e.TargetRef; r != nil {
		r.Kind, r.Namespace, r.APIVersion = intern(r.Kind), intern(r.Namespace), intern(r.APIVersion)
	}
}
