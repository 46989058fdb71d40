package endpointslicemirroring

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// mirror syncs Endpoints name (with a selector-less Service) and returns
// the resulting slices.
func (f *fixture) mirror(ep *endpoints) []discovery.EndpointSlice {
	f.t.Helper()
	f.add(newService(ep.Name, nil))
	f.add(ep)
	f.mustSync(ep.Name)
	f.syncCache()
	return f.slices()
}

func describe(slices []discovery.EndpointSlice) string {
	var parts []string
	for _, s := range slices {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
		}
		// Ports are written in a canonical but hash-defined order.
		sort.Strings(ports)
		var eps []string
		for _, e := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%s/%t", e.Addresses[0], *e.Conditions.Ready))
		}
		parts = append(parts, fmt.Sprintf("%s%v%v", s.AddressType, ports, eps))
	}
	return strings.Join(parts, " ")
}

func TestReconcileSubsets(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subsets []endpointSubset
		// want lists the slices, sorted, as "<type>[ports][ip/ready...]".
		want []string
	}{
		{
			name: "no subsets",
		},
		{
			name:    "no addresses",
			subsets: []endpointSubset{{Ports: httpPort(80)}},
		},
		{
			name: "same address on two subsets with different ports merges into one slice",
			subsets: []endpointSubset{
				{Ports: []endpointPort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}}, Addresses: addrs("10.0.0.1")},
				{Ports: []endpointPort{{Name: "b", Port: 90, Protocol: v1.ProtocolTCP}}, Addresses: addrs("10.0.0.1")},
			},
			want: []string{"IPv4[a:80 b:90][10.0.0.1/true]"},
		},
		{
			name: "different addresses and ports give one slice per subset",
			subsets: []endpointSubset{
				{Ports: []endpointPort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}}, Addresses: addrs("10.0.0.1")},
				{Ports: []endpointPort{{Name: "b", Port: 90, Protocol: v1.ProtocolTCP}}, Addresses: addrs("10.0.0.2")},
			},
			want: []string{"IPv4[a:80][10.0.0.1/true]", "IPv4[b:90][10.0.0.2/true]"},
		},
		{
			name: "dual stack subset gives one slice per address type",
			subsets: []endpointSubset{{
				Ports:             httpPort(80),
				Addresses:         addrs("10.0.0.1", "fd00::1"),
				NotReadyAddresses: addrs("fd00::2"),
			}},
			want: []string{"IPv4[http:80][10.0.0.1/true]", "IPv6[http:80][fd00::1/true fd00::2/false]"},
		},
		{
			name: "not ready for a port wins over ready",
			subsets: []endpointSubset{
				{Ports: httpPort(80), Addresses: addrs("10.0.0.1", "10.0.0.2")},
				{Ports: httpPort(80), NotReadyAddresses: addrs("10.0.0.2")},
			},
			want: []string{"IPv4[http:80][10.0.0.1/true 10.0.0.2/false]"},
		},
		{
			name:    "irregular IPs are normalised",
			subsets: []endpointSubset{{Ports: httpPort(80), Addresses: addrs("010.000.000.001", "::ffff:10.0.0.2")}},
			want:    []string{"IPv4[http:80][10.0.0.1/true 10.0.0.2/true]"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1000)
			slices := f.mirror(newEndpoints("web", tc.subsets...))
			got := []string{}
			for _, s := range slices {
				got = append(got, describe([]discovery.EndpointSlice{s}))
			}
			// Creation order (and so naming) is random across port mappings.
			sort.Strings(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInvalidAddressesSkippedWithEvent(t *testing.T) {
	f := newFixture(t, 1000)
	slices := f.mirror(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1", "not-an-ip", "300.1.1.1")}))
	if got := describe(slices); got != "IPv4[http:80][10.0.0.1/true]" {
		t.Errorf("slices: %s", got)
	}
	events := f.events()
	if len(events) != 1 || events[0] != "Warning InvalidIPAddress Skipped 2 invalid IP addresses when mirroring to EndpointSlices" {
		t.Errorf("events %q", events)
	}
}

func TestTruncatesAtMaxEndpointsPerSubset(t *testing.T) {
	f := newFixture(t, 3)
	slices := f.mirror(newEndpoints("web",
		endpointSubset{
			Ports:             httpPort(80),
			Addresses:         addrs("10.0.0.4", "10.0.0.2"),
			NotReadyAddresses: addrs("10.0.0.1", "10.0.0.3"),
		},
		endpointSubset{Ports: httpPort(90), Addresses: addrs("10.1.0.5", "10.1.0.4", "10.1.0.3", "10.1.0.2", "10.1.0.1")},
	))
	// Ready addresses go first; the limit applies per subset.
	got := describe(slices)
	for _, want := range []string{
		"IPv4[http:80][10.0.0.1/false 10.0.0.2/true 10.0.0.4/true]",
		"IPv4[http:90][10.1.0.1/true 10.1.0.2/true 10.1.0.3/true]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("slices %s, missing %s", got, want)
		}
	}
	events := f.events()
	if len(events) != 1 || events[0] != "Warning TooManyAddressesToMirror A max of 3 addresses can be mirrored to EndpointSlices per Endpoints subset. 3 addresses were skipped" {
		t.Errorf("events %q", events)
	}
}

func TestDefaultLimitOf1000(t *testing.T) {
	for _, n := range []int{1000, 1001} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t, 1000)
			var ips []string
			for i := 0; i < n; i++ {
				ips = append(ips, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
			}
			slices := f.mirror(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs(ips...)}))
			if len(slices) != 1 || len(slices[0].Endpoints) != 1000 {
				t.Fatalf("want one slice of 1000 endpoints, got %d slices", len(slices))
			}
			if events := f.events(); (n > 1000) != (len(events) == 1) {
				t.Errorf("events %q", events)
			}
		})
	}
}

