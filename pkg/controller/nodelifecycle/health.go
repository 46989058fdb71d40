package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	nodetopology "k8s.io/component-helpers/node/topology"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// shortCircuitError ends a node's retries at once: the lease cache is
// behind, so no node should be judged in this pass.
type shortCircuitError struct{ error }

func (e shortCircuitError) Unwrap() error { return e.error }

// monitorNodeHealth is the periodic pass: it notices new and removed
// nodes, marks nodes without recent heartbeats Unknown, queues unhealthy
// nodes for NoExecute taints, marks their pods NotReady and recomputes the
// zones' states and rate limits.
func (nc *Controller) monitorNodeHealth(ctx context.Context) error {
	start := nc.clock.Now()
	defer func() { updateAllNodesHealthDuration.Observe(nc.clock.Since(start).Seconds()) }()

	nodes, err := nc.nodeLister.List(labels.Everything())
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	added, deleted, newZoneRepresentatives := nc.classifyNodes(nodes)
	for _, n := range newZoneRepresentatives {
		nc.addPodEvictorForNewZone(logger, n)
	}
	for _, n := range added {
		logger.V(1).Info("Controller observed a new Node", "node", klog.KObj(n))
		recordNodeEvent(logger, nc.recorder, n.Name, n.UID, v1.EventTypeNormal, "RegisteredNode", fmt.Sprintf("Registered Node %v in Controller", n.Name))
		nc.knownNodeSet[n.Name] = n
		nc.addPodEvictorForNewZone(logger, n)
		_, _ = nc.markNodeAsReachable(ctx, n)
	}
	for _, n := range deleted {
		logger.V(1).Info("Controller observed a Node deletion", "node", klog.KObj(n))
		recordNodeEvent(logger, nc.recorder, n.Name, n.UID, v1.EventTypeNormal, "RemovingNode", fmt.Sprintf("Removing Node %v from Controller", n.Name))
		delete(nc.knownNodeSet, n.Name)
	}

	var mu sync.Mutex
	zoneToNodeConditions := map[string][]*v1.NodeCondition{}
	updateNode := func(i int) {
		start := nc.clock.Now()
		defer func() { updateNodeHealthDuration.Observe(nc.clock.Since(start).Seconds()) }()

		node := nodes[i].DeepCopy()
		var observed v1.NodeCondition
		var current *v1.NodeCondition
		err := wait.PollUntilContextTimeout(ctx, retrySleepTime, retrySleepTime*nodeHealthUpdateRetry, true, func(ctx context.Context) (bool, error) {
			var err error
			_, observed, current, err = nc.tryUpdateNodeHealth(ctx, node)
			if err == nil {
				return true, nil
			}
			var sc shortCircuitError
			if errors.As(err, &sc) {
				return false, sc.error
			}
			name := node.Name
			node, err = nc.kubeClient.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				logger.Error(nil, "Failed while getting a Node to retry updating node health. Probably Node was deleted", "node", klog.KRef("", name))
				return false, err
			}
			return false, nil
		})
		if err != nil {
			logger.Error(err, "Update health of Node from Controller error, Skipping - no pods will be evicted", "node", klog.KObj(node))
			return
		}

		if _, excluded := node.Labels[labelNodeDisruptionExclusion]; !excluded {
			zone := nodetopology.GetZoneKey(node)
			mu.Lock()
			zoneToNodeConditions[zone] = append(zoneToNodeConditions[zone], current)
			mu.Unlock()
		}

		if current != nil {
			pods, err := nc.podsOnNode(node.Name)
			if err != nil {
				utilruntime.HandleErrorWithContext(ctx, err, "Unable to list pods of node", "node", node.Name)
				if current.Status != v1.ConditionTrue && observed.Status == v1.ConditionTrue {
					// The transition must still mark pods NotReady next pass.
					nc.nodesToRetry.Store(node.Name, struct{}{})
				}
				return
			}
			nc.processTaintBaseEviction(ctx, node, current)

			_, needsRetry := nc.nodesToRetry.Load(node.Name)
			becameUnready := current.Status != v1.ConditionTrue && observed.Status == v1.ConditionTrue
			if becameUnready {
				// Reported once, on the transition.
				recordNodeStatusChange(logger, nc.recorder, node, "NodeNotReady")
			}
			if becameUnready || (needsRetry && observed.Status != v1.ConditionTrue) {
				if err := nc.markPodsNotReady(ctx, pods, node.Name); err != nil {
					utilruntime.HandleErrorWithContext(ctx, err, "Unable to mark all pods NotReady on node; queuing for retry", "node", node.Name)
					nc.nodesToRetry.Store(node.Name, struct{}{})
					return
				}
			}
		}
		nc.nodesToRetry.Delete(node.Name)
	}
	// Marking pods is one request per pod, so nodes go in parallel.
	workqueue.ParallelizeUntil(ctx, nodeUpdateWorkerSize, len(nodes), updateNode)

	nc.handleDisruption(ctx, zoneToNodeConditions, nodes)
	return nil
}

