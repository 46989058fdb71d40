package resourcepoolstatusrequest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const driver = "gpu.example.com"

type fixture struct {
	c       *Controller
	client  *fake.Clientset
	factory informers.SharedInformerFactory
}

// newFixture builds the controller with v1.37's default gates.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWithFeatures(t, Features{DeviceTaintRules: true}, objs...)
}

func newFixtureWithFeatures(t *testing.T, features Features, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	r := factory.Resource()
	c, err := NewController(ctx, client, r.V1alpha3().ResourcePoolStatusRequests(), r.V1().ResourceSlices(), r.V1().ResourceClaims(), r.V1().DeviceTaintRules(), features)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *resourcev1alpha3.ResourcePoolStatusRequest:
			err = r.V1alpha3().ResourcePoolStatusRequests().Informer().GetStore().Add(o)
			if err == nil {
				err = client.Tracker().Add(o)
			}
		case *resourcev1.ResourceSlice:
			err = r.V1().ResourceSlices().Informer().GetStore().Add(o)
		case *resourcev1.ResourceClaim:
			err = r.V1().ResourceClaims().Informer().GetStore().Add(o)
		case *resourcev1.DeviceTaintRule:
			err = r.V1().DeviceTaintRules().Informer().GetStore().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{c: c, client: client, factory: factory}
}

func request(name string, pool *string) *resourcev1alpha3.ResourcePoolStatusRequest {
	return &resourcev1alpha3.ResourcePoolStatusRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name)},
		Spec:       resourcev1alpha3.ResourcePoolStatusRequestSpec{Driver: driver, PoolName: pool},
	}
}

func slice(name, pool, node string, gen, count int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: driver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
			Devices: devices,
		},
	}
}

func dev(name string) resourcev1.Device { return resourcev1.Device{Name: name} }

func allocated(name, pool string, devices ...string) *resourcev1.ResourceClaim {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	claim.Status.Allocation = &resourcev1.AllocationResult{}
	for _, d := range devices {
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
			resourcev1.DeviceRequestAllocationResult{Request: "r", Driver: driver, Pool: pool, Device: d})
	}
	return claim
}

func (f *fixture) written(t *testing.T) *resourcev1alpha3.ResourcePoolStatusRequestStatus {
	t.Helper()
	for _, a := range f.client.Actions() {
		if a.Matches("update", "resourcepoolstatusrequests") && a.GetSubresource() == "status" {
			return a.(clienttesting.UpdateAction).GetObject().(*resourcev1alpha3.ResourcePoolStatusRequest).Status
		}
	}
	return nil
}

func TestCounts(t *testing.T) {
	tainted := dev("d3")
	tainted.Taints = []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	adminClaim := allocated("admin", "pool-a", "d2")
	adminClaim.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	f := newFixture(t, request("req", nil),
		slice("a-1", "pool-a", "node-1", 2, 2, dev("d1"), dev("d2")),
		slice("a-2", "pool-a", "node-1", 2, 2, tainted, dev("d4")),
		slice("a-old", "pool-a", "node-1", 1, 1, dev("old")), // older generation: ignored
		slice("b-1", "pool-b", "node-2", 1, 1, dev("x")),
		allocated("claim", "pool-a", "d1"), adminClaim)
	if err := f.c.syncRequest(context.Background(), "req"); err != nil {
		t.Fatal(err)
	}
	st := f.written(t)
	if st == nil {
		t.Fatal("no status written")
	}
	if *st.PoolCount != 2 || len(st.Pools) != 2 {
		t.Fatalf("pools = %+v", st.Pools)
	}
	a := st.Pools[0]
	if a.PoolName != "pool-a" || *a.NodeName != "node-1" || a.Generation != 2 || *a.ResourceSliceCount != 2 ||
		*a.TotalDevices != 4 || *a.AllocatedDevices != 1 || *a.UnavailableDevices != 1 || *a.AvailableDevices != 2 {
		t.Errorf("pool-a = %+v", a)
	}
	if c := st.Conditions; len(c) != 1 || c[0].Type != "Complete" || c[0].Reason != "CalculationComplete" || c[0].Message != "Calculated status for 2 pools" {
		t.Errorf("conditions = %+v", c)
	}
}

// A DeviceTaintRule makes the devices it selects unavailable only with
// Features.DeviceTaintRules.
func TestDeviceTaintRulesFollowFeatures(t *testing.T) {
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "rule"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(driver), Pool: ptr.To("pool-a"), Device: ptr.To("d1")},
			Taint:          resourcev1.DeviceTaint{Key: "k", Effect: resourcev1.DeviceTaintEffectNoExecute},
		},
	}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("DeviceTaintRules=%v", on), func(t *testing.T) {
			f := newFixtureWithFeatures(t, Features{DeviceTaintRules: on}, request("req", nil),
				slice("a-1", "pool-a", "node-1", 1, 1, dev("d1"), dev("d2")), rule)
			if err := f.c.syncRequest(context.Background(), "req"); err != nil {
				t.Fatal(err)
			}
			st := f.written(t)
			if st == nil || len(st.Pools) != 1 {
				t.Fatalf("status = %+v", st)
			}
			want := int32(0)
			if on {
				want = 1
			}
			if got := *st.Pools[0].UnavailableDevices; got != want {
				t.Errorf("unavailable devices = %d, want %d", got, want)
			}
		})
	}
}

