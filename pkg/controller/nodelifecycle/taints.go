package nodelifecycle

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	nodetopology "k8s.io/component-helpers/node/topology"
	"k8s.io/klog/v2"
)

// Beta labels kept in sync with their GA counterparts (GA wins).
var labelReconcileInfo = []struct{ primary, secondary string }{
	{v1.LabelOSStable, "beta.kubernetes.io/os"},
	{v1.LabelArchStable, "beta.kubernetes.io/arch"},
}

// doNoScheduleTaintingPass makes the node's NoSchedule condition taints
// (and node.kubernetes.io/unschedulable) match its conditions and
// spec.unschedulable. Among others it lifts the not-ready:NoSchedule taint
// admission puts on every new node once the kubelet reports Ready.
func (nc *Controller) doNoScheduleTaintingPass(ctx context.Context, nodeName string) error {
	node, err := nc.nodeLister.Get(nodeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}

	var want []v1.Taint
	for _, c := range node.Status.Conditions {
		if key, ok := conditionTaints[c.Type][c.Status]; ok {
			want = append(want, v1.Taint{Key: key, Effect: v1.TaintEffectNoSchedule})
		}
	}
	if node.Spec.Unschedulable {
		want = append(want, v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule})
	}

	// Only taints this controller owns are compared; users' taints stay.
	var have []v1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule && (t.Key == v1.TaintNodeUnschedulable || conditionTaintKeys[t.Key]) {
			have = append(have, t)
		}
	}
	add, del := taintSetDiff(want, have)
	if len(add) == 0 && len(del) == 0 {
		return nil
	}
	if !nc.swapNodeControllerTaint(ctx, add, del, node) {
		return fmt.Errorf("failed to swap taints of node %s", node.Name)
	}
	return nil
}

// reconcileNodeLabels copies kubernetes.io/os and kubernetes.io/arch to
// their beta labels when those are missing or differ.
func (nc *Controller) reconcileNodeLabels(ctx context.Context, nodeName string) error {
	node, err := nc.nodeLister.Get(nodeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if node.Labels == nil {
		return nil
	}
	update := map[string]string{}
	for _, r := range labelReconcileInfo {
		pv, ok := node.Labels[r.primary]
		if !ok {
			continue
		}
		if sv, ok := node.Labels[r.secondary]; !ok || sv != pv {
			update[r.secondary] = pv
		}
	}
	if len(update) == 0 {
		return nil
	}
	return nc.addOrUpdateLabels(ctx, nodeName, update)
}

// doNoExecuteTaintingPass drains every zone's queue at the zone's rate,
// adding not-ready or unreachable (mutually exclusive, mirroring Ready).
func (nc *Controller) doNoExecuteTaintingPass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	nc.evictorLock.Lock()
	zones := make([]*rateLimitedTimedQueue, 0, len(nc.zoneNoExecuteTainter))
	for _, q := range nc.zoneNoExecuteTainter {
		zones = append(zones, q)
	}
	nc.evictorLock.Unlock()

	for _, q := range zones {
		q.Try(logger, func(val timedValue) (bool, time.Duration) {
			node, err := nc.nodeLister.Get(val.value)
			if apierrors.IsNotFound(err) {
				logger.Info("Node no longer present in nodeLister", "node", klog.KRef("", val.value))
				return true, 0
			} else if err != nil {
				logger.Info("Failed to get Node from the nodeLister", "node", klog.KRef("", val.value), "err", err)
				return false, 50 * time.Millisecond
			}
			ready := getNodeCondition(&node.Status, v1.NodeReady)
			if ready == nil {
				logger.Info("Failed to get NodeCondition from the node status", "node", klog.KRef("", val.value))
				return false, 50 * time.Millisecond
			}
			var add, opposite v1.Taint
			switch ready.Status {
			case v1.ConditionFalse:
				add, opposite = *NotReadyTaintTemplate, *UnreachableTaintTemplate
			case v1.ConditionUnknown:
				add, opposite = *UnreachableTaintTemplate, *NotReadyTaintTemplate
			default:
				logger.V(4).Info("Node was in a taint queue, but it's ready now. Ignoring taint request", "node", klog.KRef("", val.value))
				return true, 0
			}
			ok := nc.swapNodeControllerTaint(ctx, []*v1.Taint{&add}, []*v1.Taint{&opposite}, node)
			if ok {
				evictionsTotal.WithLabelValues(nodetopology.GetZoneKey(node)).Inc()
			}
			return ok, 0
		})
	}
}

