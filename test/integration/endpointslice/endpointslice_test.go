// Package endpointslice tests the EndpointSlice and Endpoints controllers
// against a real API server: Services selecting pods get slices and an
// Endpoints object, and pod readiness changes flow into both.
package endpointslice

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpoint"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

const waitTimeout = 30 * time.Second

func TestMain(m *testing.M) { framework.Main(m) }

// startControllers runs both controllers in-process until the test ends.
func startControllers(t *testing.T, c clientset.Interface) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(c, 0)
	esc := endpointslice.NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().Services(),
		factory.Core().V1().Nodes(), factory.Discovery().V1().EndpointSlices(), 100, c, 0)
	epc := endpoint.NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().Services(),
		factory.Core().V1().Endpoints(), c, 0)
	factory.Start(ctx.Done())
	done := make(chan struct{}, 2)
	go func() { esc.Run(ctx, 2); done <- struct{}{} }()
	go func() { epc.Run(ctx, 2); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		factory.Shutdown()
	})
}

func ensureNode(t *testing.T, c clientset.Interface, name, zone string) {
	t.Helper()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}}}
	_, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createReadyPod creates a pod on node, marks it running and ready, and
// gives it its own IP.
func createReadyPod(t *testing.T, c clientset.Interface, ns, name, node, ip string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			NodeName: node,
			Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				Ports: []v1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			}},
		},
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err = framework.Kubelet{Client: c}.MarkRunningReady(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []v1.PodIP{{IP: ip}}
	pod, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func createService(t *testing.T, c clientset.Interface, ns string) *v1.Service {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"team": "a"}},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
	svc, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func serviceSlices(ctx context.Context, c clientset.Interface, ns string) ([]discovery.EndpointSlice, error) {
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discovery.LabelServiceName + "=web," + discovery.LabelManagedBy + "=endpointslice-controller.k8s.io",
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func readyCount(s discovery.EndpointSlice) int {
	n := 0
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
			n++
		}
	}
	return n
}

func TestServiceWithReadyPodsGetsSliceAndEndpoints(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-basic")
	ensureNode(t, c, "eps-node-1", "zone-a")
	startControllers(t, c)

	svc := createService(t, c, ns)
	pods := make([]*v1.Pod, 3)
	for i := range pods {
		pods[i] = createReadyPod(t, c, ns, fmt.Sprintf("web-%d", i), "eps-node-1", fmt.Sprintf("10.244.1.%d", i+1))
	}

	var slice discovery.EndpointSlice
	framework.Eventually(t, waitTimeout, "one EndpointSlice with 3 ready endpoints", func(ctx context.Context) (bool, error) {
		slices, err := serviceSlices(ctx, c, ns)
		if err != nil || len(slices) != 1 {
			return false, err
		}
		slice = slices[0]
		return len(slice.Endpoints) == 3 && readyCount(slice) == 3, nil
	})
	if slice.AddressType != discovery.AddressTypeIPv4 || slice.Labels["team"] != "a" {
		t.Errorf("slice %+v", slice.ObjectMeta)
	}
	if len(slice.OwnerReferences) != 1 || slice.OwnerReferences[0].UID != svc.UID {
		t.Errorf("ownerReferences %+v", slice.OwnerReferences)
	}
	if len(slice.Ports) != 1 || *slice.Ports[0].Port != 8080 {
		t.Errorf("ports %+v", slice.Ports)
	}
	for _, ep := range slice.Endpoints {
		if ep.Zone == nil || *ep.Zone != "zone-a" || ep.NodeName == nil || *ep.NodeName != "eps-node-1" {
			t.Errorf("endpoint %+v", ep)
		}
	}

	framework.Eventually(t, waitTimeout, "Endpoints with 3 ready addresses", func(ctx context.Context) (bool, error) {
		ep, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 3 && ep.Subsets[0].Ports[0].Port == 8080 &&
			ep.Labels[endpoint.LabelManagedBy] == endpoint.ControllerName, nil
	})

	// A pod turning not ready flips its condition in the same slice.
	p := pods[1]
	p, err := c.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodReady {
			p.Status.Conditions[i].Status = v1.ConditionFalse
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "the pod's endpoint to be not ready", func(ctx context.Context) (bool, error) {
		slices, err := serviceSlices(ctx, c, ns)
		if err != nil || len(slices) != 1 {
			return false, err
		}
		if slices[0].Name != slice.Name {
			return false, fmt.Errorf("slice replaced: %s -> %s", slice.Name, slices[0].Name)
		}
		for _, ep := range slices[0].Endpoints {
			if ep.TargetRef.Name == p.Name {
				return !*ep.Conditions.Ready && !*ep.Conditions.Serving && !*ep.Conditions.Terminating, nil
			}
		}
		return false, nil
	})
	framework.Eventually(t, waitTimeout, "the pod in notReadyAddresses", func(ctx context.Context) (bool, error) {
		ep, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 2 && len(ep.Subsets[0].NotReadyAddresses) == 1 &&
			ep.Subsets[0].NotReadyAddresses[0].TargetRef.Name == p.Name, nil
	})

	// Deleting the Service deletes its Endpoints (slices go with the GC).
	if err := c.CoreV1().Services(ns).Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "Endpoints deleted with the Service", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Endpoints(ns).Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestSelectorlessServiceLeftAlone(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-nosel")
	startControllers(t, c)

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nosel", Namespace: ns},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Port: 80}}},
	}
	if _, err := c.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Service with a selector created after it acts as a barrier: once
	// its slice exists the selectorless one has been synced too.
	createService(t, c, ns)
	framework.Eventually(t, waitTimeout, "a slice for the selector Service", func(ctx context.Context) (bool, error) {
		slices, err := serviceSlices(ctx, c, ns)
		return len(slices) == 1, err
	})
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("want only the selector Service's slice, got %d", len(list.Items))
	}
	if _, err := c.CoreV1().Endpoints(ns).Get(context.Background(), "nosel", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Endpoints created for a selectorless Service: %v", err)
	}
}

func TestDeletedSliceIsRecreated(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-recreate")
	ensureNode(t, c, "eps-node-1", "zone-a")
	startControllers(t, c)

	createService(t, c, ns)
	createReadyPod(t, c, ns, "web-0", "eps-node-1", "10.244.2.1")
	var name string
	framework.Eventually(t, waitTimeout, "a slice with the ready pod", func(ctx context.Context) (bool, error) {
		slices, err := serviceSlices(ctx, c, ns)
		if err != nil || len(slices) != 1 {
			return false, err
		}
		name = slices[0].Name
		return readyCount(slices[0]) == 1, nil
	})
	if err := c.DiscoveryV1().EndpointSlices(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "a new slice replacing the deleted one", func(ctx context.Context) (bool, error) {
		slices, err := serviceSlices(ctx, c, ns)
		if err != nil || len(slices) != 1 {
			return false, err
		}
		return slices[0].Name != name && readyCount(slices[0]) == 1, nil
	})
}
