package controller

import (
	"math"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// phaseOrder ranks pod phases for deletion: pending pods go first.
// Phases not listed (terminal ones) rank like Pending, as upstream.
var phaseOrder = map[v1.PodPhase]int{v1.PodPending: 0, v1.PodUnknown: 1, v1.PodRunning: 2}

// ActivePods sorts pods so the best candidates for deletion come first:
// unassigned, then earlier phase, not ready, ready more recently, more
// restarts, created more recently.
type ActivePods []*v1.Pod

func (s ActivePods) Len() int      { return len(s) }
func (s ActivePods) Swap(i, j int) { s[i], s[j] = s[j], s[i] }
func (s ActivePods) Less(i, j int) bool {
	if r, ok := compareScheduleState(s[i], s[j]); ok {
		return r
	}
	if IsPodReady(s[i]) && IsPodReady(s[j]) {
		ti, tj := readySince(s[i]), readySince(s[j])
		if !ti.Equal(tj) {
			return laterOrZero(ti, tj)
		}
	}
	if r, ok := compareRestarts(s[i], s[j]); ok {
		return r
	}
	if !s[i].CreationTimestamp.Equal(&s[j].CreationTimestamp) {
		return laterOrZero(&s[i].CreationTimestamp, &s[j].CreationTimestamp)
	}
	return false
}

// ActivePodsWithRanks sorts pods so the best candidates for deletion come
// first. Rules, in order, the first that tells the pods apart wins:
//
//  1. a pod not assigned to a node before an assigned one;
//  2. Pending before Unknown before Running;
//  3. not ready before ready;
//  4. lower controller.kubernetes.io/pod-deletion-cost first (with
//     DeletionCost set);
//  5. higher Rank first (Rank counts related pods on the same node);
//  6. both ready: ready more recently first;
//  7. more container restarts first (regular, then sidecar);
//  8. created more recently first.
//
// With Now set, 6 and 8 compare log2 of the age, so pods of similar age are
// equal and then ordered by UID (a stable pseudo-random pick, which spreads
// scale-downs instead of always hitting the youngest pod).
type ActivePodsWithRanks struct {
	Pods []*v1.Pod
	// Rank has one entry per pod.
	Rank []int
	// Now is the reference time for the logarithmic comparison; zero
	// compares plain timestamps.
	Now metav1.Time
	// DeletionCost (the PodDeletionCost feature) enables rule 4.
	DeletionCost bool
}

func (s ActivePodsWithRanks) Len() int { return len(s.Pods) }
func (s ActivePodsWithRanks) Swap(i, j int) {
	s.Pods[i], s.Pods[j] = s.Pods[j], s.Pods[i]
	s.Rank[i], s.Rank[j] = s.Rank[j], s.Rank[i]
}

// Less reports whether pod i should be deleted before pod j.
func (s ActivePodsWithRanks) Less(i, j int) bool {
	pi, pj := s.Pods[i], s.Pods[j]
	if r, ok := compareScheduleState(pi, pj); ok {
		return r
	}
	if s.DeletionCost {
		ci, _ := GetDeletionCostFromPodAnnotations(pi.Annotations)
		cj, _ := GetDeletionCostFromPodAnnotations(pj.Annotations)
		if ci != cj {
			return ci < cj
		}
	}
	if s.Rank[i] != s.Rank[j] {
		return s.Rank[i] > s.Rank[j]
	}
	if IsPodReady(pi) && IsPodReady(pj) {
		ti, tj := readySince(pi), readySince(pj)
		if !ti.Equal(tj) {
			if s.Now.IsZero() || ti.IsZero() || tj.IsZero() {
				return laterOrZero(ti, tj)
			}
			if d := log2AgeDiff(*ti, *tj, s.Now); d != 0 {
				return d < 0
			}
			return pi.UID < pj.UID
		}
	}
	if r, ok := compareRestarts(pi, pj); ok {
		return r
	}
	ci, cj := &pi.CreationTimestamp, &pj.CreationTimestamp
	if !ci.Equal(cj) {
		if s.Now.IsZero() || ci.IsZero() || cj.IsZero() {
			return laterOrZero(ci, cj)
		}
		if d := log2AgeDiff(*ci, *cj, s.Now); d != 0 {
			return d < 0
		}
		return pi.UID < pj.UID
	}
	return false
}

// compareScheduleState applies the first three rules shared by both
// orderings (assignment, phase, readiness); ok is false on a tie.
func compareScheduleState(a, b *v1.Pod) (less, ok bool) {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == "", true
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa < pb, true
	}
	if ra, rb := IsPodReady(a), IsPodReady(b); ra != rb {
		return !ra, true
	}
	return false, false
}

// laterOrZero reports whether a is after b, treating a zero time as the
// latest of all.
func laterOrZero(a, b *metav1.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b.Time)
}

// log2AgeDiff compares the ages of a and b at now in whole powers of two
// (of nanoseconds); a negative result means a is younger. Times in the
// future count as age bucket -1.
func log2AgeDiff(a, b, now metav1.Time) int64 {
	bucket := func(t metav1.Time) int64 {
		if age := now.Sub(t.Time); age > 0 {
			return int64(math.Log2(float64(age)))
		}
		return -1
	}
	return bucket(a) - bucket(b)
}

// readySince is the time the pod became ready, zero if it is not ready.
func readySince(pod *v1.Pod) *metav1.Time {
	if c := podReadyCondition(pod); c != nil && c.Status == v1.ConditionTrue {
		return &c.LastTransitionTime
	}
	return &metav1.Time{}
}

// maxRestarts returns the highest restart count among regular containers
// and among restartable init (sidecar) containers.
func maxRestarts(pod *v1.Pod) (regular, sidecar int32) {
	for _, c := range pod.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, c := range pod.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

// compareRestarts prefers the pod that restarted more; ok is false on a tie.
func compareRestarts(a, b *v1.Pod) (less, ok bool) {
	ra, sa := maxRestarts(a)
	rb, sb := maxRestarts(b)
	if ra != rb {
		return ra > rb, true
	}
	if sa != sb {
		return sa > sb, true
	}
	return false, false
}
