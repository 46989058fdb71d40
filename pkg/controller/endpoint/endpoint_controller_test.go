package endpoint

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

type fixture struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	c       *Controller
}

func newFixture(t *testing.T) *fixture {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().Services(), factory.Core().V1().Endpoints(), client, 0)
	t.Cleanup(func() {
		c.queue.ShutDown()
		c.podQueue.ShutDown()
	})
	return &fixture{t: t, ctx: ctx, client: client, factory: factory, c: c}
}

func (f *fixture) add(obj interface{}) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		err = f.factory.Core().V1().Services().Informer().GetIndexer().Add(o)
	case *v1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(o)
	case *endpoints:
		err = f.factory.Core().V1().Endpoints().Informer().GetIndexer().Add(o)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) endpoints(name string) *endpoints {
	f.t.Helper()
	ep, err := f.client.CoreV1().Endpoints("ns").Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ep
}

func newService(name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", Labels: map[string]string{"team": "a"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1.ServiceSpec{
			Selector:   map[string]string{"app": name},
			ClusterIP:  "10.0.0.10",
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func newPod(svc string, i int, ready bool) *v1.Pod {
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-pod-%d", svc, i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{"app": svc},
		},
		Spec: v1.PodSpec{NodeName: "node-1"},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))}},
		},
	}
}

func TestReadyAndNotReadyAddresses(t *testing.T) {
	f := newFixture(t)
	f.add(newService("web"))
	f.add(newPod("web", 1, true))
	f.add(newPod("web", 2, false))
	f.add(newPod("web", 3, true))
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoints("web")
	if len(ep.Subsets) != 1 {
		t.Fatalf("subsets %+v", ep.Subsets)
	}
	s := ep.Subsets[0]
	if len(s.Addresses) != 2 || len(s.NotReadyAddresses) != 1 || s.NotReadyAddresses[0].IP != "10.1.0.3" {
		t.Fatalf("subset %+v", s)
	}
	if s.Addresses[0].IP != "10.1.0.2" || s.Addresses[0].TargetRef.Name != "web-pod-1" || *s.Addresses[0].NodeName != "node-1" {
		t.Errorf("address %+v", s.Addresses[0])
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != 8080 || s.Ports[0].Name != "http" {
		t.Errorf("ports %+v", s.Ports)
	}
	if ep.Labels["team"] != "a" || ep.Labels[LabelManagedBy] != ControllerName {
		t.Errorf("labels %v", ep.Labels)
	}
	if _, ok := ep.Labels[v1.IsHeadlessService]; ok {
		t.Errorf("headless label on a ClusterIP service")
	}
	if _, ok := ep.Annotations[v1.EndpointsLastChangeTriggerTime]; !ok {
		t.Errorf("no trigger time annotation: %v", ep.Annotations)
	}

	// Second sync with the object in the cache: no write. (The fake API
	// sets no resourceVersion.)
	ep.ResourceVersion = "1"
	f.add(ep)
	f.client.ClearActions()
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("unexpected action %v", a)
		}
	}
}

func TestPublishNotReadyAndHeadless(t *testing.T) {
	f := newFixture(t)
	svc := newService("web")
	svc.Spec.ClusterIP = v1.ClusterIPNone
	svc.Spec.Ports = nil
	svc.Spec.PublishNotReadyAddresses = true
	f.add(svc)
	f.add(newPod("web", 1, false))
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoints("web")
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || len(ep.Subsets[0].Ports) != 0 {
		t.Fatalf("subsets %+v", ep.Subsets)
	}
	if _, ok := ep.Labels[v1.IsHeadlessService]; !ok {
		t.Errorf("headless label missing: %v", ep.Labels)
	}
}

func TestTruncationAnnotation(t *testing.T) {
	f := newFixture(t)
	f.add(newService("web"))
	for i := 0; i < 1002; i++ {
		f.add(newPod("web", i, i%2 == 0))
	}
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoints("web")
	ready, notReady := 0, 0
	for _, s := range ep.Subsets {
		ready += len(s.Addresses)
		notReady += len(s.NotReadyAddresses)
	}
	// Not-ready addresses are cut first.
	if ready != 501 || notReady != 499 {
		t.Errorf("ready=%d notReady=%d", ready, notReady)
	}
	if ep.Annotations[v1.EndpointsOverCapacity] != "truncated" {
		t.Errorf("annotations %v", ep.Annotations)
	}
}

func TestTruncateReadyOverCapacity(t *testing.T) {
	ep := &endpoints{Subsets: []endpointSubset{{}, {}}}
	for i := 0; i < 800; i++ {
		ep.Subsets[0].Addresses = append(ep.Subsets[0].Addresses, endpointAddress{IP: fmt.Sprint(i)})
		ep.Subsets[1].Addresses = append(ep.Subsets[1].Addresses, endpointAddress{IP: fmt.Sprint(i)})
		ep.Subsets[1].NotReadyAddresses = append(ep.Subsets[1].NotReadyAddresses, endpointAddress{IP: fmt.Sprint(i)})
	}
	if !truncateEndpoints(ep) {
		t.Fatal("not truncated")
	}
	if n := len(ep.Subsets[0].Addresses) + len(ep.Subsets[1].Addresses); n != 1000 {
		t.Errorf("ready %d", n)
	}
	if len(ep.Subsets[1].NotReadyAddresses) != 0 {
		t.Errorf("not-ready kept")
	}
}