// tryUpdateNodeHealth compares the node with what was last seen of it and
// marks its kubelet conditions Unknown when neither its Ready condition's
// heartbeat nor its Lease moved within the grace period. It returns the
// grace period applied, the Ready condition as observed and as it is now.
func (nc *Controller) tryUpdateNodeHealth(ctx context.Context, node *v1.Node) (time.Duration, v1.NodeCondition, *v1.NodeCondition, error) {
	logger := klog.FromContext(ctx)
	health := nc.nodeHealthMap.get(node.Name)
	defer func() { nc.nodeHealthMap.set(node.Name, health) }()

	if nc.circuitBreaker {
		if err := nc.consistency.EnsureReady(types.NamespacedName{}); err != nil {
			return 0, v1.NodeCondition{}, nil, shortCircuitError{err}
		}
	}

	var gracePeriod time.Duration
	var observed v1.NodeCondition
	current := getNodeCondition(&node.Status, v1.NodeReady)
	if current == nil {
		// The kubelet never posted status: pretend Unknown since creation
		// and give it the (longer) startup grace period.
		observed = v1.NodeCondition{
			Type:               v1.NodeReady,
			Status:             v1.ConditionUnknown,
			LastHeartbeatTime:  node.CreationTimestamp,
			LastTransitionTime: node.CreationTimestamp,
		}
		gracePeriod = nc.nodeStartupGracePeriod
		if health != nil {
			health.status = &node.Status
		} else {
			health = &nodeHealthData{
				status:                   &node.Status,
				probeTimestamp:           node.CreationTimestamp,
				readyTransitionTimestamp: node.CreationTimestamp,
			}
		}
	} else {
		observed = *current
		gracePeriod = nc.nodeMonitorGracePeriod
	}

	var saved *v1.NodeCondition
	var savedLease *coordv1.Lease
	if health != nil {
		saved = getNodeCondition(health.status, v1.NodeReady)
		savedLease = health.lease
	}
	now := nc.now()
	switch {
	case health == nil:
		logger.Info("Missing timestamp for Node. Assuming now as a timestamp", "node", klog.KObj(node))
		health = &nodeHealthData{status: &node.Status, probeTimestamp: now, readyTransitionTimestamp: now}
	case saved == nil && current != nil:
		logger.V(1).Info("Creating timestamp entry for newly observed Node", "node", klog.KObj(node))
		health = &nodeHealthData{status: &node.Status, probeTimestamp: now, readyTransitionTimestamp: now}
	case saved != nil && current == nil:
		logger.Error(nil, "ReadyCondition was removed from Status of Node", "node", klog.KObj(node))
		health = &nodeHealthData{status: &node.Status, probeTimestamp: now, readyTransitionTimestamp: now}
	case saved != nil && current != nil && !saved.LastHeartbeatTime.Equal(&current.LastHeartbeatTime):
		// A fresh heartbeat; the transition time moves only if Ready changed.
		transition := health.readyTransitionTimestamp
		if !saved.LastTransitionTime.Equal(&current.LastTransitionTime) {
			logger.V(3).Info("ReadyCondition for Node transitioned from savedCondition to currentReadyCondition", "node", klog.KObj(node), "savedCondition", saved, "currentReadyCondition", current)
			transition = now
		} else {
			logger.V(3).Info("Node ReadyCondition updated. Updating timestamp", "node", klog.KObj(node))
		}
		health = &nodeHealthData{status: &node.Status, probeTimestamp: now, readyTransitionTimestamp: transition}
	}

	// A renewed Lease is a heartbeat too (kubelets renew it every 10s and
	// post status only on change or every 5m).
	observedLease, _ := nc.leaseLister.Leases(v1.NamespaceNodeLease).Get(node.Name)
	if observedLease != nil && (savedLease == nil || savedLease.Spec.RenewTime.Before(observedLease.Spec.RenewTime)) {
		health.lease = observedLease
		health.probeTimestamp = now
	}

	if !now.After(health.probeTimestamp.Add(gracePeriod)) {
		return gracePeriod, observed, current, nil
	}

	if nc.circuitBreaker {
		// The cached lease looks expired; make sure the cache is not just
		// behind before declaring the node dead.
		var seenRV string
		if health.lease != nil {
			seenRV = health.lease.ResourceVersion
		}
		live, err := nc.kubeClient.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case err == nil && live.ResourceVersion != seenRV:
			nc.consistency.WroteAt(types.NamespacedName{}, "", leaseResource, live.ResourceVersion)
			return 0, v1.NodeCondition{}, nil, shortCircuitError{&controller.ConsistencyError{ReadRV: seenRV, WroteRV: live.ResourceVersion, GroupResource: leaseResource}}
		case err != nil && !apierrors.IsNotFound(err):
			return 0, v1.NodeCondition{}, nil, shortCircuitError{fmt.Errorf("error looking up lease to verify node %s: %w", node.Name, err)}
		}
	}

	// NetworkUnavailable is left alone: the control plane manages it.
	for _, t := range []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		c := getNodeCondition(&node.Status, t)
		if c == nil {
			logger.V(2).Info("Condition of node was never updated by kubelet", "nodeConditionType", t, "node", klog.KObj(node))
			node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{
				Type:               t,
				Status:             v1.ConditionUnknown,
				Reason:             "NodeStatusNeverUpdated",
				Message:            "Kubelet never posted node status.",
				LastHeartbeatTime:  node.CreationTimestamp,
				LastTransitionTime: now,
			})
			continue
		}
		logger.V(2).Info("Node hasn't been updated", "node", klog.KObj(node), "duration", now.Sub(health.probeTimestamp.Time), "nodeConditionType", t, "currentCondition", c)
		if c.Status != v1.ConditionUnknown {
			c.Status = v1.ConditionUnknown
			c.Reason = "NodeStatusUnknown"
			c.Message = "Kubelet stopped posting node status."
			c.LastTransitionTime = now
		}
	}
	current = getNodeCondition(&node.Status, v1.NodeReady)
	if apiequality.Semantic.DeepEqual(current, &observed) {
		return gracePeriod, observed, current, nil
	}
	if _, err := nc.kubeClient.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		logger.Error(err, "Error updating node", "node", klog.KObj(node))
		return gracePeriod, observed, current, err
	}
	health = &nodeHealthData{
		status:                   &node.Status,
		probeTimestamp:           health.probeTimestamp,
		readyTransitionTimestamp: now,
		lease:                    observedLease,
	}
	return gracePeriod, observed, current, nil
}

