package statefulset

import (
	"regexp"
	"strconv"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// podNameRE splits "<parent>-<ordinal>"; the parent part is greedy, so
// "a-b-3" belongs to set "a-b".
var podNameRE = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// parentAndOrdinal returns the set name and ordinal encoded in a pod name,
// or ("", -1) for a name that is not "<parent>-<number>". An ordinal too
// large for an int32 gives the parent and -1.
func parentAndOrdinal(name string) (string, int) {
	m := podNameRE.FindStringSubmatch(name)
	if m == nil {
		return "", -1
	}
	ord, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return m[1], -1
	}
	return m[1], int(ord)
}

func getOrdinal(pod *v1.Pod) int {
	_, ord := parentAndOrdinal(pod.Name)
	return ord
}

// startOrdinal is the first ordinal of the set (.spec.ordinals.start).
func startOrdinal(set *apps.StatefulSet) int {
	if set.Spec.Ordinals != nil {
		return int(set.Spec.Ordinals.Start)
	}
	return 0
}

func specReplicas(set *apps.StatefulSet) int32 {
	if set.Spec.Replicas == nil {
		return 1
	}
	return *set.Spec.Replicas
}

// endOrdinal is the last ordinal of the set, inclusive.
func endOrdinal(set *apps.StatefulSet) int {
	return startOrdinal(set) + int(specReplicas(set)) - 1
}

// inOrdinalRange reports whether pod is one of the set's wanted replicas
// rather than one to scale away.
func inOrdinalRange(pod *v1.Pod, set *apps.StatefulSet) bool {
	ord := getOrdinal(pod)
	return ord >= startOrdinal(set) && ord <= endOrdinal(set)
}

func podName(set *apps.StatefulSet, ordinal int) string {
	return set.Name + "-" + strconv.Itoa(ordinal)
}

// claimName is "<template>-<set>-<ordinal>" (volume zone spreading relies
// on this shape too).
func claimName(set *apps.StatefulSet, template *v1.PersistentVolumeClaim, ordinal int) string {
	return template.Name + "-" + set.Name + "-" + strconv.Itoa(ordinal)
}

// isMemberOf reports whether pod's name says it belongs to set.
func isMemberOf(set *apps.StatefulSet, pod *v1.Pod) bool {
	parent, _ := parentAndOrdinal(pod.Name)
	return parent == set.Name
}

// identityMatches reports whether pod has the name, namespace and pod-name
// label of a member of set.
func identityMatches(set *apps.StatefulSet, pod *v1.Pod) bool {
	parent, ord := parentAndOrdinal(pod.Name)
	return ord >= 0 &&
		parent == set.Name &&
		pod.Name == podName(set, ord) &&
		pod.Namespace == set.Namespace &&
		pod.Labels[apps.StatefulSetPodNameLabel] == pod.Name
}

// storageMatches reports whether pod mounts, under each template's name,
// the claim the set gives its ordinal.
func storageMatches(set *apps.StatefulSet, pod *v1.Pod) bool {
	ord := getOrdinal(pod)
	if ord < 0 {
		return false
	}
	byName := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		byName[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for i := range set.Spec.VolumeClaimTemplates {
		tmpl := &set.Spec.VolumeClaimTemplates[i]
		vol, ok := byName[tmpl.Name]
		if !ok || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != claimName(set, tmpl, ord) {
			return false
		}
	}
	return true
}

// claimsFor returns the claims pod should have, in template order: copies
// of the templates, renamed for the pod and labelled with the set's
// selector labels.
func claimsFor(set *apps.StatefulSet, pod *v1.Pod) []v1.PersistentVolumeClaim {
	ord := getOrdinal(pod)
	out := make([]v1.PersistentVolumeClaim, 0, len(set.Spec.VolumeClaimTemplates))
	for i := range set.Spec.VolumeClaimTemplates {
		claim := set.Spec.VolumeClaimTemplates[i].DeepCopy()
		claim.Name = claimName(set, &set.Spec.VolumeClaimTemplates[i], ord)
		claim.Namespace = set.Namespace
		var selectorLabels map[string]string
		if set.Spec.Selector != nil {
			selectorLabels = set.Spec.Selector.MatchLabels
		}
		if claim.Labels == nil && selectorLabels != nil {
			claim.Labels = make(map[string]string, len(selectorLabels))
		}
		for k, v := range selectorLabels {
			claim.Labels[k] = v
		}
		out = append(out, *claim)
	}
	return out
}

// updateStorage makes pod mount its claims, replacing any volume of the
// same name, and keeps its other volumes after them.
func updateStorage(set *apps.StatefulSet, pod *v1.Pod) {
	claims := claimsFor(set, pod)
	isTemplate := make(map[string]bool, len(claims))
	volumes := make([]v1.Volume, 0, len(claims)+len(pod.Spec.Volumes))
	for i := range claims {
		tmplName := set.Spec.VolumeClaimTemplates[i].Name
		isTemplate[tmplName] = true
		volumes = append(volumes, v1.Volume{
			Name: tmplName,
			VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claims[i].Name},
			},
		})
	}
	for _, vol := range pod.Spec.Volumes {
		if !isTemplate[vol.Name] {
			volumes = append(volumes, vol)
		}
	}
	pod.Spec.Volumes = volumes
}