func TestUnchangedEndpointsWriteNothing(t *testing.T) {
	f := newFixture(t, 1000)
	ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1", "10.0.0.2")})
	ep.Labels = map[string]string{"a": "b"}
	ep.Annotations = map[string]string{"c": "d"}
	f.mirror(ep)

	f.mustSync("web")
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("unchanged sync wrote %v", w)
	}
	// Only the dropped annotations changed.
	ep = ep.DeepCopy()
	ep.Annotations[v1.EndpointsLastChangeTriggerTime] = "2026-01-01T00:00:00Z"
	ep.Annotations[v1.LastAppliedConfigAnnotation] = "{}"
	f.add(ep)
	f.mustSync("web")
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("sync wrote %v for ignored annotations", w)
	}
}

func TestAdoptsMatchingSliceWithoutWriting(t *testing.T) {
	f := newFixture(t, 1000)
	// As after a controller restart: the slice exists but is not tracked.
	existing := mirroredSlice("web-abc", "web", 80, "10.0.0.1")
	f.add(existing)
	f.mirror(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	if w := f.writes(); len(w) != 0 {
		t.Fatalf("wrote %v", w)
	}
	cached, err := f.c.endpointSliceLister.EndpointSlices(ns).Get("web-abc")
	if err != nil {
		t.Fatal(err)
	}
	if !f.c.tracker.Has(cached) {
		t.Error("adopted slice not tracked")
	}
}

func TestChangesUpdateTheSliceInPlace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*endpoints)
		check func(*testing.T, discovery.EndpointSlice)
	}{
		{
			name:  "address",
			tweak: func(ep *endpoints) { ep.Subsets[0].Addresses = addrs("10.0.0.9") },
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if got := sliceIPs(s); fmt.Sprint(got) != "[10.0.0.9]" {
					t.Errorf("ips %v", got)
				}
			},
		},
		{
			name: "readiness",
			tweak: func(ep *endpoints) {
				ep.Subsets[0].NotReadyAddresses, ep.Subsets[0].Addresses = ep.Subsets[0].Addresses, nil
			},
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if *s.Endpoints[0].Conditions.Ready {
					t.Error("still ready")
				}
			},
		},
		{
			name:  "label",
			tweak: func(ep *endpoints) { ep.Labels = map[string]string{"new": "label"} },
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if s.Labels["new"] != "label" || s.Labels[discovery.LabelManagedBy] != ControllerName {
					t.Errorf("labels %v", s.Labels)
				}
			},
		},
		{
			name:  "annotation",
			tweak: func(ep *endpoints) { ep.Annotations = map[string]string{"new": "annotation"} },
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if s.Annotations["new"] != "annotation" {
					t.Errorf("annotations %v", s.Annotations)
				}
			},
		},
		{
			name:  "recreated Endpoints",
			tweak: func(ep *endpoints) { ep.UID = "new-uid" },
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if s.OwnerReferences[0].UID != "new-uid" {
					t.Errorf("owner %v", s.OwnerReferences)
				}
			},
		},
		{
			name: "ports (recycled rather than deleted and created)",
			tweak: func(ep *endpoints) {
				ep.Subsets[0].Ports = httpPort(8080)
			},
			check: func(t *testing.T, s discovery.EndpointSlice) {
				if *s.Ports[0].Port != 8080 {
					t.Errorf("ports %v", s.Ports)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1000)
			ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")})
			before := f.mirror(ep)
			if len(before) != 1 {
				t.Fatalf("slices %v", before)
			}
			ep = ep.DeepCopy()
			tc.tweak(ep)
			f.add(ep)
			f.mustSync("web")
			name := before[0].Name
			if w := f.writes(); fmt.Sprint(w) != fmt.Sprintf("[update %s]", name) {
				t.Fatalf("writes %v, want one update of %s", w, name)
			}
			after := f.slices()
			if len(after) != 1 || after[0].Name != name {
				t.Fatalf("slices %v", after)
			}
			tc.check(t, after[0])
		})
	}
}

