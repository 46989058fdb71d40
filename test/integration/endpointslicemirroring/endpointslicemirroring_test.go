// Package endpointslicemirroring tests the EndpointSlice mirroring
// controller against a real API server: custom Endpoints of selector-less
// Services are mirrored into EndpointSlices that follow their updates and
// deletion, and everything else is left alone.
package endpointslicemirroring

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslicemirroring"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// The core/v1 Endpoints API is deprecated, but it is what gets mirrored.
type (
	endpoints       = v1.Endpoints       //nolint:staticcheck // the mirrored API
	endpointSubset  = v1.EndpointSubset  //nolint:staticcheck // the mirrored API
	endpointAddress = v1.EndpointAddress //nolint:staticcheck // the mirrored API
	endpointPort    = v1.EndpointPort    //nolint:staticcheck // the mirrored API
)

const waitTimeout = 30 * time.Second

func TestMain(m *testing.M) {
	// Every Endpoints request draws a deprecation warning; they drown the
	// test output.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	framework.Main(m)
}

// startController runs the mirroring controller, watching only namespace
// ns so that tests do not see each other's objects, until the test ends.
// It returns once the informer caches are filled.
func startController(t *testing.T, c clientset.Interface, ns string, maxEndpointsPerSubset int32, workers int) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	ctrl := endpointslicemirroring.NewController(ctx, factory.Core().V1().Endpoints(),
		factory.Discovery().V1().EndpointSlices(), factory.Core().V1().Services(), maxEndpointsPerSubset, c, 0)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		ctrl.Run(ctx, workers)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache for %v did not sync", typ)
		}
	}
}