// updateIdentity fixes pod's name, namespace and identity labels.
func updateIdentity(set *apps.StatefulSet, pod *v1.Pod) {
	ord := getOrdinal(pod)
	pod.Name = podName(set, ord)
	pod.Namespace = set.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[apps.StatefulSetPodNameLabel] = pod.Name
	pod.Labels[apps.PodIndexLabel] = strconv.Itoa(ord)
}

// newStatefulSetPod builds the pod for ordinal from set's template. The
// hostname and subdomain are immutable, so only a new pod gets them.
func newStatefulSetPod(set *apps.StatefulSet, ordinal int) *v1.Pod {
	pod, _ := controller.GetPodFromTemplate(&set.Spec.Template, set, metav1.NewControllerRef(set, controllerKind))
	pod.Name = podName(set, ordinal)
	updateIdentity(set, pod)
	pod.Spec.Hostname = pod.Name
	pod.Spec.Subdomain = set.Spec.ServiceName
	updateStorage(set, pod)
	return pod
}

// newVersionedPod builds the pod for ordinal at the revision it should be
// created at: ordinals below the partition (or, without a rollingUpdate
// block, below status.currentReplicas) stay on the current revision.
//
// The condition keeps upstream's operator precedence: the partition test
// applies whatever the strategy type.
func newVersionedPod(currentSet, updateSet *apps.StatefulSet, currentRevision, updateRevision string, ordinal int) *v1.Pod {
	strategy := currentSet.Spec.UpdateStrategy
	start := startOrdinal(currentSet)
	belowCurrent := strategy.Type == apps.RollingUpdateStatefulSetStrategyType &&
		strategy.RollingUpdate == nil && ordinal < start+int(currentSet.Status.CurrentReplicas)
	belowPartition := strategy.RollingUpdate != nil && strategy.RollingUpdate.Partition != nil &&
		ordinal < start+int(*strategy.RollingUpdate.Partition)
	if belowCurrent || belowPartition {
		pod := newStatefulSetPod(currentSet, ordinal)
		setPodRevision(pod, currentRevision)
		return pod
	}
	pod := newStatefulSetPod(updateSet, ordinal)
	setPodRevision(pod, updateRevision)
	return pod
}

func setPodRevision(pod *v1.Pod, revision string) {
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[apps.StatefulSetRevisionLabel] = revision
}

func getPodRevision(pod *v1.Pod) string {
	return pod.Labels[apps.StatefulSetRevisionLabel]
}

// Pod states as the StatefulSet sees them.

// isCreated: the API server has the pod (it always sets a phase).
func isCreated(pod *v1.Pod) bool { return pod.Status.Phase != "" }

func isPending(pod *v1.Pod) bool { return pod.Status.Phase == v1.PodPending }

// isTerminal: Failed or Succeeded; either way the pod must be replaced.
func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded
}

func isTerminating(pod *v1.Pod) bool { return pod.DeletionTimestamp != nil }

func isRunningAndReady(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodRunning && controller.IsPodReady(pod)
}

func isAvailable(pod *v1.Pod, minReadySeconds int32, now metav1.Time) bool {
	return controller.IsPodAvailable(pod, minReadySeconds, now)
}

// isUnavailable: not available, or on its way out.
func isUnavailable(pod *v1.Pod, minReadySeconds int32, now metav1.Time) bool {
	return !isAvailable(pod, minReadySeconds, now) || isTerminating(pod)
}

// allowsBurst: Parallel pod management lifts the one-at-a-time ordering.
func allowsBurst(set *apps.StatefulSet) bool {
	return set.Spec.PodManagementPolicy == apps.ParallelPodManagement
}
