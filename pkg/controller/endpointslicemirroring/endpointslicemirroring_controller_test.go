package endpointslicemirroring

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const ns = "ns"

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	c        *Controller
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, maxPerSubset int32) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	var n atomic.Int64
	// The fake API server neither generates names nor sets UIDs and
	// generations; the tracker relies on both.
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
		old, err := client.Tracker().Get(action.GetResource(), s.Namespace, s.Name)
		if err == nil {
			prev := old.(*discovery.EndpointSlice)
			s.UID = prev.UID
			s.Generation = prev.Generation + 1
		}
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(ctx, factory.Core().V1().Endpoints(), factory.Discovery().V1().EndpointSlices(),
		factory.Core().V1().Services(), maxPerSubset, client, 0)
	recorder := record.NewFakeRecorder(100)
	c.reconciler.eventRecorder = recorder
	t.Cleanup(c.queue.ShutDown)
	return &fixture{t: t, ctx: ctx, client: client, factory: factory, c: c, recorder: recorder}
}

func (f *fixture) add(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		err = f.factory.Core().V1().Services().Informer().GetIndexer().Add(o)
	case *endpoints:
		err = f.factory.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
	case *discovery.EndpointSlice:
		if _, err = f.client.DiscoveryV1().EndpointSlices(o.Namespace).Create(f.ctx, o, metav1.CreateOptions{}); err == nil {
			f.syncCache()
		}
	default:
		err = fmt.Errorf("unexpected %T", obj)
	}
	if err != nil {
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

func (f *fixture) sync(name string) error {
	f.client.ClearActions()
	return f.c.syncEndpoints(f.ctx, ns+"/"+name)
}

func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatal(err)
	}
}

// slices returns the slices in the fake API, sorted by name.
func (f *fixture) slices() []discovery.EndpointSlice {
	f.t.Helper()
	list, err := f.client.DiscoveryV1().EndpointSlices("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// writes lists the slice writes of the last sync as "verb name".
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetResource().Resource != "endpointslices" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		name := ""
		switch a.GetVerb() {
		case "create":
			name = a.(k8stesting.CreateAction).GetObject().(*discovery.EndpointSlice).GenerateName + "*"
		case "update":
			name = a.(k8stesting.UpdateAction).GetObject().(*discovery.EndpointSlice).Name
		case "delete":
			name = a.(k8stesting.DeleteAction).GetName()
		}
		out = append(out, a.GetVerb()+" "+name)
	}
	return out
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func newService(name string, selector map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("svc-" + name)},
		Spec: v1.ServiceSpec{
			Selector: selector,
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
}

func newEndpoints(name string, subsets ...endpointSubset) *endpoints {
	return &endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("ep-" + name)},
		Subsets:    subsets,
	}
}

func httpPort(port int32) []endpointPort {
	return []endpointPort{{Name: "http", Port: port, Protocol: v1.ProtocolTCP}}
}

func addrs(ips ...string) []endpointAddress {
	out := make([]endpointAddress, 0, len(ips))
	for _, ip := range ips {
		out = append(out, endpointAddress{IP: ip})
	}
	return out
}

func sliceIPs(s discovery.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		out = append(out, e.Addresses...)
	}
	sort.Strings(out)
	return out
}