func TestServiceDeletionDeletesEndpoints(t *testing.T) {
	f := newFixture(t)
	f.add(newService("web"))
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	f.endpoints("web")
	_ = f.factory.Core().V1().Services().Informer().GetIndexer().Delete(newService("web"))
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.CoreV1().Endpoints("ns").Get(f.ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("endpoints not deleted: %v", err)
	}
}

func TestSelectorlessServiceIgnored(t *testing.T) {
	f := newFixture(t)
	svc := newService("web")
	svc.Spec.Selector = nil
	f.add(svc)
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions %v", f.client.Actions())
	}
}

func TestStaleEndpointsCacheRejected(t *testing.T) {
	f := newFixture(t)
	f.add(newService("web"))
	existing := &endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "5"}}
	if _, err := f.client.CoreV1().Endpoints("ns").Create(f.ctx, existing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.add(existing)
	f.c.staleEndpoints.Stale(existing)
	if err := f.c.syncService(f.ctx, "ns/web"); err == nil {
		t.Fatal("want stale cache error")
	}
}

func TestRepackSubsetsMergesPortsAndReadiness(t *testing.T) {
	a := endpointAddress{IP: "10.0.0.1"}
	b := endpointAddress{IP: "10.0.0.2"}
	p1 := endpointPort{Name: "a", Port: 1}
	p2 := endpointPort{Name: "b", Port: 2}
	got := RepackSubsets([]endpointSubset{
		{Addresses: []endpointAddress{a}, Ports: []endpointPort{p1}},
		{Addresses: []endpointAddress{a}, Ports: []endpointPort{p2}},
		{NotReadyAddresses: []endpointAddress{b}, Ports: []endpointPort{p1}},
		{NotReadyAddresses: []endpointAddress{b}, Ports: []endpointPort{p2}},
	})
	if len(got) != 1 || len(got[0].Ports) != 2 || len(got[0].Addresses) != 1 || len(got[0].NotReadyAddresses) != 1 {
		t.Fatalf("got %+v", got)
	}
}

// A Service's pods come from the pod labels index, which follows a pod
// whose labels no longer match.
func TestServicePodsComeFromTheLabelsIndex(t *testing.T) {
	f := newFixture(t)
	if _, ok := f.factory.Core().V1().Pods().Informer().GetIndexer().GetIndexers()[controller.PodLabelsIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the pod informer", controller.PodLabelsIndex)
	}
	f.add(newService("web"))
	f.add(newPod("web", 1, true))
	moved := newPod("web", 2, true)
	f.add(moved)
	f.add(newPod("api", 3, true))
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	ep := f.endpoints("web")
	if got := len(ep.Subsets[0].Addresses); got != 2 {
		t.Fatalf("%d ready addresses, want 2", got)
	}
	ep.ResourceVersion = "1"
	f.add(ep)

	moved = moved.DeepCopy()
	moved.Labels = map[string]string{"app": "api"}
	if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Update(moved); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncService(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	addrs := f.endpoints("web").Subsets[0].Addresses
	if len(addrs) != 1 || addrs[0].TargetRef.Name != "web-pod-1" {
		t.Fatalf("addresses %+v, want only web-pod-1", addrs)
	}
}

// A pod change queues the Services selecting the pod (before and after a
// relabel), found through the Service selector index.
func TestPodEventsQueueSelectingServices(t *testing.T) {
	f := newFixture(t)
	if _, ok := f.factory.Core().V1().Services().Informer().GetIndexer().GetIndexers()[controller.ServiceSelectorIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the Service informer", controller.ServiceSelectorIndex)
	}
	f.add(newService("web"))
	f.add(newService("api"))
	f.add(newService("db"))
	old := newPod("web", 1, true)
	old.ResourceVersion = "1"
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	cur.Labels = map[string]string{"app": "api"}
	f.c.onPodUpdate(old, cur)
	key, _ := f.c.podQueue.Get()
	if err := f.c.syncPod(f.ctx, key); err != nil {
		t.Fatal(err)
	}
	f.c.podQueue.Done(key)
	var queued []string
	for f.c.queue.Len() > 0 {
		k, _ := f.c.queue.Get()
		queued = append(queued, k)
		f.c.queue.Done(k)
	}
	slices.Sort(queued)
	if !slices.Equal(queued, []string{"ns/api", "ns/web"}) {
		t.Fatalf("queued %v, want ns/api and ns/web", queued)
	}
}
