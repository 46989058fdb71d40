package evaluator

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func exactly(class string, mode resourceapi.DeviceAllocationMode, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: class, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func claimWith(reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}}
}

func deviceClass(name string, extended string, created time.Time) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if extended != "" {
		dc.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return dc
}

func TestClaimUsageByDeviceClass(t *testing.T) {
	firstAvailable := resourceapi.DeviceRequest{Name: "any", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "a", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
		{Name: "b", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
		{Name: "c", DeviceClassName: "fpga", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		// Unknown modes count nothing and add no name.
		{Name: "d", DeviceClassName: "future", AllocationMode: "Future"},
	}}
	claim := claimWith(
		exactly("gpu", resourceapi.DeviceAllocationModeExactCount, 1),
		exactly("nic", resourceapi.DeviceAllocationModeAll, 0),
		firstAvailable,
	)
	e := &claimEvaluator{}
	got, err := e.Usage(claim)
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, "usage", got, rl("count/resourceclaims.resource.k8s.io", "1",
		"gpu.deviceclass.resource.k8s.io/devices", "4",
		"fpga.deviceclass.resource.k8s.io/devices", "1",
		"nic.deviceclass.resource.k8s.io/devices", "32",
		// Without a class cache the implicit extended names still count.
		"requests.deviceclass.resource.kubernetes.io/gpu", "4",
		"requests.deviceclass.resource.kubernetes.io/fpga", "1",
		"requests.deviceclass.resource.kubernetes.io/nic", "32"))
}

func TestClaimMatchingResources(t *testing.T) {
	cache := newDeviceClassCache()
	cache.OnAdd(deviceClass("gpu", "example.com/gpu", time.Now()), false)
	cache.OnAdd(deviceClass("plain", "", time.Now()), false)
	e := &claimEvaluator{deviceClasses: cache}
	// Every existing class is requestable by its implicit name; unknown
	// classes and extended resources no class provides are not claims'.
	in := names("count/resourceclaims.resource.k8s.io", "gpu.deviceclass.resource.k8s.io/devices",
		"requests.deviceclass.resource.kubernetes.io/gpu", "requests.example.com/gpu",
		"requests.deviceclass.resource.kubernetes.io/plain",
		"requests.deviceclass.resource.kubernetes.io/missing", "requests.example.com/other", "pods")
	want := in[:5]
	if got := e.MatchingResources(in); !reflect.DeepEqual(got, want) {
		t.Errorf("MatchingResources = %v, want %v", got, want)
	}
}

func TestDeviceClassCache(t *testing.T) {
	c := newDeviceClassCache()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := deviceClass("old", "example.com/gpu", t0)
	newer := deviceClass("newer", "example.com/gpu", t0.Add(time.Hour))
	c.OnAdd(old, false)
	c.OnAdd(newer, false)
	// The newer class takes a shared extended resource name.
	if got := c.classFor("example.com/gpu"); got == nil || got.Name != "newer" {
		t.Errorf("example.com/gpu -> %v, want newer", got)
	}
	// Adding the older one again does not take it back.
	c.OnUpdate(old, old)
	if got := c.classFor("example.com/gpu"); got.Name != "newer" {
		t.Errorf("after old update: %s", got.Name)
	}
	// Every class keeps its implicit name and its explicit mapping.
	if c.classFor("deviceclass.resource.kubernetes.io/old") == nil || c.extendedResourceOf("old") != "example.com/gpu" {
		t.Error("implicit name or class mapping of old lost")
	}
	// Same age: the smaller name wins.
	same := deviceClass("aaa", "example.com/gpu", t0.Add(time.Hour))
	c.OnAdd(same, false)
	if got := c.classFor("example.com/gpu"); got.Name != "aaa" {
		t.Errorf("tie: %s, want aaa", got.Name)
	}
	c.OnDelete(cache.DeletedFinalStateUnknown{Obj: same})
	if c.classFor("example.com/gpu") != nil || c.classFor("deviceclass.resource.kubernetes.io/aaa") != nil || c.extendedResourceOf("aaa") != "" {
		t.Error("delete left mappings behind")
	}
	var nilCache *deviceClassCache
	if nilCache.classFor("x") != nil || nilCache.extendedResourceOf("x") != "" {
		t.Error("nil cache must answer nothing")
	}
}

func TestClaimUsageSubtractsOwnerPod(t *testing.T) {
	classes := newDeviceClassCache()
	classes.OnAdd(deviceClass("gpu", "example.com/gpu", time.Now()), false)

	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	pod := podWith(container("a", rl("example.com/gpu", "1"), rl("example.com/gpu", "1")))
	pod.Name, pod.UID = "owner", "pod-uid"
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	claimInformer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &resourceapi.ResourceClaim{}, 0, cache.Indexers{})
	owners, err := claimsByOwnerPod(claimInformer)
	if err != nil {
		t.Fatal(err)
	}
	// A second call (another evaluator on the same informer) is fine.
	if _, err := claimsByOwnerPod(claimInformer); err != nil {
		t.Fatal(err)
	}
	e := &claimEvaluator{deviceClasses: classes, pods: corelisters.NewPodLister(pods), claimsOfPod: owners, podFeatures: v137Features}

	claim := claimWith(exactly("gpu", resourceapi.DeviceAllocationModeExactCount, 3))
	claim.CreationTimestamp = metav1.NewTime(time.Now())
	claim.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: "pod-uid", Controller: ptr.To(true)}}
	if err := claimInformer.GetIndexer().Add(claim); err != nil {
		t.Fatal(err)
	}

	got, _ := e.Usage(claim)
	// The pod is charged requests.example.com/gpu=1 itself; the claim adds
	// what the pod does not already hold.
	expectList(t, "owned claim", got, rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
		"requests.deviceclass.resource.kubernetes.io/gpu", "3", "requests.example.com/gpu", "2"))

	// An older claim of the same pod is the pod's; this one is charged in full.
	older := claim.DeepCopy()
	older.Name, older.CreationTimestamp = "older", metav1.NewTime(claim.CreationTimestamp.Add(-time.Minute))
	if err := claimInformer.GetIndexer().Add(older); err != nil {
		t.Fatal(err)
	}
	got, _ = e.Usage(claim)
	expectList(t, "not the pod's first claim", got, rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
		"requests.deviceclass.resource.kubernetes.io/gpu", "3", "requests.example.com/gpu", "3"))

	// The pod naming this claim in its status settles it.
	named := pod.DeepCopy()
	named.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "claim"}
	if err := pods.Update(named); err != nil {
		t.Fatal(err)
	}
	got, _ = e.Usage(claim)
	expectList(t, "named by the pod", got, rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
		"requests.deviceclass.resource.kubernetes.io/gpu", "3", "requests.example.com/gpu", "2"))

	// A pod with another UID is not the owner.
	claim.OwnerReferences[0].UID = types.UID("someone-else")
	got, _ = e.Usage(claim)
	expectList(t, "stale owner", got, rl("count/resourceclaims.resource.k8s.io", "1", "gpu.deviceclass.resource.k8s.io/devices", "3",
		"requests.deviceclass.resource.kubernetes.io/gpu", "3", "requests.example.com/gpu", "3"))
}
