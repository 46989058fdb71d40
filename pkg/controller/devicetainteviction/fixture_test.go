package devicetainteviction

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const (
	ns         = "ns"
	nodeName   = "node-1"
	driverName = "gpu.example.com"
	poolName   = "pool-a"
	ctrlName   = "device-taint-eviction-controller"
)

type fixture struct {
	t       *testing.T
	ctx     context.Context
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	tc      *Controller
}

// newFixture builds the controller; objects are in the fake apiserver only.
func newFixture(t *testing.T, features Features, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	tc := NewController(client, factory.Core().V1().Pods(), factory.Resource().V1().ResourceClaims(), factory.Resource().V1().ResourceSlices(),
		factory.Resource().V1().DeviceTaintRules(), factory.Resource().V1().DeviceClasses(), ctrlName, features)
	return &fixture{t: t, ctx: ctx, client: client, factory: factory, tc: tc}
}

func defaultFeatures() Features { return Features{DeviceTaintRules: true} }

// run starts informers and controller until the test ends.
func (f *fixture) run() {
	ctx, cancel := context.WithCancel(f.ctx)
	f.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.tc.Run(ctx, 2); err != nil {
			f.t.Errorf("Run: %v", err)
		}
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
		f.factory.Shutdown()
	})
}

func (f *fixture) eventually(what string, timeout time.Duration, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// never checks that cond stays false for d.
func (f *fixture) never(what string, d time.Duration, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			f.t.Fatalf("unexpected: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleted reports whether the client was asked to delete the pod.
func (f *fixture) deleted(name string) bool {
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			if d, ok := a.(interface{ GetName() string }); ok && d.GetName() == name {
				return true
			}
		}
	}
	return false
}

func scheduledPod(name string, claims ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
	for _, c := range claims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return pod
}

// claimFor is a claim allocated with the given devices of the test pool
// and reserved for the pods.
func claimFor(name string, devices []string, pods ...*v1.Pod) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"}}},
		}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, d := range devices {
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "req", Driver: driverName, Pool: poolName, Device: d})
	}
	for _, pod := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	return claim
}

func tolerate(claim *resourceapi.ResourceClaim, tolerations ...resourceapi.DeviceToleration) *resourceapi.ResourceClaim {
	claim = claim.DeepCopy()
	for i := range claim.Status.Allocation.Devices.Results {
		claim.Status.Allocation.Devices.Results[i].Tolerations = tolerations
	}
	return claim
}

func taint(key string, effect resourceapi.DeviceTaintEffect, added time.Time) resourceapi.DeviceTaint {
	return resourceapi.DeviceTaint{Key: key, Value: "v", Effect: effect, TimeAdded: ptr.To(metav1.NewTime(added))}
}

// slice publishes devices dev-0 .. dev-<n-1>; taints go onto dev-0.
func slice(name string, generation int64, n int, taints ...resourceapi.DeviceTaint) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driverName,
			Pool:     resourceapi.ResourcePool{Name: poolName, Generation: generation, ResourceSliceCount: 1},
			AllNodes: ptr.To(true),
		},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "dev-" + string(rune('0'+i))})
	}
	if n > 0 {
		s.Spec.Devices[0].Taints = taints
	}
	return s
}

func rule(name string, effect resourceapi.DeviceTaintEffect, device string, added time.Time) *resourceapi.DeviceTaintRule {
	return &resourceapi.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Generation: 1},
		Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driverName), Pool: ptr.To(poolName), Device: ptr.To(device)},
			Taint:          taint("rule-"+name, effect, added),
		},
	}
}