// mirroredSlice returns a slice as this controller would have written it
// for the Endpoints object name with one http port and the given IPs.
func mirroredSlice(sliceName, epName string, port int32, ips ...string) *discovery.EndpointSlice {
	ep := newEndpoints(epName)
	s := newEndpointSlice(ep, toSlicePorts(httpPort(port)), discovery.AddressTypeIPv4, sliceName)
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func TestSyncMirrorsSelectorlessService(t *testing.T) {
	f := newFixture(t, 1000)
	f.add(newService("web", nil))
	ep := newEndpoints("web", endpointSubset{
		Ports: httpPort(8080),
		Addresses: []endpointAddress{{
			IP: "10.0.0.1", Hostname: "h1", NodeName: ptr.To("node-1"),
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p1", UID: "p1-uid"},
		}},
		NotReadyAddresses: addrs("10.0.0.2"),
	})
	ep.Labels = map[string]string{"team": "a", discovery.LabelManagedBy: "someone-else"}
	ep.Annotations = map[string]string{
		"note":                            "kept",
		v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z",
		v1.LastAppliedConfigAnnotation:    "{}",
	}
	f.add(ep)

	f.mustSync("web")
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
		discovery.LabelManagedBy:   ControllerName,
	}
	if fmt.Sprint(s.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels = %v, want %v", s.Labels, wantLabels)
	}
	if fmt.Sprint(s.Annotations) != fmt.Sprint(map[string]string{"note": "kept"}) {
		t.Errorf("annotations = %v", s.Annotations)
	}
	if len(s.OwnerReferences) != 1 {
		t.Fatalf("ownerRefs = %v", s.OwnerReferences)
	}
	o := s.OwnerReferences[0]
	if o.APIVersion != "v1" || o.Kind != "Endpoints" || o.Name != "web" || o.UID != ep.UID ||
		!ptr.Deref(o.Controller, false) || !ptr.Deref(o.BlockOwnerDeletion, false) {
		t.Errorf("ownerRef = %+v", o)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Name != "http" || *s.Ports[0].Port != 8080 || *s.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("ports = %+v", s.Ports)
	}
	if len(s.Endpoints) != 2 {
		t.Fatalf("endpoints = %+v", s.Endpoints)
	}
	ready, notReady := s.Endpoints[0], s.Endpoints[1]
	if ready.Addresses[0] != "10.0.0.1" || !*ready.Conditions.Ready || ptr.Deref(ready.Hostname, "") != "h1" ||
		ptr.Deref(ready.NodeName, "") != "node-1" || ready.TargetRef == nil || ready.TargetRef.Name != "p1" {
		t.Errorf("ready endpoint = %+v", ready)
	}
	if ready.Conditions.Serving != nil || ready.Conditions.Terminating != nil {
		t.Errorf("only ready is mirrored: %+v", ready.Conditions)
	}
	if notReady.Addresses[0] != "10.0.0.2" || *notReady.Conditions.Ready || notReady.Hostname != nil || notReady.NodeName != nil {
		t.Errorf("not ready endpoint = %+v", notReady)
	}
	if !f.c.tracker.Has(&s) {
		t.Error("created slice not tracked")
	}
}

// The mirrored slices to remove are found through the EndpointSlice
// Service index; slices of other managers stay.
func TestSyncCleansUpWhenNotMirrored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		service *v1.Service
		tweak   func(*endpoints)
		noEP    bool
	}{
		{name: "skip-mirror label", service: newService("web", nil),
			tweak: func(ep *endpoints) { ep.Labels = map[string]string{discovery.LabelSkipMirror: "true"} }},
		{name: "leader election lock", service: newService("web", nil),
			tweak: func(ep *endpoints) {
				ep.Annotations = map[string]string{resourcelock.LeaderElectionRecordAnnotationKey: "{}"}
			}},
		{name: "no Service"},
		{name: "Service with selector", service: newService("web", map[string]string{"app": "web"})},
		{name: "no Endpoints", service: newService("web", nil), noEP: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 1000)
			if _, ok := f.factory.Discovery().V1().EndpointSlices().Informer().GetIndexer().GetIndexers()[controller.EndpointSliceServiceIndex]; !ok {
				t.Fatalf("the controller did not add the %s index to the EndpointSlice informer", controller.EndpointSliceServiceIndex)
			}
			if tc.service != nil {
				f.add(tc.service)
			}
			if !tc.noEP {
				ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")})
				if tc.tweak != nil {
					tc.tweak(ep)
				}
				f.add(ep)
			}
			f.add(mirroredSlice("web-old", "web", 80, "10.0.0.1"))
			other := mirroredSlice("web-other", "web", 80, "10.0.0.1")
			other.Labels[discovery.LabelManagedBy] = "someone-else"
			f.add(other)

			f.mustSync("web")
			slices := f.slices()
			if len(slices) != 1 || slices[0].Name != "web-other" {
				t.Errorf("want only the foreign slice left, got %v", slices)
			}
		})
	}
}

