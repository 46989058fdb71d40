package nodelifecycle

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ComputeZoneState counts the not-Ready nodes of a zone and classifies it:
// FullDisruption when no node is Ready, PartialDisruption when more than
// two nodes and at least --unhealthy-zone-threshold of them are not Ready,
// Normal otherwise.
func (nc *Controller) ComputeZoneState(readyConditions []*v1.NodeCondition) (int, ZoneState) {
	ready, notReady := 0, 0
	for _, c := range readyConditions {
		if c != nil && c.Status == v1.ConditionTrue {
			ready++
		} else {
			notReady++
		}
	}
	switch {
	case ready == 0 && notReady > 0:
		return notReady, stateFullDisruption
	case notReady > 2 && float32(notReady)/float32(notReady+ready) >= nc.unhealthyZoneThreshold:
		return notReady, statePartialDisruption
	default:
		return notReady, stateNormal
	}
}

// HealthyQPSFunc is the tainting rate of a fully disrupted zone while
// other zones are healthy: the normal --node-eviction-rate.
func (nc *Controller) HealthyQPSFunc(int) float32 { return nc.evictionLimiterQPS }

// ReducedQPSFunc is the rate of a partially disrupted zone: the secondary
// rate in large zones, nothing at all in small ones.
func (nc *Controller) ReducedQPSFunc(zoneSize int) float32 {
	if int32(zoneSize) > nc.largeClusterThreshold {
		return nc.secondaryEvictionLimiterQPS
	}
	return 0
}

// handleDisruption updates the zone metrics and states and adjusts each
// zone's rate. If every zone is fully disrupted the problem is most likely
// on the control plane side, so all NoExecute taints are lifted and
// tainting stops until some node reports Ready again.
func (nc *Controller) handleDisruption(ctx context.Context, zoneToNodeConditions map[string][]*v1.NodeCondition, nodes []*v1.Node) {
	logger := klog.FromContext(ctx)
	newStates := map[string]ZoneState{}
	allAreFullyDisrupted := true
	for zone, conds := range zoneToNodeConditions {
		zoneSize.WithLabelValues(zone).Set(float64(len(conds)))
		unhealthy, state := nc.ComputeZoneState(conds)
		zoneHealth.WithLabelValues(zone).Set(float64(100*(len(conds)-unhealthy)) / float64(len(conds)))
		unhealthyNodes.WithLabelValues(zone).Set(float64(unhealthy))
		if state != stateFullDisruption {
			allAreFullyDisrupted = false
		}
		newStates[zone] = state
		if _, ok := nc.zoneStates[zone]; !ok {
			logger.Error(nil, "Setting initial state for unseen zone", "zone", zone)
			nc.zoneStates[zone] = stateInitial
		}
	}

	allWasFullyDisrupted := true
	for zone, state := range nc.zoneStates {
		if _, ok := zoneToNodeConditions[zone]; !ok {
			zoneSize.WithLabelValues(zone).Set(0)
			zoneHealth.WithLabelValues(zone).Set(100)
			unhealthyNodes.WithLabelValues(zone).Set(0)
			delete(nc.zoneStates, zone)
			continue
		}
		if state != stateFullDisruption {
			allWasFullyDisrupted = false
			break
		}
	}

	if allAreFullyDisrupted && allWasFullyDisrupted {
		return
	}
	if allAreFullyDisrupted {
		logger.Info("Controller detected that all Nodes are not-Ready. Entering master disruption mode")
		for _, n := range nodes {
			if _, err := nc.markNodeAsReachable(ctx, n); err != nil {
				logger.Error(nil, "Failed to remove taints from Node", "node", klog.KObj(n))
			}
		}
		nc.evictorLock.Lock()
		for zone := range nc.zoneStates {
			nc.zoneNoExecuteTainter[zone].SwapLimiter(0)
			nc.zoneStates[zone] = stateFullDisruption
		}
		nc.evictorLock.Unlock()
		return
	}
	if allWasFullyDisrupted {
		logger.Info("Controller detected that some Nodes are Ready. Exiting master disruption mode")
		// Give every node a fresh grace period: heartbeats may have been
		// lost on our side.
		now := nc.now()
		for _, n := range nodes {
			if h := nc.nodeHealthMap.get(n.Name); h != nil {
				h.probeTimestamp = now
				h.readyTransitionTimestamp = now
				nc.nodeHealthMap.set(n.Name, h)
			}
		}
		for zone := range nc.zoneStates {
			nc.setLimiterInZone(zone, len(zoneToNodeConditions[zone]), newStates[zone])
			nc.zoneStates[zone] = newStates[zone]
		}
		return
	}
	for zone, state := range nc.zoneStates {
		next := newStates[zone]
		if state == next {
			continue
		}
		logger.Info("Controller detected that zone is now in new state", "zone", zone, "newState", next)
		nc.setLimiterInZone(zone, len(zoneToNodeConditions[zone]), next)
		nc.zoneStates[zone] = next
	}
}

func (nc *Controller) setLimiterInZone(zone string, size int, state ZoneState) {
	nc.evictorLock.Lock()
	q := nc.zoneNoExecuteTainter[zone]
	nc.evictorLock.Unlock()
	if q == nil {
		return
	}
	switch state {
	case stateNormal:
		q.SwapLimiter(nc.evictionLimiterQPS)
	case statePartialDisruption:
		q.SwapLimiter(nc.ReducedQPSFunc(size))
	case stateFullDisruption:
		q.SwapLimiter(nc.HealthyQPSFunc(size))
	}
}
