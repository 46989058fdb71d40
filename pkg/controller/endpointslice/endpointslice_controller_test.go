package endpointslice

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

type fixture struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
}

func newFixture(t *testing.T, maxPerSlice int32) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	var n atomic.Int64
	// The fake tracker neither generates names nor UIDs nor generations.
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(k8stesting.CreateAction).GetObject().(*discovery.EndpointSlice)
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, n.Add(1))
		}
		s.UID = types.UID("uid-" + s.Name)
		s.Generation = 1
		return false, nil, nil
	})
	client.PrependReactor("update", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(k8stesting.UpdateAction).GetObject().(*discovery.EndpointSlice)
		s.Generation++
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().Services(), factory.Core().V1().Nodes(),
		factory.Discovery().V1().EndpointSlices(), maxPerSlice, client, 0)
	t.Cleanup(func() {
		c.serviceQueue.ShutDown()
		c.podQueue.ShutDown()
		c.topologyQueue.ShutDown()
	})
	return &fixture{t: t, ctx: ctx, client: client, factory: factory, c: c}
}

func (f *fixture) addService(svc *v1.Service) {
	f.t.Helper()
	if err := f.factory.Core().V1().Services().Informer().GetIndexer().Add(svc); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) addPod(pod *v1.Pod) {
	f.t.Helper()
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) addNode(name, zone string) {
	f.t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}}}
	if err := f.factory.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		f.t.Fatal(err)
	}
}

// syncCache copies the slices from the fake API into the informer cache.
func (f *fixture) syncCache() {
	f.t.Helper()
	list, err := f.client.DiscoveryV1().EndpointSlices("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	testutil.ReplaceCache(f.t, f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer(), list.Items)
}

func (f *fixture) sync(key string) error {
	f.client.ClearActions()
	return f.c.syncService(f.ctx, key)
}

func (f *fixture) slices() []discovery.EndpointSlice {
	f.t.Helper()
	list, err := f.client.DiscoveryV1().EndpointSlices("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func (f *fixture) countActions(verb string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "endpointslices" {
			n++
		}
	}
	return n
}

func newService(name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("svc-" + name),
			Labels:            map[string]string{"team": "a"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1.ServiceSpec{
			Selector:   map[string]string{"app": name},
			ClusterIP:  "10.0.0.10",
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{
				Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web"),
			}},
		},
	}
}

func newPod(svc string, i int, ready bool, ips ...string) *v1.Pod {
	if len(ips) == 0 {
		ips = []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}
	}
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-pod-%d", svc, i), Namespace: "ns", UID: types.UID(fmt.Sprintf("%s-uid-%d", svc, i)),
			Labels: map[string]string{"app": svc}, ResourceVersion: "1",
		},
		Spec: v1.PodSpec{
			NodeName: "node-1",
			Containers: []v1.Container{{
				Name:  "c",
				Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			}},
		},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			PodIP:      ips[0],
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status}},
		},
	}
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, v1.PodIP{IP: ip})
	}
	return pod
}

