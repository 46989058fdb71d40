// Package util holds the DaemonSet helpers that other controllers and tests
// share with the DaemonSet controller: the tolerations every daemon pod
// gets, the pod template it creates pods from, node pinning through node
// affinity, update-strategy arithmetic and the scheduling checks (node
// affinity and taints) it evaluates for each node.
package util

import (
	"fmt"
	"strconv"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	intstrutil "k8s.io/apimachinery/pkg/util/intstr"
)

// TemplateGenerationLabelKey is the deprecated pod label carrying the
// DaemonSet's template generation (extensions/v1beta1's
// DaemonSetTemplateGenerationKey). It is still set so that pods created by
// old controllers keep being recognised as up to date.
const TemplateGenerationLabelKey = "pod-template-generation"

// GetTemplateGeneration reads the template generation from the DaemonSet's
// deprecated annotation: nil when it is absent, an error when it does not
// parse.
func GetTemplateGeneration(ds *apps.DaemonSet) (*int64, error) {
	s, ok := ds.Annotations[apps.DeprecatedTemplateGeneration]
	if !ok {
		return nil, nil
	}
	g, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// daemonTolerations are added to every daemon pod. The NoExecute ones have
// no tolerationSeconds, so node problems never evict a daemon pod; the
// NoSchedule ones let daemon pods land on nodes tainted by condition.
var daemonTolerations = []v1.Toleration{
	{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
	{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
}

// hostNetworkToleration is added only to host-network pods: they do not
// need the pod network, so a node without it can still run them.
var hostNetworkToleration = v1.Toleration{Key: v1.TaintNodeNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}

// AddOrUpdateDaemonPodTolerations adds the daemon tolerations to spec. A
// template toleration with the same key, operator, value and effect is
// replaced by the daemon one (so a tolerationSeconds on it is dropped), as
// upstream does. spec.Tolerations is always given a new slice, so a spec
// copied by value from a cached object leaves the cache untouched.
func AddOrUpdateDaemonPodTolerations(spec *v1.PodSpec) {
	for i := range daemonTolerations {
		addOrUpdateToleration(spec, daemonTolerations[i])
	}
	if spec.HostNetwork {
		addOrUpdateToleration(spec, hostNetworkToleration)
	}
}

func addOrUpdateToleration(spec *v1.PodSpec, t v1.Toleration) {
	out := make([]v1.Toleration, 0, len(spec.Tolerations)+1)
	replaced := false
	for i := range spec.Tolerations {
		if t.MatchToleration(&spec.Tolerations[i]) {
			out = append(out, t)
			replaced = true
			continue
		}
		out = append(out, spec.Tolerations[i])
	}
	if !replaced {
		out = append(out, t)
	}
	spec.Tolerations = out
}

// CreatePodTemplate returns a copy of template ready to stamp daemon pods
// from: daemon tolerations added, and labelled with the template
// generation (when known) and the revision hash (when non-empty).
func CreatePodTemplate(template v1.PodTemplateSpec, generation *int64, hash string) v1.PodTemplateSpec {
	t := *template.DeepCopy()
	AddOrUpdateDaemonPodTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if generation != nil {
		t.Labels[TemplateGenerationLabelKey] = strconv.FormatInt(*generation, 10)
	}
	if hash != "" {
		t.Labels[apps.DefaultDaemonSetUniqueLabelKey] = hash
	}
	return t
}

// AllowsSurge reports whether the DaemonSet may run two pods on a node
// during an update.
func AllowsSurge(ds *apps.DaemonSet) bool {
	n, err := SurgeCount(ds, 1)
	return err == nil && n > 0
}

func rollingUpdateParams(ds *apps.DaemonSet) *apps.RollingUpdateDaemonSet {
	if ds.Spec.UpdateStrategy.Type != apps.RollingUpdateDaemonSetStrategyType {
		return nil
	}
	return ds.Spec.UpdateStrategy.RollingUpdate
}

// SurgeCount is maxSurge scaled against numberToSchedule (percentages round
// up); 0 unless the strategy is RollingUpdate with maxSurge set.
func SurgeCount(ds *apps.DaemonSet, numberToSchedule int) (int, error) {
	r := rollingUpdateParams(ds)
	if r == nil || r.MaxSurge == nil {
		return 0, nil
	}
	return intstrutil.GetScaledValueFromIntOrPercent(r.MaxSurge, numberToSchedule, true)
}

// UnavailableCount is maxUnavailable scaled against numberToSchedule
// (percentages round up); 0 unless the strategy is RollingUpdate.
func UnavailableCount(ds *apps.DaemonSet, numberToSchedule int) (int, error) {
	r := rollingUpdateParams(ds)
	if r == nil {
		return 0, nil
	}
	return intstrutil.GetScaledValueFromIntOrPercent(r.MaxUnavailable, numberToSchedule, true)
}

// IsPodUpdated reports whether pod runs the current template: its revision
// hash label equals hash, or (for pods of old controllers) its template
// generation label equals the DaemonSet's generation.
func IsPodUpdated(pod *v1.Pod, hash string, dsTemplateGeneration *int64) bool {
	if hash != "" && pod.Labels[apps.DefaultDaemonSetUniqueLabelKey] == hash {
		return true
	}
	return dsTemplateGeneration != nil && pod.Labels[TemplateGenerationLabelKey] == strconv.FormatInt(*dsTemplateGeneration, 10)
}

// ReplaceDaemonSetPodNodeNameNodeAffinity pins a pod to nodeName: the
// required node affinity terms become a single matchFields term on
// metadata.name, so the scheduler can only place it there. Other affinity
// (preferred terms, pod affinity) is kept. Callers must have checked that
// the node satisfies the original terms. affinity is modified in place
// when non-nil.
func ReplaceDaemonSetPodNodeNameNodeAffinity(affinity *v1.Affinity, nodeName string) *v1.Affinity {
	terms := []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{
			Key:      metav1.ObjectNameField,
			Operator: v1.NodeSelectorOpIn,
			Values:   []string{nodeName},
		}},
	}}
	if affinity == nil {
		affinity = &v1.Affinity{}
	}
	if affinity.NodeAffinity == nil {
		affinity.NodeAffinity = &v1.NodeAffinity{}
	}
	na := affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &v1.NodeSelector{}
	}
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = terms
	return affinity
}

// GetTargetNodeName returns the node a daemon pod is for: spec.nodeName
// once bound, otherwise the metadata.name matchFields value its required
// node affinity pins it to.
func GetTargetNodeName(pod *v1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", fmt.Errorf("no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod %s/%s", pod.Namespace, pod.Name)
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return "", fmt.Errorf("no nodeSelectorTerms in requiredDuringSchedulingIgnoredDuringExecution of pod %s/%s", pod.Namespace, pod.Name)
	}
	for _, term := range terms {
		for _, req := range term.MatchFields {
			if req.Key != metav1.ObjectNameField || req.Operator != v1.NodeSelectorOpIn {
				continue
			}
			if len(req.Values) != 1 {
				return "", fmt.Errorf("the matchFields value of '%s' is not unique for pod %s/%s", metav1.ObjectNameField, pod.Namespace, pod.Name)
			}
			return req.Values[0], nil
		}
	}
	return "", fmt.Errorf("no node name found for pod %s/%s", pod.Namespace, pod.Name)
}
