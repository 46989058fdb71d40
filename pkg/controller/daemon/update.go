package daemon

import (
	"context"
	"fmt"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
)

// rollingUpdate replaces old pods within the strategy's budget. Without
// surge it deletes old pods (manage recreates them) while at most
// maxUnavailable nodes lack an available current pod; with surge it starts
// new pods beside old ones, at most maxSurge at a time, and deletes each old
// pod once its replacement is available.
//
// Both rely on manage for the rest: creating pods on empty nodes, removing
// failed pods and extra pods. Deleted pods are not counted as unavailable,
// so an update progresses while nodes are down.
func (dsc *Controller) rollingUpdate(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, hash string) error {
	nodeToDaemonPods, err := dsc.getNodesToDaemonPods(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %w", ds.Name, err)
	}
	maxSurge, maxUnavailable, desired, err := dsc.updatedDesiredNodeCounts(ctx, ds, nodes, nodeToDaemonPods)
	if err != nil {
		return fmt.Errorf("couldn't get unavailable numbers: %w", err)
	}
	if maxSurge == 0 {
		return dsc.syncNodes(ctx, ds, dsc.podsToReplace(klog.FromContext(ctx), ds, nodeToDaemonPods, hash, maxUnavailable), nil, hash)
	}
	toDelete, toCreate, err := dsc.surge(ctx, ds, nodeToDaemonPods, hash, maxSurge, desired)
	if err != nil {
		return err
	}
	return dsc.syncNodes(ctx, ds, toDelete, toCreate, hash)
}

// podsToReplace picks the old pods to delete when not surging: every old
// pod that is unavailable anyway, then available old pods while the number
// of nodes without an available current pod stays within maxUnavailable.
func (dsc *Controller) podsToReplace(logger klog.Logger, ds *apps.DaemonSet, nodeToDaemonPods map[string][]*v1.Pod, hash string, maxUnavailable int) []string {
	now := metav1.NewTime(dsc.now())
	numUnavailable := 0
	var replaceNow, candidates []string
	for nodeName, pods := range nodeToDaemonPods {
		newPod, oldPod, ok := findUpdatedPodsOnNode(ds, pods, hash)
		if !ok {
			// Several pods of a kind: manage prunes them first.
			logger.V(3).Info("DaemonSet has excess pods on node, skipping to allow the core loop to process", "daemonset", klog.KObj(ds), "node", klog.KRef("", nodeName))
			numUnavailable++
			continue
		}
		switch {
		case oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
			// manage creates or prunes here; unavailable meanwhile.
			numUnavailable++
		case newPod != nil:
			if !controller.IsPodAvailable(newPod, ds.Spec.MinReadySeconds, now) {
				numUnavailable++
			}
		case !controller.IsPodAvailable(oldPod, ds.Spec.MinReadySeconds, now):
			// Replacing it costs no availability.
			logger.V(5).Info("DaemonSet pod on node is out of date and not available, allowing replacement", "daemonset", klog.KObj(ds), "pod", klog.KObj(oldPod), "node", klog.KRef("", nodeName))
			replaceNow = append(replaceNow, oldPod.Name)
			numUnavailable++
		case numUnavailable >= maxUnavailable:
			// Budget already spent; no point collecting more candidates.
		default:
			logger.V(5).Info("DaemonSet pod on node is out of date, this is a candidate to replace", "daemonset", klog.KObj(ds), "pod", klog.KObj(oldPod), "node", klog.KRef("", nodeName))
			candidates = append(candidates, oldPod.Name)
		}
	}
	budget := min(max(maxUnavailable-numUnavailable, 0), len(candidates))
	logger.V(5).Info("DaemonSet allowing replacements", "daemonset", klog.KObj(ds), "replacements", len(replaceNow), "maxUnavailable", maxUnavailable, "numUnavailable", numUnavailable, "candidates", len(candidates))
	return append(replaceNow, candidates[:budget]...)
}

