package replicaset

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// getPodsToDelete returns the n pods to delete, best candidates first. It
// reorders pods in place.
func (c *BaseController) getPodsToDelete(pods, related []*v1.Pod, n int) []*v1.Pod {
	// Deleting all of them needs no choice.
	if n < len(pods) {
		now := c.clock.Now()
		ranked := rankByRelatedPodsOnSameNode(pods, related, metav1.NewTime(now))
		ranked.DeletionCost = c.opts.PodDeletionCost
		sort.Sort(ranked)
		reportDeletionAgeRatio(pods, n, now)
	}
	return pods[:n]
}

// rankByRelatedPodsOnSameNode ranks each pod by the number of active related
// pods on its node, so scale-down thins out crowded nodes first.
func rankByRelatedPodsOnSameNode(pods, related []*v1.Pod, now metav1.Time) controller.ActivePodsWithRanks {
	perNode := map[string]int{}
	for _, p := range related {
		if controller.IsPodActive(p) {
			perNode[p.Spec.NodeName]++
		}
	}
	ranks := make([]int, len(pods))
	for i, p := range pods {
		ranks[i] = perNode[p.Spec.NodeName]
	}
	return controller.ActivePodsWithRanks{Pods: pods, Rank: ranks, Now: now}
}

// reportDeletionAgeRatio observes, for each ready pod chosen, its age over
// the age of the youngest ready pod, in whole milliseconds divided as
// integers like upstream (so the histogram sees the same values).
func reportDeletionAgeRatio(sorted []*v1.Pod, n int, now time.Time) {
	var youngest time.Time
	for _, p := range sorted {
		if controller.IsPodReady(p) && p.CreationTimestamp.After(youngest) {
			youngest = p.CreationTimestamp.Time
		}
	}
	youngestAge := now.Sub(youngest).Milliseconds()
	if youngestAge <= 0 {
		return
	}
	for _, p := range sorted[:n] {
		if controller.IsPodReady(p) {
			sortingDeletionAgeRatio.Observe(float64(now.Sub(p.CreationTimestamp.Time).Milliseconds() / youngestAge))
		}
	}
}