func TestAddressTypeChangeReplacesSlice(t *testing.T) {
	f := newFixture(t, 1000)
	ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")})
	old := f.mirror(ep)[0].Name
	ep = ep.DeepCopy()
	ep.Subsets[0].Addresses = addrs("fd00::1")
	f.add(ep)
	f.mustSync("web")
	// A slice's address type is immutable: no recycling across types.
	if w := f.writes(); fmt.Sprint(w) != fmt.Sprintf("[create web-* delete %s]", old) {
		t.Errorf("writes %v", w)
	}
	if got := describe(f.slices()); got != "IPv6[http:80][fd00::1/true]" {
		t.Errorf("slices %s", got)
	}
}

func TestDuplicateSlicesAreDeleted(t *testing.T) {
	f := newFixture(t, 1000)
	f.add(mirroredSlice("web-a", "web", 80, "10.0.0.1"))
	f.add(mirroredSlice("web-b", "web", 80, "10.0.0.1"))
	f.mirror(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	if w := f.writes(); fmt.Sprint(w) != "[delete web-b]" {
		t.Errorf("writes %v", w)
	}
}

func TestNoCreatesForEndpointsBeingDeleted(t *testing.T) {
	f := newFixture(t, 1000)
	ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")})
	ep.DeletionTimestamp = &metav1.Time{}
	if slices := f.mirror(ep); len(slices) != 0 {
		t.Errorf("created %v", slices)
	}
}

func TestTerminatingNamespaceIsNotAnError(t *testing.T) {
	f := newFixture(t, 1000)
	f.client.PrependReactor("create", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "endpointslices"}, "", fmt.Errorf("namespace terminating"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: v1.NamespaceTerminatingCause}}
		return true, nil, err
	})
	f.add(newService("web", nil))
	f.add(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	if err := f.sync("web"); err != nil {
		t.Errorf("sync: %v", err)
	}
}

func TestCreateErrorIsReturned(t *testing.T) {
	f := newFixture(t, 1000)
	f.client.PrependReactor("create", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("boom")
	})
	f.add(newService("web", nil))
	f.add(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	if err := f.sync("web"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("sync: %v", err)
	}
}

func TestRecycleSlices(t *testing.T) {
	create := func(t discovery.AddressType) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: "web-"}, AddressType: t}
	}
	del := func(name string, t discovery.AddressType) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, AddressType: t}
	}
	v4, v6 := create(discovery.AddressTypeIPv4), create(discovery.AddressTypeIPv6)
	plan := slicesByAction{
		toCreate: []*discovery.EndpointSlice{v4, v6},
		toDelete: []*discovery.EndpointSlice{del("old6", discovery.AddressTypeIPv6), del("old6b", discovery.AddressTypeIPv6)},
	}
	recycleSlices(&plan)
	if len(plan.toCreate) != 1 || plan.toCreate[0] != v4 || v4.Name != "" {
		t.Errorf("toCreate %v", plan.toCreate)
	}
	if len(plan.toUpdate) != 1 || plan.toUpdate[0] != v6 || v6.Name != "old6" || v6.GenerateName != "" {
		t.Errorf("toUpdate %v", plan.toUpdate)
	}
	if len(plan.toDelete) != 1 || plan.toDelete[0].Name != "old6b" {
		t.Errorf("toDelete %v", plan.toDelete)
	}
}
