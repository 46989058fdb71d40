package endpointslice

import (
	"fmt"
	"math"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// Topology-aware hints (service.kubernetes.io/topology-mode: Auto): ready
// endpoints are hinted to zones in proportion to each zone's share of the
// allocatable CPU of ready worker nodes, allowing a zone to be up to
// overloadThreshold short of its share.
const overloadThreshold = 0.2

// Event messages, as upstream.
const (
	msgNoZoneSpecified              = "One or more endpoints do not have a zone specified"
	msgNoAllocatedHintsForZones     = "No hints allocated for zones"
	msgTopologyAwareHintsEnabled    = "Topology Aware Hints has been enabled"
	msgTopologyAwareHintsDisabled   = "Topology Aware Hints has been disabled"
	msgInsufficientNodeInfo         = "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
	msgNodesReadyInOneZoneOnly      = "Nodes only ready in one zone"
	msgInsufficientNumberOfEndpoint = "Insufficient number of endpoints"
	msgMinAllocationExceedsOverload = "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold"
)

type topologyEvent struct {
	eventType, reason, message string
}

func withAddressType(msg string, t discovery.AddressType) string {
	return fmt.Sprintf("%s, addressType: %s", msg, t)
}

func hintsDisabledEvent(msg string) *topologyEvent {
	return &topologyEvent{eventType: v1.EventTypeWarning, reason: "TopologyAwareHintsDisabled", message: msg}
}

type zoneAllocation struct {
	minimum, maximum int
	desired          float64
}

// topologyCache holds the CPU share of every zone and the hints last
// allocated per Service, to find Services a node change overloads.
type topologyCache struct {
	mu             sync.Mutex
	cpuRatioByZone map[string]float64 // nil: insufficient node info
	hintsByService map[string]map[discovery.AddressType]map[string]int
	populated      sets.Set[string]
}

func newTopologyCache() *topologyCache {
	return &topologyCache{
		hintsByService: map[string]map[discovery.AddressType]map[string]int{},
		populated:      sets.New[string](),
	}
}

func nodeIsReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// setNodes recomputes the zone CPU ratios from ready, non-control-plane
// nodes. Any such node without zone or allocatable CPU, or fewer than two
// zones, disables hints.
func (t *topologyCache) setNodes(logger klog.Logger, nodes []*v1.Node) {
	cpuByZone := map[string]*resource.Quantity{}
	total := resource.Quantity{}
	sufficient := true
	for _, node := range nodes {
		if _, ok := node.Labels["node-role.kubernetes.io/control-plane"]; ok {
			continue
		}
		if _, ok := node.Labels["node-role.kubernetes.io/master"]; ok {
			continue
		}
		if !nodeIsReady(node) {
			continue
		}
		cpu := node.Status.Allocatable.Cpu()
		zone := node.Labels[v1.LabelTopologyZone]
		if zone == "" || cpu.IsZero() {
			logger.Info("Can't get CPU or zone information for node", "node", klog.KObj(node))
			sufficient = false
			break
		}
		total.Add(*cpu)
		if q, ok := cpuByZone[zone]; ok {
			q.Add(*cpu)
		} else {
			cpuByZone[zone] = cpu
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !sufficient || total.IsZero() || len(cpuByZone) < 2 {
		logger.V(2).Info("Insufficient node info for topology hints", "totalZones", len(cpuByZone), "totalCPU", total.String(), "sufficientNodeInfo", sufficient)
		t.cpuRatioByZone = nil
		return
	}
	t.cpuRatioByZone = map[string]float64{}
	for zone, q := range cpuByZone {
		t.cpuRatioByZone[zone] = float64(q.MilliValue()) / float64(total.MilliValue())
	}
}

func (t *topologyCache) allocations(numEndpoints int) (map[string]zoneAllocation, *topologyEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cpuRatioByZone == nil {
		return nil, hintsDisabledEvent(msgInsufficientNodeInfo)
	}
	if len(t.cpuRatioByZone) < 2 {
		return nil, hintsDisabledEvent(msgNodesReadyInOneZoneOnly)
	}
	if len(t.cpuRatioByZone) > numEndpoints {
		return nil, hintsDisabledEvent(fmt.Sprintf("%s (%d endpoints, %d zones)", msgInsufficientNumberOfEndpoint, numEndpoints, len(t.cpuRatioByZone)))
	}
	out := map[string]zoneAllocation{}
	remaining, minTotal := numEndpoints, 0
	for zone, ratio := range t.cpuRatioByZone {
		desired := ratio * float64(numEndpoints)
		minimum := int(math.Ceil(desired / (1 + overloadThreshold)))
		out[zone] = zoneAllocation{minimum: minimum, desired: math.Max(desired, float64(minimum))}
		minTotal += minimum
		remaining -= minimum
		if remaining < 0 {
			return nil, hintsDisabledEvent(fmt.Sprintf("%s (%d endpoints, %d zones)", msgMinAllocationExceedsOverload, numEndpoints, len(t.cpuRatioByZone)))
		}
	}
	for zone, a := range out {
		a.maximum = a.minimum + numEndpoints - minTotal
		out[zone] = a
	}
	return out, nil
}

func (t *topologyCache) removeHints(serviceKey string, addressType discovery.AddressType) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.hintsByService[serviceKey]; ok {
		delete(m, addressType)
		if len(m) == 0 {
			delete(t.hintsByService, serviceKey)
		}
	}
	t.populated.Delete(serviceKey)
}

func (t *topologyCache) hasPopulatedHints(serviceKey string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.populated.Has(serviceKey)
}

// overloadedServices returns the Services whose allocated hints leave some
// zone more than overloadThreshold below its current CPU share.
func (t *topologyCache) overloadedServices() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for key, byType := range t.hintsByService {
		for _, hints := range byType {
			if zonesOverloaded(hints, t.cpuRatioByZone) {
				out = append(out, key)
				break
			}
		}
	}
	return out
}

func zonesOverloaded(hints map[string]int, ratios map[string]float64) bool {
	if len(hints) == 0 {
		return false
	}
	if len(ratios) == 0 {
		return true
	}
	total := 0
	for _, n := range hints {
		total += n
	}
	for zone, ratio := range ratios {
		n, ok := hints[zone]
		if !ok || n < int(math.Ceil(float64(total)*ratio/(1+overloadThreshold))) {
			return true
		}
	}
	return false
}

func readyEndpoints(slices ...[]*discovery.EndpointSlice) int {
	n := 0
	for _, group := range slices {
		for _, s := range group {
			for i := range s.Endpoints {
				if endpointIsReady(&s.Endpoints[i]) {
					n++
				}
			}
		}
	}
	return n
}

// sliceZoneHints counts the hints of an unchanged slice per zone, or
// returns nil when the slice must be rewritten (a ready endpoint without a
// hint, a hint to an unknown zone, or a zone over its maximum).
func sliceZoneHints(s *discovery.EndpointSlice, allocated map[string]int, allocs map[string]zoneAllocation) map[string]int {
	out := map[string]int{}
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		if !endpointIsReady(ep) {
			continue
		}
		if ep.Hints == nil || len(ep.Hints.ForZones) == 0 {
			return nil
		}
		for _, z := range ep.Hints.ForZones {
			if _, ok := allocs[z.Name]; !ok {
				return nil
			}
			out[z.Name]++
		}
	}
	for zone, n := range out {
		if n+allocated[zone] > allocs[zone].maximum {
			return nil
		}
	}
	return out
}