func TestSkipMirrorOtherValueIsMirrored(t *testing.T) {
	f := newFixture(t, 1000)
	f.add(newService("web", nil))
	ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")})
	ep.Labels = map[string]string{discovery.LabelSkipMirror: "false"}
	f.add(ep)
	f.mustSync("web")
	if n := len(f.slices()); n != 1 {
		t.Errorf("want 1 slice, got %d", n)
	}
}

func TestSyncWithStaleCacheWaits(t *testing.T) {
	f := newFixture(t, 1000)
	f.add(newService("web", nil))
	f.add(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	f.mustSync("web")

	// The cache has not seen our slice yet: syncing now would create a
	// second one.
	err := f.sync("web")
	if !endpointslice.IsStaleInformerCacheErr(err) {
		t.Fatalf("want stale cache error, got %v", err)
	}
	if w := f.writes(); len(w) != 0 {
		t.Errorf("stale sync wrote %v", w)
	}
	f.syncCache()
	f.mustSync("web")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("up-to-date sync wrote %v", w)
	}
	if n := len(f.slices()); n != 1 {
		t.Errorf("want 1 slice, got %d", n)
	}
}

func TestSelectorAddedRemovesSlices(t *testing.T) {
	f := newFixture(t, 1000)
	f.add(newService("web", nil))
	f.add(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	f.mustSync("web")
	f.syncCache()

	f.add(newService("web", map[string]string{"app": "web"}))
	f.mustSync("web")
	if n := len(f.slices()); n != 0 {
		t.Fatalf("want slices removed, got %d", n)
	}
	// Nothing is tracked anymore, so a resync after the cache caught up
	// is not considered stale.
	f.syncCache()
	f.add(newService("web", nil))
	f.mustSync("web")
	if n := len(f.slices()); n != 1 {
		t.Errorf("want the slice back, got %d", n)
	}
}

func TestServiceEventsQueueOnlySelectorless(t *testing.T) {
	f := newFixture(t, 1000)
	plain := newService("plain", nil)
	sel := newService("sel", map[string]string{"app": "x"})

	f.c.onServiceAdd(sel)
	f.c.onServiceUpdate(sel, sel)
	f.c.onServiceUpdate(plain, plain)
	f.c.onServiceDelete(sel)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queued %d keys for irrelevant Service events", n)
	}

	f.c.onServiceAdd(plain)
	expectQueued(t, f.c, "ns/plain")
	f.c.onServiceUpdate(plain, newService("plain", map[string]string{"app": "x"}))
	expectQueued(t, f.c, "ns/plain")
	f.c.onServiceDelete(cache.DeletedFinalStateUnknown{Key: "ns/plain", Obj: plain})
	expectQueued(t, f.c, "ns/plain")
}

func TestEndpointsEventsSkipUnmirrored(t *testing.T) {
	f := newFixture(t, 1000)
	logger, _ := ktesting.NewTestContext(t)
	plain := newEndpoints("plain")
	skipped := newEndpoints("plain")
	skipped.Labels = map[string]string{discovery.LabelSkipMirror: "true"}

	f.c.onEndpointsAdd(logger, skipped)
	f.c.onEndpointsUpdate(logger, skipped, skipped)
	f.c.onEndpointsDelete(logger, skipped)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queued %d keys for skipped Endpoints", n)
	}
	f.c.onEndpointsAdd(logger, plain)
	expectQueued(t, f.c, "ns/plain")
	// Opting out must remove the slices, so the transition is queued.
	f.c.onEndpointsUpdate(logger, plain, skipped)
	expectQueued(t, f.c, "ns/plain")
	f.c.onEndpointsDelete(logger, cache.DeletedFinalStateUnknown{Key: "ns/plain", Obj: plain})
	expectQueued(t, f.c, "ns/plain")
}