func TestSyncCreatesSliceWithLabelsOwnerPortsAndConditions(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	f.addService(svc)
	ready := newPod("web", 1, true)
	ready.Spec.Hostname = "h1"
	ready.Spec.Subdomain = "web"
	f.addPod(ready)
	f.addPod(newPod("web", 2, false))
	term := newPod("web", 3, true)
	term.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	f.addPod(term)
	done := newPod("web", 4, true)
	done.Status.Phase = v1.PodSucceeded
	f.addPod(done)
	other := newPod("other", 5, true)
	f.addPod(other)

	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	slices := f.slices()
	if len(slices) != 1 {
		t.Fatalf("want 1 slice, got %d", len(slices))
	}
	s := slices[0]
	if s.GenerateName != "web-" || s.AddressType != discovery.AddressTypeIPv4 {
		t.Errorf("generateName=%q addressType=%q", s.GenerateName, s.AddressType)
	}
	wantLabels := map[string]string{
		"team":                     "a",
		discovery.LabelServiceName: "web",
		discovery.LabelManagedBy:   "endpointslice-controller.k8s.io",
	}
	if len(s.Labels) != len(wantLabels) {
		t.Errorf("labels = %v", s.Labels)
	}
	for k, v := range wantLabels {
		if s.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, s.Labels[k], v)
		}
	}
	if len(s.OwnerReferences) != 1 {
		t.Fatalf("ownerRefs = %v", s.OwnerReferences)
	}
	o := s.OwnerReferences[0]
	if o.APIVersion != "v1" || o.Kind != "Service" || o.Name != "web" || o.UID != svc.UID || !ptr.Deref(o.Controller, false) || !ptr.Deref(o.BlockOwnerDeletion, false) {
		t.Errorf("ownerRef = %+v", o)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != 8080 || *s.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("ports = %+v", s.Ports)
	}
	if s.Annotations[v1.EndpointsLastChangeTriggerTime] != "2026-01-01T00:00:00Z" {
		t.Errorf("trigger time annotation = %q", s.Annotations[v1.EndpointsLastChangeTriggerTime])
	}
	if len(s.Endpoints) != 3 {
		t.Fatalf("want 3 endpoints (ready, not ready, terminating), got %d: %+v", len(s.Endpoints), s.Endpoints)
	}
	byPod := map[string]discovery.Endpoint{}
	for _, ep := range s.Endpoints {
		byPod[ep.TargetRef.Name] = ep
		if ptr.Deref(ep.NodeName, "") != "node-1" || ptr.Deref(ep.Zone, "") != "zone-a" || ep.TargetRef.Kind != "Pod" {
			t.Errorf("endpoint %+v", ep)
		}
	}
	check := func(pod string, r, s, term bool) {
		ep := byPod[pod]
		c := ep.Conditions
		if *c.Ready != r || *c.Serving != s || *c.Terminating != term {
			t.Errorf("%s: ready=%v serving=%v terminating=%v, want %v %v %v", pod, *c.Ready, *c.Serving, *c.Terminating, r, s, term)
		}
	}
	check("web-pod-1", true, true, false)
	check("web-pod-2", false, false, false)
	check("web-pod-3", false, true, true)
	if ptr.Deref(byPod["web-pod-1"].Hostname, "") != "h1" || byPod["web-pod-2"].Hostname != nil {
		t.Errorf("hostname: %v %v", byPod["web-pod-1"].Hostname, byPod["web-pod-2"].Hostname)
	}
}

