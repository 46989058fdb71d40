package endpointslice

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
)

func readyNode(name, zone, cpu string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}},
		Status: v1.NodeStatus{
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			Conditions:  []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
		},
	}
}

func TestTopologyAwareHintsAuto(t *testing.T) {
	f := newFixture(t, 100)
	rec := record.NewFakeRecorder(10)
	f.c.reconciler.eventRecorder = rec
	logger, _ := ktesting.NewTestContext(t)
	nodes := []*v1.Node{readyNode("node-a", "zone-a", "4"), readyNode("node-b", "zone-b", "4")}
	for _, n := range nodes {
		if err := f.factory.Core().V1().Nodes().Informer().GetIndexer().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	f.c.topology.setNodes(logger, nodes)

	svc := newService("web")
	svc.Annotations = map[string]string{v1.AnnotationTopologyMode: "Auto"}
	f.addService(svc)
	// 3 endpoints in zone-a, 1 in zone-b: one zone-a endpoint is re-hinted
	// to zone-b so both zones get their share.
	for i := 0; i < 4; i++ {
		p := newPod("web", i, true)
		p.Spec.NodeName = "node-a"
		if i == 3 {
			p.Spec.NodeName = "node-b"
		}
		f.addPod(p)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	hints := map[string]int{}
	for _, ep := range f.slices()[0].Endpoints {
		if ep.Hints == nil || len(ep.Hints.ForZones) != 1 {
			t.Fatalf("endpoint without hint: %+v", ep)
		}
		hints[ep.Hints.ForZones[0].Name]++
	}
	if hints["zone-a"] != 2 || hints["zone-b"] != 2 {
		t.Errorf("hints by zone %v", hints)
	}
	if ev := <-rec.Events; ev != "Normal TopologyAwareHintsEnabled Topology Aware Hints has been enabled, addressType: IPv4" {
		t.Errorf("event %q", ev)
	}

	// Losing node info disables hints and removes them.
	f.syncCache()
	f.c.topology.setNodes(logger, []*v1.Node{readyNode("node-a", "zone-a", "4")})
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	for _, ep := range f.slices()[0].Endpoints {
		if ep.Hints != nil {
			t.Fatalf("hints not removed: %+v", ep)
		}
	}
	want := fmt.Sprintf("Warning TopologyAwareHintsDisabled %s, addressType: IPv4", msgInsufficientNodeInfo)
	if ev := <-rec.Events; ev != want {
		t.Errorf("event %q, want %q", ev, want)
	}
}

func TestOverloadedServices(t *testing.T) {
	tc := newTopologyCache()
	logger, _ := ktesting.NewTestContext(t)
	tc.setNodes(logger, []*v1.Node{readyNode("a", "zone-a", "1"), readyNode("b", "zone-b", "1")})
	tc.hintsByService["ns/even"] = map[discovery.AddressType]map[string]int{discovery.AddressTypeIPv4: {"zone-a": 2, "zone-b": 2}}
	tc.hintsByService["ns/skewed"] = map[discovery.AddressType]map[string]int{discovery.AddressTypeIPv4: {"zone-a": 4}}
	got := tc.overloadedServices()
	if len(got) != 1 || got[0] != "ns/skewed" {
		t.Fatalf("got %v", got)
	}
}
