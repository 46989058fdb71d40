package util

import (
	"sort"

	discovery "k8s.io/api/discovery/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/utils/ptr"
)

// EndpointKey identifies an endpoint across syncs by its addresses,
// hostname and target pod. Conditions, node and zone are left out so that a
// change of them updates the endpoint in place (see EqualBeyondKey).
type EndpointKey string

// KeyOfEndpoint returns the identity of ep; address order does not matter.
func KeyOfEndpoint(ep *discovery.Endpoint) EndpointKey {
	addrs := append([]string(nil), ep.Addresses...)
	sort.Strings(addrs)
	k := struct {
		Addresses []string
		Hostname  string
		Namespace string
		Name      string
	}{Addresses: addrs}
	if ep.Hostname != nil {
		k.Hostname = *ep.Hostname
	}
	if ep.TargetRef != nil {
		k.Namespace, k.Name = ep.TargetRef.Namespace, ep.TargetRef.Name
	}
	return EndpointKey(DeepHashString(k))
}

// EqualBeyondKey compares what KeyOfEndpoint leaves out, ignoring the
// resourceVersion of the target reference (it changes on every pod write).
func EqualBeyondKey(a, b *discovery.Endpoint) bool {
	if !ptr.Equal(a.NodeName, b.NodeName) || !ptr.Equal(a.Zone, b.Zone) ||
		!ptr.Equal(a.Conditions.Ready, b.Conditions.Ready) ||
		!ptr.Equal(a.Conditions.Serving, b.Conditions.Serving) ||
		!ptr.Equal(a.Conditions.Terminating, b.Conditions.Terminating) {
		return false
	}
	if (a.TargetRef == nil) != (b.TargetRef == nil) {
		return false
	}
	if a.TargetRef != nil {
		ra, rb := *a.TargetRef, *b.TargetRef
		ra.ResourceVersion, rb.ResourceVersion = "", ""
		return ra == rb
	}
	return true
}

// EndpointSet holds desired endpoints by identity.
type EndpointSet map[EndpointKey]*discovery.Endpoint

func (s EndpointSet) Insert(ep *discovery.Endpoint)                  { s[KeyOfEndpoint(ep)] = ep }
func (s EndpointSet) Get(ep *discovery.Endpoint) *discovery.Endpoint { return s[KeyOfEndpoint(ep)] }
func (s EndpointSet) Remove(ep *discovery.Endpoint)                  { delete(s, KeyOfEndpoint(ep)) }

// PopAny removes and returns some endpoint, nil when s is empty.
func (s EndpointSet) PopAny() *discovery.Endpoint {
	for k, ep := range s {
		delete(s, k)
		return ep
	}
	return nil
}

// SortedList returns the endpoints ordered by first address, then key, so
// rebuilt slices are written the same way every time.
func (s EndpointSet) SortedList() []discovery.Endpoint {
	out := make([]discovery.Endpoint, 0, len(s))
	for _, ep := range s {
		out = append(out, *ep)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Addresses[0] != out[j].Addresses[0] {
			return out[i].Addresses[0] < out[j].Addresses[0]
		}
		return KeyOfEndpoint(&out[i]) < KeyOfEndpoint(&out[j])
	})
	return out
}

// SlicePrefix is the generateName of an owner's slices: "<name>-", or the
// bare name when the dash would make it invalid.
func SlicePrefix(name string) string {
	prefix := name + "-"
	if len(apimachineryvalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		return name
	}
	return prefix
}
