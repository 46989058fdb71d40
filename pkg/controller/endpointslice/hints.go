package endpointslice

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// validTrafficDistribution reports whether the Service's trafficDistribution
// makes this controller set hints. PreferSameZone/PreferSameNode need the
// PreferSameTrafficDistribution feature.
func (r *reconciler) validTrafficDistribution(td *string) bool {
	if td == nil {
		return false
	}
	switch *td {
	case v1.ServiceTrafficDistributionPreferClose:
		return true
	case v1.ServiceTrafficDistributionPreferSameZone, v1.ServiceTrafficDistributionPreferSameNode:
		return r.preferSameTrafficDistribution
	}
	return false
}

// desiredHints returns the hints a ready endpoint gets for a close traffic
// distribution: its own zone (and node for PreferSameNode); nil without.
func desiredHints(ep *discovery.Endpoint, sameNode bool) *discovery.EndpointHints {
	var h discovery.EndpointHints
	if ep.Zone != nil {
		h.ForZones = []discovery.ForZone{{Name: *ep.Zone}}
	}
	if sameNode && ep.NodeName != nil {
		h.ForNodes = []discovery.ForNode{{Name: *ep.NodeName}}
	}
	if h.ForZones == nil && h.ForNodes == nil {
		return nil
	}
	return &h
}

func endpointIsReady(ep *discovery.Endpoint) bool {
	return ep.Conditions.Ready != nil && *ep.Conditions.Ready
}

// closeHintsNeedUpdate reports whether some ready endpoint's hints differ
// from the desired ones. Not-ready endpoints keep whatever they have.
func closeHintsNeedUpdate(slice *discovery.EndpointSlice, sameNode bool) bool {
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		if !endpointIsReady(ep) {
			continue
		}
		if !apiequality.Semantic.DeepEqual(ep.Hints, desiredHints(ep, sameNode)) {
			return true
		}
	}
	return false
}

func setCloseHints(slice *discovery.EndpointSlice, sameNode bool) {
	for i := range slice.Endpoints {
		if endpointIsReady(&slice.Endpoints[i]) {
			slice.Endpoints[i].Hints = desiredHints(&slice.Endpoints[i], sameNode)
		}
	}
}

// reconcileCloseHints sets same-zone (and same-node) hints on the slices to
// write and moves unchanged slices with wrong hints into the updates.
func reconcileCloseHints(td string, toCreate, toUpdate, unchanged []*discovery.EndpointSlice) ([]*discovery.EndpointSlice, []*discovery.EndpointSlice) {
	sameNode := td == v1.ServiceTrafficDistributionPreferSameNode
	for _, s := range unchanged {
		if closeHintsNeedUpdate(s, sameNode) {
			toUpdate = append(toUpdate, s.DeepCopy())
		}
	}
	for _, s := range toCreate {
		setCloseHints(s, sameNode)
	}
	for _, s := range toUpdate {
		setCloseHints(s, sameNode)
	}
	return toCreate, toUpdate
}

// removeHints clears hints from the slices to write and moves unchanged
// slices that still carry hints into the updates.
func removeHints(toCreate, toUpdate, unchanged []*discovery.EndpointSlice) ([]*discovery.EndpointSlice, []*discovery.EndpointSlice) {
	for _, s := range append(append([]*discovery.EndpointSlice{}, toCreate...), toUpdate...) {
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = nil
		}
	}
	for _, s := range unchanged {
		hasHints := false
		for i := range s.Endpoints {
			if s.Endpoints[i].Hints != nil {
				hasHints = true
				break
			}
		}
		if !hasHints {
			continue
		}
		c := s.DeepCopy()
		for i := range c.Endpoints {
			c.Endpoints[i].Hints = nil
		}
		toUpdate = append(toUpdate, c)
	}
	return toCreate, toUpdate
}
