package endpointslice

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
)

// The core/v1 Endpoints API is deprecated, but checking what the Endpoints
// controller writes is the point of these tests.
type endpointSubset = v1.EndpointSubset //nolint:staticcheck // the controller under test maintains the deprecated API

// podSpec describes a test pod: its name, node, IPs (podIPs order) and the
// container ports it exposes (name → number). A nil ports map exposes
// web:8080.
type podSpec struct {
	name  string
	node  string
	ips   []string
	ports map[string]int32
	ready bool
}

// createPod creates a pod labelled app=web bound to spec.node and writes
// the status a kubelet would: Running, Ready as given, and its IPs.
func createPod(t *testing.T, c clientset.Interface, ns string, spec podSpec) *v1.Pod {
	t.Helper()
	pod, err := tryCreatePod(context.Background(), c, ns, spec)
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// tryCreatePod is createPod for goroutines other than the test's.
func tryCreatePod(ctx context.Context, c clientset.Interface, ns string, spec podSpec) (*v1.Pod, error) {
	ports := spec.ports
	if ports == nil {
		ports = map[string]int32{"web": 8080}
	}
	names := make([]string, 0, len(ports))
	for n := range ports {
		names = append(names, n)
	}
	sort.Strings(names)
	var cports []v1.ContainerPort
	for _, n := range names {
		cports = append(cports, v1.ContainerPort{Name: n, ContainerPort: ports[n], Protocol: v1.ProtocolTCP})
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: spec.name, Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			NodeName:   spec.node,
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Ports: cports}},
		},
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	readyStatus := v1.ConditionFalse
	if spec.ready {
		readyStatus = v1.ConditionTrue
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.ContainersReady, Status: readyStatus, LastTransitionTime: now},
		{Type: v1.PodReady, Status: readyStatus, LastTransitionTime: now},
	}
	pod.Status.PodIP = spec.ips[0]
	pod.Status.PodIPs = nil
	for _, ip := range spec.ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, v1.PodIP{IP: ip})
	}
	return c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// setPodReady flips the pod's Ready (and ContainersReady) condition, as
// a kubelet does when a readiness probe starts or stops passing.
func setPodReady(t *testing.T, c clientset.Interface, ns, name string, ready bool) {
	t.Helper()
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range pod.Status.Conditions {
			cond := &pod.Status.Conditions[i]
			if cond.Type == v1.PodReady || cond.Type == v1.ContainersReady {
				cond.Status = status
				cond.LastTransitionTime = metav1.Now()
			}
		}
		_, err = c.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deletePodGracefully deletes a pod bound to a node: with no kubelet to
// finish the job it stays, terminating, with a deletionTimestamp.
func deletePodGracefully(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod %s should stay terminating: %v", name, err)
	}
	if pod.DeletionTimestamp == nil {
		t.Fatalf("pod %s has no deletionTimestamp", name)
	}
}

// newService returns a Service selecting app=web whose port "http" (80)
// targets the pods' port named "web".
func newService(ns, name string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
}

func mustCreateService(t *testing.T, c clientset.Interface, svc *v1.Service) *v1.Service {
	t.Helper()
	created, err := c.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// slicesOf lists the controller-managed EndpointSlices of a Service.
func slicesOf(ctx context.Context, c clientset.Interface, ns, svc string) ([]discovery.EndpointSlice, error) {
	list, err := c.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discovery.LabelServiceName + "=" + svc + "," + discovery.LabelManagedBy + "=" + endpointslice.ControllerName,
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// conds is an endpoint's ready/serving/terminating conditions.
type conds struct{ ready, serving, terminating bool }

func (c conds) String() string {
	return fmt.Sprintf("ready=%t serving=%t terminating=%t", c.ready, c.serving, c.terminating)
}

// sliceConditions maps target pod name to the endpoint's conditions,
// across all slices; a pod listed twice is an error.
func sliceConditions(slices []discovery.EndpointSlice) (map[string]conds, error) {
	out := map[string]conds{}
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.Conditions.Ready == nil || ep.Conditions.Serving == nil || ep.Conditions.Terminating == nil {
				return nil, fmt.Errorf("endpoint %+v lacks a targetRef or a condition", ep)
			}
			if _, dup := out[ep.TargetRef.Name]; dup {
				return nil, fmt.Errorf("pod %s listed twice", ep.TargetRef.Name)
			}
			out[ep.TargetRef.Name] = conds{*ep.Conditions.Ready, *ep.Conditions.Serving, *ep.Conditions.Terminating}
		}
	}
	return out, nil
}

// getEndpointSubsets returns the subsets of the Service's Endpoints, or
// found=false while it does not exist.
func getEndpointSubsets(ctx context.Context, c clientset.Interface, ns, name string) (subsets []endpointSubset, found bool, err error) {
	ep, err := c.CoreV1().Endpoints(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return ep.Subsets, true, nil
}

// addressSummary renders subsets as sorted "pod@ip:port ready|notReady"
// lines, which is easy to compare and to read in a failure.
func addressSummary(subsets []endpointSubset) []string {
	var out []string
	for _, s := range subsets {
		var ports []string
		for _, p := range s.Ports {
			ports = append(ports, fmt.Sprintf("%s=%d", p.Name, p.Port))
		}
		portStr := strings.Join(ports, ",")
		for _, a := range s.Addresses {
			out = append(out, fmt.Sprintf("%s@%s[%s] ready", targetName(a.TargetRef), a.IP, portStr))
		}
		for _, a := range s.NotReadyAddresses {
			out = append(out, fmt.Sprintf("%s@%s[%s] notReady", targetName(a.TargetRef), a.IP, portStr))
		}
	}
	sort.Strings(out)
	return out
}

func targetName(ref *v1.ObjectReference) string {
	if ref == nil {
		return "<none>"
	}
	return ref.Name
}

// eventually polls cond until it holds or waitTimeout passes; cond also
// describes what it saw, which the failure reports.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (ok bool, seen string, err error)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ok, seen, err := cond(ctx)
		if err != nil || ctx.Err() != nil {
			// Keep the last real observation for the failure message.
			return false, err
		}
		last = seen
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last seen: %s", what, err, last)
	}
}

// waitSliceConditions waits until the Service's slices list exactly the
// wanted pods with the wanted conditions.
func waitSliceConditions(t *testing.T, c clientset.Interface, ns, svc string, want map[string]conds) {
	t.Helper()
	eventually(t, fmt.Sprintf("slices of %s with %v", svc, want), func(ctx context.Context) (bool, string, error) {
		slices, err := slicesOf(ctx, c, ns, svc)
		if err != nil {
			return false, "", err
		}
		got, err := sliceConditions(slices)
		if err != nil {
			return false, err.Error(), nil
		}
		return reflect.DeepEqual(got, want), fmt.Sprint(got), nil
	})
}

// waitEndpoints waits until the Service's Endpoints render as want (see
// addressSummary).
func waitEndpoints(t *testing.T, c clientset.Interface, ns, svc string, want []string) {
	t.Helper()
	sort.Strings(want)
	eventually(t, fmt.Sprintf("Endpoints %s with %v", svc, want), func(ctx context.Context) (bool, string, error) {
		subsets, found, err := getEndpointSubsets(ctx, c, ns, svc)
		if err != nil || !found {
			return false, "not found", err
		}
		got := addressSummary(subsets)
		return strings.Join(got, "; ") == strings.Join(want, "; "), fmt.Sprint(got), nil
	})
}