// A pool with slices not yet seen is retried, not answered.
func TestIncompletePoolRetries(t *testing.T) {
	f := newFixture(t, request("req", nil), slice("a-1", "pool-a", "node-1", 1, 2, dev("d1")))
	err := f.c.syncRequest(context.Background(), "req")
	if err == nil || f.written(t) != nil {
		t.Fatalf("err = %v, written %v; want a retry and nothing written", err, f.written(t))
	}
}

func TestPoolFilterAndLimit(t *testing.T) {
	req := request("req", ptr.To("pool-b"))
	f := newFixture(t, req, slice("a", "pool-a", "n", 1, 1, dev("d")), slice("b", "pool-b", "n", 1, 1, dev("d")))
	if err := f.c.syncRequest(context.Background(), "req"); err != nil {
		t.Fatal(err)
	}
	if st := f.written(t); len(st.Pools) != 1 || st.Pools[0].PoolName != "pool-b" {
		t.Fatalf("pools = %+v", st.Pools)
	}

	req = request("req", nil)
	req.Spec.Limit = ptr.To[int32](1)
	f = newFixture(t, req, slice("a", "pool-a", "n", 1, 1, dev("d")), slice("b", "pool-b", "n", 1, 1, dev("d")))
	if err := f.c.syncRequest(context.Background(), "req"); err != nil {
		t.Fatal(err)
	}
	if st := f.written(t); *st.PoolCount != 2 || len(st.Pools) != 1 || st.Pools[0].PoolName != "pool-a" {
		t.Fatalf("count %d pools %+v", *st.PoolCount, st.Pools)
	}
}

func TestAnsweredRequestSkipped(t *testing.T) {
	req := request("req", nil)
	req.Status = &resourcev1alpha3.ResourcePoolStatusRequestStatus{}
	f := newFixture(t, req)
	if err := f.c.syncRequest(context.Background(), "req"); err != nil {
		t.Fatal(err)
	}
	if f.written(t) != nil {
		t.Fatal("answered twice")
	}
}

func TestViews(t *testing.T) {
	q := resource.MustParse
	counter := func(n string) map[string]resourcev1.Counter {
		return map[string]resourcev1.Counter{"mem": {Value: q(n)}}
	}
	part := func(name, typ, mem string) device {
		return device{name: name, partitionAttr: driver + "/profile", cost: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu", Counters: counter(mem)}},
			attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"profile": {StringValue: ptr.To(typ)}}}
	}
	p := pool{driver: driver, name: "p",
		devices:        []device{part("full", "full", "8Gi"), part("half-1", "half", "4Gi"), part("half-2", "half", "4Gi")},
		sharedCounters: []resourcev1.CounterSet{{Name: "gpu", Counters: counter("8Gi")}},
		inUse:          map[string]struct{}{"half-1": {}},
	}
	resolvePartitions(nil, &p)
	parts, shareable, problem := views(p)
	if problem != "" || shareable != nil {
		t.Fatalf("problem %q shareable %v", problem, shareable)
	}
	got := map[string][2]int32{}
	for _, s := range parts {
		got[s.Type] = [2]int32{*s.Total, *s.Allocatable}
	}
	// half-1 uses 4Gi: the full one no longer fits, one half still does.
	if got["full"] != [2]int32{1, 0} || got["half"] != [2]int32{2, 1} {
		t.Fatalf("partitions = %v", got)
	}

	// A partition type with two different costs is flagged.
	p.devices[2] = part("half-2", "half", "2Gi")
	resolvePartitions(nil, &p)
	if parts, _, problem := views(p); parts != nil || !strings.HasPrefix(problem, prefixPartitionCostMismatch) {
		t.Fatalf("parts %v problem %q", parts, problem)
	}

	// Shareable devices sum their capacity.
	sh := pool{driver: driver, name: "s", devices: []device{
		{name: "a", shareable: true, capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"mem": {Value: q("10Gi")}}},
		{name: "b", shareable: true, capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"mem": {Value: q("10Gi")}}},
	}, inUse: map[string]struct{}{"a": {}}, consumed: map[resourcev1.QualifiedName]resource.Quantity{"mem": q("4Gi")}}
	_, s, problem := views(sh)
	if problem != "" || *s.FullyAvailableDevices != 1 || *s.PartiallyAvailableDevices != 1 || len(s.Capacity) != 1 ||
		s.Capacity[0].Total.String() != "20Gi" || s.Capacity[0].Available.String() != "16Gi" {
		t.Fatalf("shareable = %+v, problem %q", s, problem)
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	f := newFixture(t)
	f.c.now = func() time.Time { return now }
	mk := func(created time.Duration, finished *time.Duration) *resourcev1alpha3.ResourcePoolStatusRequest {
		r := request("r", nil)
		r.CreationTimestamp = metav1.NewTime(now.Add(-created))
		if finished != nil {
			r.Status = &resourcev1alpha3.ResourcePoolStatusRequestStatus{Conditions: []metav1.Condition{{Type: "Complete", LastTransitionTime: metav1.NewTime(now.Add(-*finished))}}}
		}
		return r
	}
	for _, tc := range []struct {
		r    *resourcev1alpha3.ResourcePoolStatusRequest
		want bool
	}{
		{mk(2*time.Hour, nil), false},
		{mk(25*time.Hour, nil), true},
		{mk(2*time.Hour, ptr.To(30*time.Minute)), false},
		{mk(2*time.Hour, ptr.To(61*time.Minute)), true},
	} {
		if got := f.c.expired(tc.r); got != tc.want {
			t.Errorf("expired(%v, %+v) = %v", tc.r.CreationTimestamp, tc.r.Status, got)
		}
	}
}
