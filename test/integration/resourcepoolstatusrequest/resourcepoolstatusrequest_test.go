// Package resourcepoolstatusrequest tests the
// resourcepoolstatusrequest-controller against a kube-apiserver with
// DRAResourcePoolStatus on and resource.k8s.io/v1alpha3 served: a request
// gets its pools' counts written once.
package resourcepoolstatusrequest

import (
	"context"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcepoolstatusrequest"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

const driver = "gpu.example.com"

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, framework.Options{APIServerFlags: []string{
		"--feature-gates=DRAResourcePoolStatus=true",
		"--runtime-config=resource.k8s.io/v1alpha3=true",
	}})
}

func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	r := factory.Resource()
	rc, err := resourcepoolstatusrequest.NewController(klog.NewContext(ctx, klog.Background()), c,
		r.V1alpha3().ResourcePoolStatusRequests(), r.V1().ResourceSlices(), r.V1().ResourceClaims(), r.V1().DeviceTaintRules(), resourcepoolstatusrequest.Features{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	framework.RunController(t, ctx, cancel, factory, func(ctx context.Context) { rc.Run(ctx, 1) })
}

func createSlice(t *testing.T, c clientset.Interface, name, pool, node string, devices ...string) {
	t.Helper()
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: pool, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for _, d := range devices {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: d})
	}
	if _, err := c.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.ResourceV1().ResourceSlices().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// allocatedClaim creates a claim and writes an allocation of device, as the
// scheduler would.
func allocatedClaim(t *testing.T, c clientset.Interface, ns, pool, device string) {
	t.Helper()
	ctx := context.Background()
	claim, err := c.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: driver, Pool: pool, Device: device}},
	}}
	if _, err := c.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestRequestAnswered(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "rpsr")
	createSlice(t, c, "node-1-gpus", "node-1", "node-1", "gpu-0", "gpu-1", "gpu-2")
	createSlice(t, c, "node-2-gpus", "node-2", "node-2", "gpu-0")
	allocatedClaim(t, c, ns, "node-1", "gpu-1")
	runController(t, c)

	ctx := context.Background()
	_, err := c.ResourceV1alpha3().ResourcePoolStatusRequests().Create(ctx, &resourcev1alpha3.ResourcePoolStatusRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
		Spec:       resourcev1alpha3.ResourcePoolStatusRequestSpec{Driver: driver},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.ResourceV1alpha3().ResourcePoolStatusRequests().Delete(context.Background(), "gpus", metav1.DeleteOptions{})
	})
	var req *resourcev1alpha3.ResourcePoolStatusRequest
	framework.Eventually(t, 30*time.Second, "the request's status", func(ctx context.Context) (bool, error) {
		req, err = c.ResourceV1alpha3().ResourcePoolStatusRequests().Get(ctx, "gpus", metav1.GetOptions{})
		return err == nil && req.Status != nil, err
	})
	st := req.Status
	if st.PoolCount == nil || *st.PoolCount != 2 || len(st.Pools) != 2 {
		t.Fatalf("status = %+v", st)
	}
	p := st.Pools[0]
	if p.PoolName != "node-1" || ptr.Deref(p.NodeName, "") != "node-1" || ptr.Deref(p.TotalDevices, -1) != 3 ||
		ptr.Deref(p.AllocatedDevices, -1) != 1 || ptr.Deref(p.AvailableDevices, -1) != 2 || ptr.Deref(p.UnavailableDevices, -1) != 0 {
		t.Errorf("pool node-1 = %+v", p)
	}
	if len(st.Conditions) != 1 || st.Conditions[0].Type != resourcev1alpha3.ResourcePoolStatusRequestConditionComplete {
		t.Errorf("conditions = %+v", st.Conditions)
	}
}