func TestSyncSplitsAtMaxEndpointsPerSlice(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	for i := 0; i < 250; i++ {
		f.addPod(newPod("web", i, true))
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	slices := f.slices()
	if len(slices) != 3 {
		t.Fatalf("want 3 slices, got %d", len(slices))
	}
	total := 0
	for _, s := range slices {
		if len(s.Endpoints) > 100 {
			t.Errorf("slice %s has %d endpoints", s.Name, len(s.Endpoints))
		}
		total += len(s.Endpoints)
	}
	if total != 250 {
		t.Errorf("total endpoints %d", total)
	}
}

func TestReadinessChangeUpdatesSliceInPlace(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	p1 := newPod("web", 1, true)
	f.addPod(p1)
	f.addPod(newPod("web", 2, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	name := f.slices()[0].Name

	// Nothing changed: no writes.
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("unchanged sync wrote: %v", f.client.Actions())
	}

	p1 = p1.DeepCopy()
	p1.Status.Conditions[0].Status = v1.ConditionFalse
	p1.ResourceVersion = "2"
	f.addPod(p1)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if f.countActions("create") != 0 || f.countActions("delete") != 0 || f.countActions("update") != 1 {
		t.Fatalf("want exactly one update, got %v", f.client.Actions())
	}
	slices := f.slices()
	if len(slices) != 1 || slices[0].Name != name {
		t.Fatalf("slices = %v", slices)
	}
	for _, ep := range slices[0].Endpoints {
		if ep.TargetRef.Name == "web-pod-1" && *ep.Conditions.Ready {
			t.Errorf("pod 1 still ready")
		}
	}
}

func TestNewEndpointsFillExistingSliceBeforeCreating(t *testing.T) {
	f := newFixture(t, 10)
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	for i := 0; i < 15; i++ {
		f.addPod(newPod("web", i, true))
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	if n := len(f.slices()); n != 2 {
		t.Fatalf("want 2 slices, got %d", n)
	}
	for i := 15; i < 18; i++ {
		f.addPod(newPod("web", i, true))
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if f.countActions("create") != 0 || f.countActions("update") != 1 {
		t.Fatalf("want one update and no create, got %v", f.client.Actions())
	}
	total := 0
	for _, s := range f.slices() {
		total += len(s.Endpoints)
	}
	if total != 18 {
		t.Errorf("total %d", total)
	}
}

func TestServiceDeletionLeavesSlicesToGarbageCollector(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	f.addService(svc)
	f.addPod(newPod("web", 1, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	if err := f.factory.Core().V1().Services().Informer().GetIndexer().Delete(svc); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("deleted Service must be left to GC, got %v", f.client.Actions())
	}
}

func TestSelectorlessAndExternalNameServicesIgnored(t *testing.T) {
	f := newFixture(t, 100)
	noSel := newService("nosel")
	noSel.Spec.Selector = nil
	f.addService(noSel)
	ext := newService("ext")
	ext.Spec.Type = v1.ServiceTypeExternalName
	f.addService(ext)
	f.addPod(newPod("ext", 1, true))
	for _, key := range []string{"ns/nosel", "ns/ext"} {
		if err := f.sync(key); err != nil {
			t.Fatal(err)
		}
		if len(f.client.Actions()) != 0 {
			t.Fatalf("%s: got actions %v", key, f.client.Actions())
		}
	}
}

func TestStaleInformerCacheNeverDuplicates(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	f.addPod(newPod("web", 1, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	// The cache has not seen the created slice yet.
	err := f.sync("ns/web")
	if !IsStaleInformerCacheErr(err) {
		t.Fatalf("want StaleInformerCache error, got %v", err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("stale sync wrote: %v", f.client.Actions())
	}
	// An older generation in the cache is stale too.
	f.syncCache()
	idx := f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer()
	old := f.slices()[0].DeepCopy()
	old.Generation = 0
	_ = idx.Update(old)
	if err := f.sync("ns/web"); !IsStaleInformerCacheErr(err) {
		t.Fatalf("want StaleInformerCache for old generation, got %v", err)
	}
	f.syncCache()
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if len(f.slices()) != 1 {
		t.Fatalf("duplicates: %v", f.slices())
	}
}

func TestDualStackSlicesPerAddressFamily(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	f.addService(svc)
	f.addPod(newPod("web", 1, true, "10.1.0.1", "fd00::1"))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	got := map[discovery.AddressType]string{}
	for _, s := range f.slices() {
		if len(s.Endpoints) != 1 {
			t.Fatalf("slice %s endpoints %v", s.Name, s.Endpoints)
		}
		got[s.AddressType] = s.Endpoints[0].Addresses[0]
	}
	if got[discovery.AddressTypeIPv4] != "10.1.0.1" || got[discovery.AddressTypeIPv6] != "fd00::1" {
		t.Errorf("got %v", got)
	}

	// Dropping IPv6 from the Service deletes its slice.
	f.syncCache()
	svc = svc.DeepCopy()
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
	f.addService(svc)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if f.countActions("delete") != 1 || len(f.slices()) != 1 {
		t.Errorf("actions %v", f.client.Actions())
	}
}

func TestPublishNotReadyAddressesAndHeadless(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	svc.Spec.PublishNotReadyAddresses = true
	svc.Spec.ClusterIP = v1.ClusterIPNone
	f.addService(svc)
	f.addPod(newPod("web", 1, false))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	s := f.slices()[0]
	if _, ok := s.Labels[v1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing: %v", s.Labels)
	}
	c := s.Endpoints[0].Conditions
	if !*c.Ready || *c.Serving {
		t.Errorf("conditions %+v", c)
	}
}

func TestEmptyServiceGetsOnePlaceholderSlice(t *testing.T) {
	f := newFixture(t, 100)
	f.addService(newService("web"))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	if s := f.slices(); len(s) != 1 || len(s[0].Endpoints) != 0 {
		t.Fatalf("slices %v", s)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("placeholder rewritten: %v", f.client.Actions())
	}
}

func TestPodWithoutNodeSkipped(t *testing.T) {
	f := newFixture(t, 100)
	f.addService(newService("web"))
	f.addPod(newPod("web", 1, true))
	if err := f.sync("ns/web"); err == nil {
		t.Fatal("want error for missing node")
	}
	if s := f.slices(); len(s) != 1 || len(s[0].Endpoints) != 0 {
		t.Fatalf("slices %v", s)
	}
}

func TestPreferCloseSetsZoneHints(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	svc.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
	f.addService(svc)
	f.addPod(newPod("web", 1, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.slices()[0].Endpoints[0]
	if ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != "zone-a" {
		t.Fatalf("hints %+v", ep.Hints)
	}
	// Removing trafficDistribution removes the hints.
	f.syncCache()
	svc = svc.DeepCopy()
	svc.Spec.TrafficDistribution = nil
	f.addService(svc)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	if ep := f.slices()[0].Endpoints[0]; ep.Hints != nil {
		t.Fatalf("hints not removed: %+v", ep.Hints)
	}
}

func TestRecreatedServiceReplacesForeignSlices(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	svc := newService("web")
	f.addService(svc)
	f.addPod(newPod("web", 1, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	f.c.tracker.DeleteService("ns", "web")
	svc = svc.DeepCopy()
	svc.UID = "svc-web-2"
	f.addService(svc)
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	s := f.slices()
	if len(s) != 1 || s[0].OwnerReferences[0].UID != "svc-web-2" {
		t.Fatalf("slices %v", s)
	}
}

// A pod's Services are found through the Service selector index.
func TestPodEventsQueueMatchingServices(t *testing.T) {
	f := newFixture(t, 100)
	if _, ok := f.factory.Core().V1().Services().Informer().GetIndexer().GetIndexers()[controller.ServiceSelectorIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the Service informer", controller.ServiceSelectorIndex)
	}
	f.addService(newService("web"))
	f.addService(newService("api"))
	old := newPod("web", 1, true)
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Status.Conditions[0].Status = v1.ConditionFalse
	f.c.onPodUpdate(old, cur)
	if f.c.podQueue.Len() != 1 {
		t.Fatalf("pod queue len %d", f.c.podQueue.Len())
	}
	key, _ := f.c.podQueue.Get()
	if err := f.c.syncPod(f.ctx, key); err != nil {
		t.Fatal(err)
	}
	f.c.podQueue.Done(key)
	if got, _ := f.c.serviceQueue.Get(); got != "ns/web" {
		t.Fatalf("queued %q", got)
	}
	// A resync (same resourceVersion) is ignored.
	f.c.onPodUpdate(cur, cur)
	if f.c.podQueue.Len() != 0 {
		t.Fatal("resync queued a key")
	}
}

// A Service's pods come from the pod labels index, which follows a pod
// whose labels no longer match, and its slices from the EndpointSlice
// Service index.
func TestServicePodsComeFromTheLabelsIndex(t *testing.T) {
	f := newFixture(t, 100)
	if _, ok := f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().GetIndexers()[controller.EndpointSliceServiceIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the EndpointSlice informer", controller.EndpointSliceServiceIndex)
	}
	pods := f.factory.Core().V1().Pods().Informer().GetIndexer()
	if _, ok := pods.GetIndexers()[controller.PodLabelsIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the pod informer", controller.PodLabelsIndex)
	}
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	f.addPod(newPod("web", 1, true))
	moved := newPod("web", 2, true)
	f.addPod(moved)
	f.addPod(newPod("api", 3, true))
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	f.syncCache()
	if got := len(f.slices()[0].Endpoints); got != 2 {
		t.Fatalf("%d endpoints, want 2", got)
	}

	moved = moved.DeepCopy()
	moved.Labels = map[string]string{"app": "api"}
	moved.ResourceVersion = "2"
	if err := pods.Update(moved); err != nil {
		t.Fatal(err)
	}
	if err := f.sync("ns/web"); err != nil {
		t.Fatal(err)
	}
	eps := f.slices()[0].Endpoints
	if len(eps) != 1 || eps[0].TargetRef.Name != "web-pod-1" {
		t.Fatalf("endpoints %+v, want only web-pod-1", eps)
	}
}