// classifyNodes splits the listed nodes into ones not seen before, known
// ones whose zone is new, and known ones that disappeared.
func (nc *Controller) classifyNodes(all []*v1.Node) (added, deleted, newZoneRepresentatives []*v1.Node) {
	for _, n := range all {
		if _, known := nc.knownNodeSet[n.Name]; !known {
			added = append(added, n)
		} else if _, ok := nc.zoneStates[nodetopology.GetZoneKey(n)]; !ok {
			newZoneRepresentatives = append(newZoneRepresentatives, n)
		}
	}
	if len(nc.knownNodeSet)+len(added) != len(all) {
		present := make(map[string]bool, len(all))
		for _, n := range all {
			present[n.Name] = true
		}
		for name, n := range nc.knownNodeSet {
			if !present[name] {
				deleted = append(deleted, n)
			}
		}
	}
	return added, deleted, newZoneRepresentatives
}

// addPodEvictorForNewZone creates the zone's tainting queue the first time
// a node of that zone is seen.
func (nc *Controller) addPodEvictorForNewZone(logger klog.Logger, node *v1.Node) {
	nc.evictorLock.Lock()
	defer nc.evictorLock.Unlock()
	zone := nodetopology.GetZoneKey(node)
	if _, ok := nc.zoneStates[zone]; ok {
		return
	}
	nc.zoneStates[zone] = stateInitial
	nc.zoneNoExecuteTainter[zone] = newRateLimitedTimedQueue(nc.clock, nc.evictionLimiterQPS)
	logger.Info("Initializing eviction metric for zone", "zone", zone)
	evictionsTotal.WithLabelValues(zone).Add(0)
}
