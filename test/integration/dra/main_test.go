// Package dra tests the Dynamic Resource Allocation controllers (the
// resourceclaim-controller and the device-taint-eviction-controller)
// against a real kube-apiserver serving resource.k8s.io/v1. There is no
// scheduler: tests allocate and reserve claims themselves, as the
// scheduler would.
package dra

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/devicetainteviction"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	nodeName  = "node-1"
	className = "gpu.example.com"
	poolName  = "pool"
)

// runClaimController runs the resourceclaim-controller until the test ends.
func runClaimController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	rc, err := resourceclaim.NewController(klog.Background(), c,
		factory.Core().V1().Pods(), factory.Scheduling().V1beta1().PodGroups(),
		factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceClaimTemplates(),
		// The v1.37 defaults.
		resourceclaim.Features{AdminAccess: true, PrioritizedList: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc.Run(ctx, 2)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// runEvictionController runs the device-taint-eviction-controller until the test ends.
func runEvictionController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	tc := devicetainteviction.NewController(c, factory.Core().V1().Pods(), factory.Resource().V1().ResourceClaims(),
		factory.Resource().V1().ResourceSlices(), factory.Resource().V1().DeviceTaintRules(), factory.Resource().V1().DeviceClasses(),
		"device-taint-eviction-controller", devicetainteviction.Features{DeviceTaintRules: true})
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := tc.Run(ctx, 2); err != nil {
			t.Errorf("device taint eviction: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

// TestAPIServed checks that the framework's apiserver serves everything
// these controllers use, without extra --runtime-config or feature gates.
func TestAPIServed(t *testing.T) {
	c := framework.Shared(t).Client(t)
	list, err := c.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1")
	if err != nil {
		t.Fatalf("resource.k8s.io/v1 not served: %v", err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"resourceclaims", "resourceclaims/status", "resourceclaimtemplates", "resourceslices", "deviceclasses", "devicetaintrules", "devicetaintrules/status"} {
		if !slices.Contains(names, want) {
			t.Errorf("resource.k8s.io/v1 lacks %s (has %v)", want, names)
		}
	}
}

func createTemplate(t *testing.T, c clientset.Interface, ns string) {
	t.Helper()
	_, err := c.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-template"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train"}, Annotations: map[string]string{"note": "copied"}},
			Spec:       claimSpec(),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func claimSpec() resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: className}}},
	}}
}

// newPod returns a pod using a claim from the template (claimName "") or the named claim.
func newPod(name, claimName string) *v1.Pod {
	podClaim := v1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")}
	if claimName != "" {
		podClaim = v1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(claimName)}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}},
			}},
			ResourceClaims: []v1.PodResourceClaim{podClaim},
		},
	}
}

func createPod(t *testing.T, c clientset.Interface, ns string, pod *v1.Pod) *v1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Without a kubelet a scheduled pod only goes when forced.
	t.Cleanup(func() {
		_ = c.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return pod
}

func getPod(t *testing.T, c clientset.Interface, ns, name string) *v1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func getClaim(t *testing.T, c clientset.Interface, ns, name string) *resourceapi.ResourceClaim {
	t.Helper()
	claim, err := c.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return claim
}

// allocate does what the scheduler does: add the delete-protection
// finalizer, then write the allocation (with the device tolerations of
// the request) and reserve the claim for the pods.
func allocate(t *testing.T, c clientset.Interface, ns, name, driver, device string, tolerations []resourceapi.DeviceToleration, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	claim := getClaim(t, c, ns, name)
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		var err error
		if claim, err = c.ResourceV1().ResourceClaims(ns).Update(ctx, claim, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: poolName, Device: device, Tolerations: tolerations}},
	}}
	for _, pod := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	claim, err := c.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseClaim(c, ns, name) })
	return claim
}

// releaseClaim lets a claim go even when a test failed half-way.
func releaseClaim(c clientset.Interface, ns, name string) {
	ctx := context.Background()
	claim, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	claim.Finalizers = nil
	_, _ = c.ResourceV1().ResourceClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
	_ = c.ResourceV1().ResourceClaims(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// holdsFor checks that cond stays true for d.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("no longer true: %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func notFound(err error) bool { return apierrors.IsNotFound(err) }