func createService(t *testing.T, c clientset.Interface, ns, name string, selector map[string]string) *v1.Service {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.ServiceSpec{
			Selector: selector,
			Ports:    []v1.ServicePort{{Name: "example", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	svc, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func createEndpoints(t *testing.T, c clientset.Interface, ep *endpoints) *endpoints {
	t.Helper()
	ep, err := c.CoreV1().Endpoints(ep.Namespace).Create(context.Background(), ep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// updateEndpoints applies change to the current Endpoints object.
func updateEndpoints(t *testing.T, c clientset.Interface, ns, name string, change func(*endpoints)) *endpoints {
	t.Helper()
	ctx := context.Background()
	ep, err := c.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(ep)
	ep, err = c.CoreV1().Endpoints(ns).Update(ctx, ep, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func newEndpoints(ns, name string, subsets ...endpointSubset) *endpoints {
	return &endpoints{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subsets: subsets}
}

func tcpPort(name string, port int32) []endpointPort {
	return []endpointPort{{Name: name, Port: port, Protocol: v1.ProtocolTCP}}
}

func addrs(ips ...string) []endpointAddress {
	out := make([]endpointAddress, 0, len(ips))
	for _, ip := range ips {
		out = append(out, endpointAddress{IP: ip})
	}
	return out
}

// mirroredSlices lists the slices the mirroring controller manages for
// the Endpoints object name.
func mirroredSlices(ctx context.Context, c clientset.Interface, ns, name string) ([]discovery.EndpointSlice, error) {
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discovery.LabelServiceName + "=" + name + "," + discovery.LabelManagedBy + "=" + endpointslicemirroring.ControllerName,
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return describe(list.Items[i]) < describe(list.Items[j]) })
	return list.Items, nil
}

// describe renders a slice as "<type>[ports][ip/ready ...]", ports and
// endpoints sorted.
func describe(s discovery.EndpointSlice) string {
	var ports, eps []string
	for _, p := range s.Ports {
		ports = append(ports, fmt.Sprintf("%s:%d", *p.Name, *p.Port))
	}
	for _, e := range s.Endpoints {
		eps = append(eps, fmt.Sprintf("%s/%t", strings.Join(e.Addresses, ","), e.Conditions.Ready != nil && *e.Conditions.Ready))
	}
	sort.Strings(ports)
	sort.Strings(eps)
	return fmt.Sprintf("%s%v%v", s.AddressType, ports, eps)
}

// waitForMirror waits until the slices mirrored for name are exactly want
// (as rendered by describe, in sorted order) and returns them.
func waitForMirror(t *testing.T, c clientset.Interface, ns, name string, want ...string) []discovery.EndpointSlice {
	t.Helper()
	var slices []discovery.EndpointSlice
	last := "none"
	framework.Eventually(t, waitTimeout, fmt.Sprintf("slices of %s/%s to be %v", ns, name, want), func(ctx context.Context) (bool, error) {
		var err error
		slices, err = mirroredSlices(ctx, c, ns, name)
		if err != nil {
			return false, err
		}
		got := []string{}
		for _, s := range slices {
			got = append(got, describe(s))
		}
		if seen := fmt.Sprint(got); seen != last {
			// Log each distinct state so a timeout shows where it got stuck.
			t.Logf("slices of %s/%s: %s", ns, name, seen)
			last = seen
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	return slices
}

// expectNotMirrored asserts that nothing is mirrored for name. Callers
// make sure the controller has already processed name, by creating the
// objects before the controller starts (it then queues them before
// anything created later) and waiting for a later canary to be mirrored
// with a single worker.
func expectNotMirrored(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	slices, err := mirroredSlices(context.Background(), c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 0 {
		t.Errorf("%s/%s was mirrored: %v", ns, name, slices)
	}
}

func mirrorCanary(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	createService(t, c, ns, "canary", nil)
	createEndpoints(t, c, newEndpoints(ns, "canary", endpointSubset{Ports: tcpPort("example", 80), Addresses: addrs("10.9.9.9")}))
	waitForMirror(t, c, ns, "canary", "IPv4[example:80][10.9.9.9/true]")
}

// TestMirrorCustomEndpointsThroughCreateUpdateDelete follows the
// conformance test "should mirror a custom Endpoints resource through
// create update and delete", checking the slice's metadata as well.
func TestMirrorCustomEndpointsThroughCreateUpdateDelete(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-crud")
	startController(t, c, ns, 1000, 5)

	createService(t, c, ns, "example-custom-endpoints", nil)
	ep := newEndpoints(ns, "example-custom-endpoints", endpointSubset{Ports: []endpointPort{{Port: 80}}, Addresses: addrs("10.1.2.3")})
	ep.Labels = map[string]string{"team": "a"}
	ep.Annotations = map[string]string{"note": "x", v1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}
	ep = createEndpoints(t, c, ep)

	slices := waitForMirror(t, c, ns, ep.Name, "IPv4[:80][10.1.2.3/true]")
	s := slices[0]
	if !strings.HasPrefix(s.Name, "example-custom-endpoints-") {
		t.Errorf("slice name %q", s.Name)
	}
	if s.Labels["team"] != "a" || len(s.Labels) != 3 {
		t.Errorf("labels %v", s.Labels)
	}
	if fmt.Sprint(s.Annotations) != "map[note:x]" {
		t.Errorf("annotations %v", s.Annotations)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Endpoints" || s.OwnerReferences[0].UID != ep.UID {
		t.Errorf("ownerReferences %+v", s.OwnerReferences)
	}
	if *s.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("ports %+v", s.Ports)
	}

	updateEndpoints(t, c, ns, ep.Name, func(ep *endpoints) {
		ep.Subsets[0].Addresses = addrs("10.2.3.4")
		ep.Labels["team"] = "b"
	})
	slices = waitForMirror(t, c, ns, ep.Name, "IPv4[:80][10.2.3.4/true]")
	if slices[0].Name != s.Name {
		t.Errorf("slice replaced (%s -> %s) instead of updated", s.Name, slices[0].Name)
	}
	framework.Eventually(t, waitTimeout, "label update to be mirrored", func(ctx context.Context) (bool, error) {
		slices, err := mirroredSlices(ctx, c, ns, ep.Name)
		return err == nil && len(slices) == 1 && slices[0].Labels["team"] == "b", err
	})

	if err := c.CoreV1().Endpoints(ns).Delete(context.Background(), ep.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForMirror(t, c, ns, ep.Name)
}

// TestSlicesFollowSubsetsAndAddressTypes: one slice per subset (after
// merging subsets with the same addresses) and address type.
func TestSlicesFollowSubsetsAndAddressTypes(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-subsets")
	startController(t, c, ns, 1000, 5)

	createService(t, c, ns, "multi", nil)
	createEndpoints(t, c, newEndpoints(ns, "multi",
		endpointSubset{Ports: tcpPort("a", 80), Addresses: addrs("10.0.0.1", "fd00::1"), NotReadyAddresses: addrs("10.0.0.3")},
		endpointSubset{Ports: tcpPort("b", 90), Addresses: addrs("10.0.0.2")},
	))
	waitForMirror(t, c, ns, "multi",
		"IPv4[a:80][10.0.0.1/true 10.0.0.3/false]",
		"IPv4[b:90][10.0.0.2/true]",
		"IPv6[a:80][fd00::1/true]",
	)

	// The same address on two subsets is one endpoint with both ports.
	createService(t, c, ns, "same-ip", nil)
	createEndpoints(t, c, newEndpoints(ns, "same-ip",
		endpointSubset{Ports: tcpPort("port1", 80), Addresses: addrs("10.0.0.1")},
		endpointSubset{Ports: tcpPort("port2", 90), Addresses: addrs("10.0.0.1")},
	))
	waitForMirror(t, c, ns, "same-ip", "IPv4[port1:80 port2:90][10.0.0.1/true]")

	// Dropping the IPv6 address removes that slice, the rest stays.
	updateEndpoints(t, c, ns, "multi", func(ep *endpoints) {
		ep.Subsets = []endpointSubset{
			{Ports: tcpPort("a", 80), Addresses: addrs("10.0.0.1"), NotReadyAddresses: addrs("10.0.0.3")},
			{Ports: tcpPort("b", 90), Addresses: addrs("10.0.0.2")},
		}
	})
	waitForMirror(t, c, ns, "multi",
		"IPv4[a:80][10.0.0.1/true 10.0.0.3/false]",
		"IPv4[b:90][10.0.0.2/true]",
	)
}

// TestTruncatesAtMaxEndpointsPerSubset: only maxEndpointsPerSubset
// addresses of a subset are mirrored, and the Endpoints object gets a
// warning event.
func TestTruncatesAtMaxEndpointsPerSubset(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-truncate")
	startController(t, c, ns, 3, 5)

	createService(t, c, ns, "big", nil)
	createEndpoints(t, c, newEndpoints(ns, "big", endpointSubset{
		Ports:             tcpPort("example", 80),
		Addresses:         addrs("10.0.0.5", "10.0.0.4", "10.0.0.2"),
		NotReadyAddresses: addrs("10.0.0.1", "10.0.0.3"),
	}))
	waitForMirror(t, c, ns, "big", "IPv4[example:80][10.0.0.2/true 10.0.0.4/true 10.0.0.5/true]")

	framework.Eventually(t, waitTimeout, "a TooManyAddressesToMirror event", func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == endpointslicemirroring.TooManyAddressesToMirror && e.InvolvedObject.Kind == "Endpoints" &&
				e.InvolvedObject.Name == "big" && e.Type == v1.EventTypeWarning && strings.Contains(e.Message, "2 addresses were skipped") {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestServiceWithSelectorIsNotMirrored: the EndpointSlice controller owns
// the endpoints of a Service with a selector; mirroring starts and stops
// as the selector goes and comes.
func TestServiceWithSelectorIsNotMirrored(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-selector")
	svc := createService(t, c, ns, "selected", map[string]string{"app": "x"})
	createEndpoints(t, c, newEndpoints(ns, "selected", endpointSubset{Ports: tcpPort("example", 80), Addresses: addrs("10.0.0.1")}))
	startController(t, c, ns, 1000, 1)
	mirrorCanary(t, c, ns)
	expectNotMirrored(t, c, ns, "selected")

	svc.Spec.Selector = nil
	svc, err := c.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForMirror(t, c, ns, "selected", "IPv4[example:80][10.0.0.1/true]")

	svc.Spec.Selector = map[string]string{"app": "x"}
	if _, err := c.CoreV1().Services(ns).Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForMirror(t, c, ns, "selected")
}

// TestSkipMirrorLabel: Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror=true are not mirrored, and
// adding the label removes the mirrored slices.
func TestSkipMirrorLabel(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-skip")
	createService(t, c, ns, "skipped", nil)
	ep := newEndpoints(ns, "skipped", endpointSubset{Ports: tcpPort("example", 80), Addresses: addrs("10.0.0.1")})
	ep.Labels = map[string]string{discovery.LabelSkipMirror: "true"}
	createEndpoints(t, c, ep)
	startController(t, c, ns, 1000, 1)
	mirrorCanary(t, c, ns)
	expectNotMirrored(t, c, ns, "skipped")

	updateEndpoints(t, c, ns, "skipped", func(ep *endpoints) { delete(ep.Labels, discovery.LabelSkipMirror) })
	waitForMirror(t, c, ns, "skipped", "IPv4[example:80][10.0.0.1/true]")

	updateEndpoints(t, c, ns, "skipped", func(ep *endpoints) {
		ep.Labels = map[string]string{discovery.LabelSkipMirror: "true"}
	})
	waitForMirror(t, c, ns, "skipped")
}

// TestKubernetesServiceEndpointsNotMirrored: the API server labels its own
// default/kubernetes Endpoints skip-mirror (it writes the slice itself).
// This control plane runs without that reconciler, so the test writes the
// Endpoints object the way the API server does.
func TestKubernetesServiceEndpointsNotMirrored(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ctx := context.Background()
	const ns = metav1.NamespaceDefault
	if _, err := c.CoreV1().Services(ns).Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		t.Fatalf("default/kubernetes Service: %v", err)
	}
	ep := newEndpoints(ns, "kubernetes", endpointSubset{Ports: tcpPort("https", 6443), Addresses: addrs("10.0.0.1")})
	ep.Labels = map[string]string{discovery.LabelSkipMirror: "true"}
	if _, err := c.CoreV1().Endpoints(ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Endpoints(ns).Delete(context.Background(), "kubernetes", metav1.DeleteOptions{})
		_ = c.CoreV1().Endpoints(ns).Delete(context.Background(), "canary", metav1.DeleteOptions{})
		_ = c.CoreV1().Services(ns).Delete(context.Background(), "canary", metav1.DeleteOptions{})
	})
	startController(t, c, ns, 1000, 1)
	mirrorCanary(t, c, ns)
	expectNotMirrored(t, c, ns, "kubernetes")
}

// TestServiceLifecycle: Endpoints without a Service are not mirrored until
// the Service exists, and the slices go when the Service goes.
func TestServiceLifecycle(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-service")
	startController(t, c, ns, 1000, 5)

	createEndpoints(t, c, newEndpoints(ns, "late", endpointSubset{Ports: tcpPort("example", 80), Addresses: addrs("10.0.0.1")}))
	createService(t, c, ns, "late", nil)
	waitForMirror(t, c, ns, "late", "IPv4[example:80][10.0.0.1/true]")

	if err := c.CoreV1().Services(ns).Delete(context.Background(), "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForMirror(t, c, ns, "late")
}

// TestMirroredSlicesAreRestored: a mirrored slice deleted or edited by
// someone else is put back.
func TestMirroredSlicesAreRestored(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "esm-restore")
	startController(t, c, ns, 1000, 5)
	ctx := context.Background()

	createService(t, c, ns, "web", nil)
	createEndpoints(t, c, newEndpoints(ns, "web", endpointSubset{Ports: tcpPort("example", 80), Addresses: addrs("10.0.0.1")}))
	slices := waitForMirror(t, c, ns, "web", "IPv4[example:80][10.0.0.1/true]")

	edited := slices[0].DeepCopy()
	edited.Endpoints[0].Addresses = []string{"10.6.6.6"}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForMirror(t, c, ns, "web", "IPv4[example:80][10.0.0.1/true]")

	if err := c.DiscoveryV1().EndpointSlices(ns).Delete(ctx, slices[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "a replacement slice", func(ctx context.Context) (bool, error) {
		got, err := mirroredSlices(ctx, c, ns, "web")
		return err == nil && len(got) == 1 && got[0].Name != slices[0].Name && describe(got[0]) == "IPv4[example:80][10.0.0.1/true]", err
	})
}