// processTaintBaseEviction queues an unhealthy node for its NoExecute
// taint, swaps the taint at once when the node flips between NotReady and
// Unknown, and removes both when the node is Ready.
func (nc *Controller) processTaintBaseEviction(ctx context.Context, node *v1.Node, ready *v1.NodeCondition) {
	logger := klog.FromContext(ctx)
	switch ready.Status {
	case v1.ConditionFalse:
		if taintExists(node.Spec.Taints, UnreachableTaintTemplate) {
			t := *NotReadyTaintTemplate
			if !nc.swapNodeControllerTaint(ctx, []*v1.Taint{&t}, []*v1.Taint{UnreachableTaintTemplate}, node) {
				logger.Error(nil, "Failed to instantly swap UnreachableTaint to NotReadyTaint. Will try again in the next cycle")
			}
		} else if nc.markNodeForTainting(node, v1.ConditionFalse) {
			logger.V(2).Info("Node is NotReady. Adding it to the Taint queue", "node", klog.KObj(node), "timeStamp", nc.now())
		}
	case v1.ConditionUnknown:
		if taintExists(node.Spec.Taints, NotReadyTaintTemplate) {
			t := *UnreachableTaintTemplate
			if !nc.swapNodeControllerTaint(ctx, []*v1.Taint{&t}, []*v1.Taint{NotReadyTaintTemplate}, node) {
				logger.Error(nil, "Failed to instantly swap NotReadyTaint to UnreachableTaint. Will try again in the next cycle")
			}
		} else if nc.markNodeForTainting(node, v1.ConditionUnknown) {
			logger.V(2).Info("Node is unresponsive. Adding it to the Taint queue", "node", klog.KObj(node), "timeStamp", nc.now())
		}
	case v1.ConditionTrue:
		removed, err := nc.markNodeAsReachable(ctx, node)
		if err != nil {
			logger.Error(nil, "Failed to remove taints from node. Will retry in next iteration", "node", klog.KObj(node))
		}
		if removed {
			logger.V(2).Info("Node is healthy again, removed all taints", "node", klog.KObj(node))
		}
	}
}

// markNodeForTainting queues the node in its zone. A node that was
// processed before but lost the taint it should carry is forgotten first,
// so it is queued again.
func (nc *Controller) markNodeForTainting(node *v1.Node, status v1.ConditionStatus) bool {
	nc.evictorLock.Lock()
	defer nc.evictorLock.Unlock()
	q := nc.zoneNoExecuteTainter[nodetopology.GetZoneKey(node)]
	if status == v1.ConditionFalse && !taintExists(node.Spec.Taints, NotReadyTaintTemplate) {
		q.Remove(node.Name)
	}
	if status == v1.ConditionUnknown && !taintExists(node.Spec.Taints, UnreachableTaintTemplate) {
		q.Remove(node.Name)
	}
	return q.Add(node.Name, string(node.UID))
}

// markNodeAsReachable removes both NoExecute taints and forgets the node in
// its zone queue; it reports whether the node was queued or processed.
func (nc *Controller) markNodeAsReachable(ctx context.Context, node *v1.Node) (bool, error) {
	logger := klog.FromContext(ctx)
	if err := removeTaints(ctx, nc.kubeClient, node.Name, node, UnreachableTaintTemplate); err != nil {
		logger.Error(err, "Failed to remove unreachable taint from node", "node", klog.KObj(node))
		return false, err
	}
	if err := removeTaints(ctx, nc.kubeClient, node.Name, node, NotReadyTaintTemplate); err != nil {
		logger.Error(err, "Failed to remove not-ready taint from node", "node", klog.KObj(node))
		return false, err
	}
	nc.evictorLock.Lock()
	defer nc.evictorLock.Unlock()
	q := nc.zoneNoExecuteTainter[nodetopology.GetZoneKey(node)]
	if q == nil {
		return false, nil
	}
	return q.Remove(node.Name), nil
}