func TestEndpointSliceEvents(t *testing.T) {
	f := newFixture(t, 1000)
	logger, _ := ktesting.NewTestContext(t)
	ours := mirroredSlice("web-1", "web", 80, "10.0.0.1")
	ours.UID, ours.Generation = "uid-1", 1
	foreign := ours.DeepCopy()
	foreign.Labels[discovery.LabelManagedBy] = "endpointslice-controller.k8s.io"

	// Unknown slices of ours are news; foreign ones are not.
	f.c.onEndpointSliceAdd(foreign)
	if f.c.queue.Len() != 0 {
		t.Fatal("foreign slice add queued")
	}
	f.c.onEndpointSliceAdd(ours)
	expectQueued(t, f.c, "ns/web")

	// The echo of our own write is not.
	f.c.tracker.Update(ours)
	f.c.onEndpointSliceAdd(ours)
	f.c.onEndpointSliceUpdate(logger, ours, ours)
	if f.c.queue.Len() != 0 {
		t.Fatal("own write queued")
	}
	// Someone else's change is.
	changed := ours.DeepCopy()
	changed.Generation = 2
	f.c.onEndpointSliceUpdate(logger, ours, changed)
	expectQueued(t, f.c, "ns/web")
	// Taking a slice away from us is.
	f.c.onEndpointSliceUpdate(logger, ours, foreign)
	expectQueued(t, f.c, "ns/web")
	// Moving it to another Service queues both.
	moved := ours.DeepCopy()
	moved.Labels[discovery.LabelServiceName] = "other"
	f.c.onEndpointSliceUpdate(logger, ours, moved)
	got := []string{}
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
		got = append(got, k)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != "[ns/other ns/web]" {
		t.Errorf("queued %v", got)
	}

	// Our own delete is expected; someone else's is not.
	f.c.tracker.ExpectDeletion(ours)
	f.c.onEndpointSliceDelete(ours)
	if f.c.queue.Len() != 0 {
		t.Fatal("own delete queued")
	}
	f.c.tracker.Update(ours)
	f.c.onEndpointSliceDelete(cache.DeletedFinalStateUnknown{Key: "ns/web-1", Obj: ours})
	expectQueued(t, f.c, "ns/web")
}

func TestSliceEventsAreBatched(t *testing.T) {
	f := newFixture(t, 1000)
	f.c.endpointUpdatesBatchPeriod = time.Hour
	s := mirroredSlice("web-1", "web", 80, "10.0.0.1")
	f.c.onEndpointSliceAdd(s)
	if f.c.queue.Len() != 0 {
		t.Error("slice event queued without the batch delay")
	}
	// Endpoints events are not delayed.
	logger, _ := ktesting.NewTestContext(t)
	f.c.onEndpointsAdd(logger, newEndpoints("web"))
	expectQueued(t, f.c, "ns/web")
}

func expectQueued(t *testing.T, c *Controller, key string) {
	t.Helper()
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("want 1 queued key, got %d", n)
	}
	k, _ := c.queue.Get()
	c.queue.Done(k)
	c.queue.Forget(k)
	if k != key {
		t.Errorf("queued %q, want %q", k, key)
	}
}

// TestRun drives the controller through its informers: a custom Endpoints
// object is mirrored, follows updates, and its slice goes with it.
func TestRun(t *testing.T) {
	f := newFixture(t, 1000)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	f.factory.Start(ctx.Done())
	go func() {
		f.c.Run(ctx, 2)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		f.factory.Shutdown()
	})

	if _, err := f.client.CoreV1().Services(ns).Create(ctx, newService("web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ep := newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.1.2.3")})
	if _, err := f.client.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForIPs(t, f, "10.1.2.3")

	ep.Subsets[0].Addresses = addrs("10.2.3.4")
	if _, err := f.client.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForIPs(t, f, "10.2.3.4")

	if err := f.client.CoreV1().Endpoints(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForIPs(t, f)
}

// waitForIPs waits until the mirrored slices hold exactly ips (no slice
// at all when ips is empty).
func waitForIPs(t *testing.T, f *fixture, ips ...string) {
	t.Helper()
	want := strings.Join(ips, ",")
	err := wait.PollUntilContextTimeout(f.ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := f.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if len(ips) == 0 {
			return len(list.Items) == 0, nil
		}
		return len(list.Items) == 1 && strings.Join(sliceIPs(list.Items[0]), ",") == want, nil
	})
	if err != nil {
		t.Fatalf("waiting for mirrored IPs %v: %v (have %v)", ips, err, f.slices())
	}
}