// addHints assigns zone hints to the slices being written (moving
// unchanged slices with unusable hints into the updates), then moves hints
// from zones above their share to zones below it. On any condition that
// disables hints, all hints are removed instead.
func (t *topologyCache) addHints(logger klog.Logger, serviceKey string, addressType discovery.AddressType,
	toCreate, toUpdate, unchanged []*discovery.EndpointSlice) ([]*discovery.EndpointSlice, []*discovery.EndpointSlice, []*topologyEvent) {
	var events []*topologyEvent
	disable := func(ev *topologyEvent) ([]*discovery.EndpointSlice, []*discovery.EndpointSlice, []*topologyEvent) {
		logger.Info(ev.message+", removing hints", "key", serviceKey, "addressType", addressType)
		ev.message = withAddressType(ev.message, addressType)
		t.removeHints(serviceKey, addressType)
		c, u := removeHints(toCreate, toUpdate, unchanged)
		return c, u, append(events, ev)
	}

	allocs, ev := t.allocations(readyEndpoints(toCreate, toUpdate, unchanged))
	if ev != nil {
		return disable(ev)
	}
	allocated := map[string]int{}
	keep := unchanged[:0:0]
	for _, s := range unchanged {
		hints := sliceZoneHints(s, allocated, allocs)
		if hints == nil {
			toUpdate = append(toUpdate, s.DeepCopy())
			continue
		}
		keep = append(keep, s)
		for z, n := range hints {
			allocated[z] += n
		}
	}
	unchanged = keep

	writable := append(append([]*discovery.EndpointSlice{}, toCreate...), toUpdate...)
	for _, s := range writable {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if !endpointIsReady(ep) {
				continue
			}
			if ep.Zone == nil || *ep.Zone == "" {
				return disable(hintsDisabledEvent(msgNoZoneSpecified))
			}
			allocated[*ep.Zone]++
			ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: *ep.Zone}}}
		}
	}

	giving, receiving := givingAndReceivingZones(allocs, allocated)
	for zone, diff := range redistributeZoneHints(writable, giving, receiving) {
		allocated[zone] += diff
	}
	if len(allocated) == 0 {
		return disable(hintsDisabledEvent(msgNoAllocatedHintsForZones))
	}

	t.mu.Lock()
	wasPopulated := t.populated.Has(serviceKey)
	if t.hintsByService[serviceKey] == nil {
		t.hintsByService[serviceKey] = map[discovery.AddressType]map[string]int{}
	}
	t.hintsByService[serviceKey][addressType] = allocated
	t.populated.Insert(serviceKey)
	t.mu.Unlock()
	if !wasPopulated {
		logger.Info("Topology Aware Hints has been enabled, adding hints.", "key", serviceKey, "addressType", addressType)
		events = append(events, &topologyEvent{eventType: v1.EventTypeNormal, reason: "TopologyAwareHintsEnabled",
			message: withAddressType(msgTopologyAwareHintsEnabled, addressType)})
	}
	return toCreate, toUpdate, events
}

