package endpointslicemirroring

import (
	"fmt"
	"maps"
	"sort"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	utilnet "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

// portMapKey identifies one group of mirrored slices: an address type and
// a set of ports (order-independent). Each subset of an Endpoints object
// maps to one key per address type.
type portMapKey struct {
	addressType discovery.AddressType
	portsHash   string
}

func newPortMapKey(ports []discovery.EndpointPort, addressType discovery.AddressType) portMapKey {
	return portMapKey{addressType: addressType, portsHash: esutil.DeepHashString(sortedPorts(ports))}
}

// sortedPorts returns a copy of ports in a canonical (hash) order, so the
// same set of ports always hashes and is written the same way.
func sortedPorts(ports []discovery.EndpointPort) []discovery.EndpointPort {
	type hashed struct {
		hash string
		port discovery.EndpointPort
	}
	hs := make([]hashed, len(ports))
	for i, p := range ports {
		hs[i] = hashed{hash: esutil.DeepHashString(p), port: p}
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].hash < hs[j].hash })
	out := make([]discovery.EndpointPort, len(hs))
	for i := range hs {
		out[i] = hs[i].port
	}
	return out
}

// toSlicePorts converts the ports of an Endpoints subset.
func toSlicePorts(ports []endpointPort) []discovery.EndpointPort {
	out := make([]discovery.EndpointPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, discovery.EndpointPort{
			Name:        ptr.To(p.Name),
			Port:        ptr.To(p.Port),
			Protocol:    ptr.To(p.Protocol),
			AppProtocol: p.AppProtocol,
		})
	}
	return sortedPorts(out)
}

// addressToEndpoint converts an Endpoints address. It returns false for an
// address that is not an IP. Irregular spellings (leading zeros, mapped
// IPv4) are normalised, which also decides the address type.
func addressToEndpoint(addr endpointAddress, ready bool) (*discovery.Endpoint, discovery.AddressType, bool) {
	ip := utilnet.ParseIPSloppy(addr.IP)
	if ip == nil {
		return nil, "", false
	}
	addressType := discovery.AddressTypeIPv4
	if ip.To4() == nil {
		addressType = discovery.AddressTypeIPv6
	}
	ep := &discovery.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)},
	}
	if addr.TargetRef != nil {
		ep.TargetRef = addr.TargetRef.DeepCopy()
	}
	if addr.NodeName != nil {
		ep.NodeName = ptr.To(*addr.NodeName)
	}
	if addr.Hostname != "" {
		ep.Hostname = ptr.To(addr.Hostname)
	}
	return ep, addressType, true
}

// newEndpointSlice returns an unsaved slice mirroring ep for one port
// mapping. name is empty for a new slice (the API server then generates
// one from "<endpoints name>-").
func newEndpointSlice(ep *endpoints, ports []discovery.EndpointPort, addressType discovery.AddressType, name string) *discovery.EndpointSlice {
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ep.Namespace,
			Labels:      desiredLabels(ep),
			Annotations: desiredAnnotations(ep),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "v1",
				Kind:               "Endpoints",
				Name:               ep.Name,
				UID:                ep.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		AddressType: addressType,
		Ports:       ports,
		Endpoints:   []discovery.Endpoint{},
	}
	if name == "" {
		slice.GenerateName = esutil.SlicePrefix(ep.Name)
	}
	return slice
}

// desiredLabels are the Endpoints' labels with service-name and managed-by
// forced to ours.
func desiredLabels(ep *endpoints) map[string]string {
	out := maps.Clone(ep.Labels)
	if out == nil {
		out = map[string]string{}
	}
	out[discovery.LabelServiceName] = ep.Name
	out[discovery.LabelManagedBy] = ControllerName
	return out
}

// desiredAnnotations are the Endpoints' annotations minus the trigger time
// (meaningful only to the Endpoints controller's own objects) and kubectl's
// last-applied configuration (which describes the Endpoints, not the slice).
func desiredAnnotations(ep *endpoints) map[string]string {
	out := make(map[string]string, len(ep.Annotations))
	for k, v := range ep.Annotations {
		if k == v1.EndpointsLastChangeTriggerTime || k == v1.LastAppliedConfigAnnotation {
			continue
		}
		out[k] = v
	}
	return out
}

// ownerRecreated reports whether the slice is owned by an earlier Endpoints
// object of the same name (deleted and recreated since): the slice must be
// rewritten to point at the current one.
func ownerRecreated(ep *endpoints, slice *discovery.EndpointSlice) bool {
	for _, o := range slice.OwnerReferences {
		if o.Kind == "Endpoints" && o.Name == ep.Name && o.UID != ep.UID {
			return true
		}
	}
	return false
}

// shouldMirror reports whether an Endpoints object is a candidate for
// mirroring (its Service must still be checked): not opted out with the
// skip-mirror label (the API server sets it on default/kubernetes) and not
// an old-style leader election lock.
func shouldMirror(ep *endpoints) bool {
	if ep == nil || ep.Labels[discovery.LabelSkipMirror] == "true" {
		return false
	}
	_, isLock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !isLock
}

func managedByController(slice *discovery.EndpointSlice) bool {
	return slice.Labels[discovery.LabelManagedBy] == ControllerName
}

// fromDeleteEvent unwraps the object of a delete event, which may be a
// tombstone when the informer missed the deletion.
func fromDeleteEvent[T any](obj interface{}) (T, bool) {
	if o, ok := obj.(T); ok {
		return o, true
	}
	var zero T
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("couldn't get object from tombstone %#v", obj))
		return zero, false
	}
	o, ok := tombstone.Obj.(T)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("tombstone contained unexpected object %#v", obj))
		return zero, false
	}
	return o, true
}
