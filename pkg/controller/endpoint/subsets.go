package endpoint

import (
	"fmt"
	"math"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/types"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"
	utilnet "k8s.io/utils/net"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

// desiredSubsets computes the packed subsets for the Service's pods and
// the number of ready and not-ready addresses added.
func desiredSubsets(logger klog.Logger, service *v1.Service, pods []*v1.Pod) ([]endpointSubset, int, int) {
	subsets := []endpointSubset{}
	ready, notReady := 0, 0
	tolerateUnready := service.Spec.PublishNotReadyAddresses
	add := func(pod *v1.Pod, addr endpointAddress, port *endpointPort) {
		ports := []endpointPort{}
		if port != nil {
			ports = append(ports, *port)
		}
		if tolerateUnready || endpointsliceutil.IsPodReady(pod) {
			subsets = append(subsets, endpointSubset{Addresses: []endpointAddress{addr}, Ports: ports})
			ready++
		} else {
			subsets = append(subsets, endpointSubset{NotReadyAddresses: []endpointAddress{addr}, Ports: ports})
			notReady++
		}
	}
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, tolerateUnready) {
			continue
		}
		addr, err := podToEndpointAddress(service, pod)
		if err != nil {
			logger.V(2).Info("Failed to find endpoint for service with ClusterIP on pod with error", "service", klog.KObj(service), "clusterIP", service.Spec.ClusterIP, "pod", klog.KObj(pod), "error", err)
			continue
		}
		if endpointsliceutil.ShouldSetHostname(pod, service) {
			addr.Hostname = pod.Spec.Hostname
		}
		if len(service.Spec.Ports) == 0 {
			// Only headless Services may list addresses without ports.
			if service.Spec.ClusterIP == v1.ClusterIPNone {
				add(pod, addr, nil)
			}
			continue
		}
		for i := range service.Spec.Ports {
			sp := &service.Spec.Ports[i]
			num, err := esutil.FindPort(pod, sp)
			if err != nil {
				logger.V(4).Info("Failed to find port for service", "service", klog.KObj(service), "error", err)
				continue
			}
			add(pod, addr, &endpointPort{Name: sp.Name, Port: int32(num), Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
		}
	}
	return RepackSubsets(subsets), ready, notReady
}

// podToEndpointAddress picks the pod IP of the Service's primary family.
func podToEndpointAddress(svc *v1.Service, pod *v1.Pod) (endpointAddress, error) {
	family := v1.IPv4Protocol
	switch {
	case len(svc.Spec.IPFamilies) > 0:
		family = svc.Spec.IPFamilies[0]
	case svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone:
		if utilnet.IsIPv6String(svc.Spec.ClusterIP) {
			family = v1.IPv6Protocol
		}
	case utilnet.IsIPv6String(pod.Status.PodIP):
		family = v1.IPv6Protocol
	}
	wantV6 := family == v1.IPv6Protocol
	for _, podIP := range pod.Status.PodIPs {
		ip := utilnet.ParseIPSloppy(podIP.IP)
		if ip != nil && utilnet.IsIPv6(ip) == wantV6 {
			nodeName := pod.Spec.NodeName
			return endpointAddress{
				IP:       ip.String(),
				NodeName: &nodeName,
				TargetRef: &v1.ObjectReference{
					Kind:      "Pod",
					Namespace: pod.Namespace,
					Name:      pod.Name,
					UID:       pod.UID,
				},
			}, nil
		}
	}
	return endpointAddress{}, fmt.Errorf("failed to find a matching endpoint for service %v", svc.Name)
}

type addressKey struct {
	ip  string
	uid types.UID
}

// RepackSubsets merges subsets into the canonical form: one subset per
// distinct set of (address, readiness), carrying every port that set
// serves; an address not ready for some port is not ready there. The
// result is sorted so equal inputs compare equal.
func RepackSubsets(subsets []endpointSubset) []endpointSubset {
	addrs := map[addressKey]*endpointAddress{}
	type addrState map[addressKey]bool // key -> ready
	byPort := map[endpointPort]addrState{}
	noPort := endpointPort{Port: -1}

	note := func(a *endpointAddress, port endpointPort, ready bool) {
		k := addressKey{ip: a.IP}
		if a.TargetRef != nil {
			k.uid = a.TargetRef.UID
		}
		if _, ok := addrs[k]; !ok {
			c := *a
			addrs[k] = &c
		}
		st, ok := byPort[port]
		if !ok {
			st = addrState{}
			byPort[port] = st
		}
		if was, seen := st[k]; !seen || was {
			st[k] = ready
		}
	}
	for i := range subsets {
		ports := subsets[i].Ports
		if len(ports) == 0 {
			ports = []endpointPort{noPort}
		}
		for _, p := range ports {
			for j := range subsets[i].Addresses {
				note(&subsets[i].Addresses[j], p, true)
			}
			for j := range subsets[i].NotReadyAddresses {
				note(&subsets[i].NotReadyAddresses[j], p, false)
			}
		}
	}

	// Group ports by identical address state.
	type group struct {
		state addrState
		ports []endpointPort
	}
	groups := map[string]*group{}
	for port, st := range byPort {
		keys := make([]string, 0, len(st))
		for k, r := range st {
			keys = append(keys, fmt.Sprintf("%s/%s/%t", k.ip, k.uid, r))
		}
		sort.Strings(keys)
		h := esutil.DeepHashString(keys)
		g, ok := groups[h]
		if !ok {
			g = &group{state: st}
			groups[h] = g
		}
		if port.Port > 0 {
			g.ports = append(g.ports, port)
		}
	}
	out := []endpointSubset{}
	for _, g := range groups {
		var ready, notReady []endpointAddress
		for k, r := range g.state {
			if r {
				ready = append(ready, *addrs[k])
			} else {
				notReady = append(notReady, *addrs[k])
			}
		}
		out = append(out, endpointSubset{Addresses: ready, NotReadyAddresses: notReady, Ports: g.ports})
	}
	return sortSubsets(out)
}

func lessAddress(a, b *endpointAddress) bool {
	if a.IP != b.IP {
		return a.IP < b.IP
	}
	if b.TargetRef == nil {
		return false
	}
	if a.TargetRef == nil {
		return true
	}
	return a.TargetRef.UID < b.TargetRef.UID
}

func sortSubsets(subsets []endpointSubset) []endpointSubset {
	for i := range subsets {
		s := &subsets[i]
		sort.Slice(s.Addresses, func(x, y int) bool { return lessAddress(&s.Addresses[x], &s.Addresses[y]) })
		sort.Slice(s.NotReadyAddresses, func(x, y int) bool { return lessAddress(&s.NotReadyAddresses[x], &s.NotReadyAddresses[y]) })
		sort.Slice(s.Ports, func(x, y int) bool {
			return esutil.DeepHashString(s.Ports[x]) < esutil.DeepHashString(s.Ports[y])
		})
	}
	sort.Slice(subsets, func(x, y int) bool {
		return esutil.DeepHashString(subsets[x]) < esutil.DeepHashString(subsets[y])
	})
	return subsets
}

// subsetsEqualIgnoringResourceVersion compares subsets, ignoring the
// resourceVersion of target references.
func subsetsEqualIgnoringResourceVersion(a, b []endpointSubset) bool {
	return semanticIgnoreRV.DeepEqual(a, b)
}

var semanticIgnoreRV = conversion.EqualitiesOrDie(func(a, b v1.ObjectReference) bool {
	a.ResourceVersion, b.ResourceVersion = "", ""
	return a == b
})

// capacityAnnotationCorrect reports whether the over-capacity annotation
// is absent and the subsets fit the capacity.
func capacityAnnotationCorrect(annotations map[string]string, subsets []endpointSubset) bool {
	n := 0
	for _, s := range subsets {
		n += len(s.Addresses) + len(s.NotReadyAddresses)
	}
	if n > maxCapacity {
		return false
	}
	_, ok := annotations[v1.EndpointsOverCapacity]
	return !ok
}

// truncateEndpoints cuts the Endpoints down to maxCapacity addresses,
// proportionally across subsets, dropping not-ready addresses first. It
// reports whether anything was cut.
func truncateEndpoints(ep *endpoints) bool {
	totalReady, totalNotReady := 0, 0
	for _, s := range ep.Subsets {
		totalReady += len(s.Addresses)
		totalNotReady += len(s.NotReadyAddresses)
	}
	if totalReady+totalNotReady <= maxCapacity {
		return false
	}
	truncateReady := totalReady > maxCapacity
	budget := maxCapacity - totalReady
	total := totalNotReady
	if truncateReady {
		budget = maxCapacity
		total = totalReady
	}
	left := budget
	for i := range ep.Subsets {
		s := &ep.Subsets[i]
		n := len(s.NotReadyAddresses)
		if truncateReady {
			n = len(s.Addresses)
		}
		keep := int(math.Ceil(float64(n) / float64(total) * float64(budget)))
		if keep > left {
			keep = left
		}
		if truncateReady {
			if len(s.Addresses) > keep {
				s.Addresses = s.Addresses[:keep]
			}
			s.NotReadyAddresses = []endpointAddress{}
			left -= len(s.Addresses)
		} else {
			if len(s.NotReadyAddresses) > keep {
				s.NotReadyAddresses = s.NotReadyAddresses[:keep]
			}
			left -= len(s.NotReadyAddresses)
		}
	}
	return true
}

// staleEndpointsTracker remembers the resourceVersion each Endpoints had
// before our last update; seeing it again in the cache means the cache lags.
type staleEndpointsTracker struct {
	mu sync.RWMutex
	rv map[types.NamespacedName]string
}

func newStaleEndpointsTracker() *staleEndpointsTracker {
	return &staleEndpointsTracker{rv: map[types.NamespacedName]string{}}
}

func (t *staleEndpointsTracker) Stale(ep *endpoints) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rv[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}] = ep.ResourceVersion
}

func (t *staleEndpointsTracker) IsStale(ep *endpoints) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	rv, ok := t.rv[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}]
	return ok && rv == ep.ResourceVersion
}

func (t *staleEndpointsTracker) Delete(namespace, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.rv, types.NamespacedName{Namespace: namespace, Name: name})
}