// givingAndReceivingZones returns how many hints each zone above its
// desired share gives away and each zone below it receives.
func givingAndReceivingZones(allocs map[string]zoneAllocation, allocated map[string]int) (map[string]int, map[string]int) {
	giveWant, receiveWant := map[string]float64{}, map[string]float64{}
	for zone, a := range allocs {
		n := float64(allocated[zone])
		switch {
		case n > a.desired:
			giveWant[zone] = n - a.desired
		case n < a.desired:
			receiveWant[zone] = a.desired - n
		}
	}
	most := func(m map[string]float64) (string, float64) {
		zone, best := "", 0.0
		for z, v := range m {
			if v > best || (v == best && zone != "" && z < zone) {
				zone, best = z, v
			}
		}
		return zone, best
	}
	giving, receiving := map[string]int{}, map[string]int{}
	for {
		gz, g := most(giveWant)
		rz, r := most(receiveWant)
		if gz == "" || rz == "" || (g < 1 && r < 1) || g < 0.5 || r < 0.5 {
			break
		}
		giving[gz]++
		giveWant[gz]--
		receiving[rz]++
		receiveWant[rz]--
	}
	return giving, receiving
}

// redistributeZoneHints re-hints ready endpoints of giving zones to
// receiving zones and returns the per-zone change of hint counts.
func redistributeZoneHints(slices []*discovery.EndpointSlice, giving, receiving map[string]int) map[string]int {
	diff := map[string]int{}
	for _, s := range slices {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if !endpointIsReady(ep) {
				continue
			}
			if len(giving) == 0 || len(receiving) == 0 {
				return diff
			}
			if ep.Zone == nil || *ep.Zone == "" || giving[*ep.Zone] == 0 {
				continue
			}
			from := *ep.Zone
			for _, to := range sets.List(sets.KeySet(receiving)) {
				ep.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: to}}}
				decrement(giving, from)
				decrement(receiving, to)
				diff[to]++
				diff[from]--
				break
			}
		}
	}
	return diff
}

func decrement(m map[string]int, key string) {
	if m[key] <= 1 {
		delete(m, key)
		return
	}
	m[key]--
}