// surge picks the nodes to start a new pod on next to an old one, and the
// old pods to delete, when maxSurge > 0.
func (dsc *Controller) surge(ctx context.Context, ds *apps.DaemonSet, nodeToDaemonPods map[string][]*v1.Pod, hash string, maxSurge, desired int) (toDelete, toCreate []string, err error) {
	logger := klog.FromContext(ctx)
	now := metav1.NewTime(dsc.now())
	p := newPlacement(ds, dsc.comparisonOperators)
	var (
		// old pods on nodes they should leave, deleted only while enough
		// pods elsewhere are available
		leaving []string
		// nodes whose old pod is unavailable: replace right away
		replaceNow []string
		// nodes with an available old pod: surge there within budget
		candidates []string
		numSurge   int
		available  int
	)
	shouldRunOn := func(nodeName string) (bool, error) {
		node, err := dsc.nodeLister.Get(nodeName)
		if err != nil {
			return false, fmt.Errorf("couldn't get node for nodeName %q: %w", nodeName, err)
		}
		run, _ := p.check(logger, node)
		return run, nil
	}
	for nodeName, pods := range nodeToDaemonPods {
		newPod, oldPod, ok := findUpdatedPodsOnNode(ds, pods, hash)
		if !ok {
			logger.V(3).Info("DaemonSet has excess pods on node, skipping to allow the core loop to process", "daemonset", klog.KObj(ds), "node", klog.KRef("", nodeName))
			numSurge++
			continue
		}
		// Availability counts every node, also those being left.
		switch {
		case oldPod != nil:
			if controller.IsPodAvailable(oldPod, ds.Spec.MinReadySeconds, now) {
				available++
			}
		case newPod != nil:
			if controller.IsPodAvailable(newPod, ds.Spec.MinReadySeconds, now) {
				available++
			}
		}

		switch {
		case oldPod == nil:
			// Up to date or empty: manage's business.
		case newPod == nil:
			run, err := shouldRunOn(nodeName)
			if err != nil {
				return nil, nil, err
			}
			oldAvailable := controller.IsPodAvailable(oldPod, ds.Spec.MinReadySeconds, now)
			switch {
			case !oldAvailable && !run:
				logger.V(5).Info("DaemonSet pod on node is not available and does not match scheduling constraints, remove old pod", "daemonset", klog.KObj(ds), "node", nodeName, "oldPod", klog.KObj(oldPod))
				toDelete = append(toDelete, oldPod.Name)
			case !oldAvailable:
				logger.V(5).Info("Pod on node is out of date and not available, allowing replacement", "daemonset", klog.KObj(ds), "pod", klog.KObj(oldPod), "node", klog.KRef("", nodeName))
				replaceNow = append(replaceNow, nodeName)
			case !run:
				leaving = append(leaving, oldPod.Name)
			case numSurge >= maxSurge:
				// Budget already spent.
			default:
				logger.V(5).Info("DaemonSet pod on node is out of date, this is a surge candidate", "daemonset", klog.KObj(ds), "pod", klog.KObj(oldPod), "node", klog.KRef("", nodeName))
				candidates = append(candidates, nodeName)
			}
		case !controller.IsPodAvailable(newPod, ds.Spec.MinReadySeconds, now):
			// Surged here, waiting for the new pod.
			numSurge++
		default:
			logger.V(5).Info("DaemonSet pod on node is available, remove old pod", "daemonset", klog.KObj(ds), "newPod", klog.KObj(newPod), "node", nodeName, "oldPod", klog.KObj(oldPod))
			toDelete = append(toDelete, oldPod.Name)
		}
	}

	logger.V(5).Info("DaemonSet allowing replacements", "daemonset", klog.KObj(ds), "replacements", len(replaceNow), "maxSurge", maxSurge, "numSurge", numSurge, "candidates", len(candidates))
	// Surge promises full availability: when the pods move to other nodes,
	// old ones go only as far as available pods exceed the desired count.
	if deletable := min(available-desired, len(leaving)); deletable > 0 {
		for _, name := range leaving[:deletable] {
			pod, err := dsc.podLister.Pods(ds.Namespace).Get(name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("couldn't get pod which should be deleted due to scheduling constraints %q: %w", name, err)
			}
			logger.V(5).Info("DaemonSet pod on node should be deleted due to scheduling constraints", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
			toDelete = append(toDelete, name)
		}
	}
	budget := min(max(maxSurge-numSurge, 0), len(candidates))
	return toDelete, append(replaceNow, candidates[:budget]...), nil
}

// findUpdatedPodsOnNode returns the node's live current and old pod; ok is
// false when there are several of either, which manage must prune first.
func findUpdatedPodsOnNode(ds *apps.DaemonSet, podsOnNode []*v1.Pod, hash string) (newPod, oldPod *v1.Pod, ok bool) {
	generation, err := util.GetTemplateGeneration(ds)
	if err != nil {
		generation = nil
	}
	for _, pod := range podsOnNode {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if util.IsPodUpdated(pod, hash, generation) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// updatedDesiredNodeCounts returns maxSurge, maxUnavailable and the number
// of nodes that should run the pod, and adds an empty entry to
// nodeToDaemonPods for each such node without pods (so they count as
// unavailable).
func (dsc *Controller) updatedDesiredNodeCounts(ctx context.Context, ds *apps.DaemonSet, nodes []*v1.Node, nodeToDaemonPods map[string][]*v1.Pod) (int, int, int, error) {
	logger := klog.FromContext(ctx)
	p := newPlacement(ds, dsc.comparisonOperators)
	desired := 0
	for _, node := range nodes {
		if run, _ := p.check(logger, node); !run {
			continue
		}
		desired++
		if _, ok := nodeToDaemonPods[node.Name]; !ok {
			nodeToDaemonPods[node.Name] = nil
		}
	}
	maxUnavailable, err := util.UnavailableCount(ds, desired)
	if err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxUnavailable: %w", err)
	}
	maxSurge, err := util.SurgeCount(ds, desired)
	if err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxSurge: %w", err)
	}
	// Both zero is invalid; progress one node at a time rather than never.
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		logger.Info("DaemonSet is not configured for surge or unavailability, defaulting to accepting unavailability", "daemonset", klog.KObj(ds))
		maxUnavailable = 1
	}
	logger.V(5).Info("DaemonSet with maxSurge and maxUnavailable", "daemonset", klog.KObj(ds), "maxSurge", maxSurge, "maxUnavailable", maxUnavailable)
	return maxSurge, maxUnavailable, desired, nil
}
