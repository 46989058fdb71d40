package servicecidrs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var testNow = time.Unix(10000, 0)

func newCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: cidrs},
	}
}

func protected(c *networkingv1.ServiceCIDR) *networkingv1.ServiceCIDR {
	c.Finalizers = append(c.Finalizers, ServiceCIDRProtectionFinalizer)
	return c
}

// deleting marks the ServiceCIDR deleted ago before testNow.
func deleting(ago time.Duration, c *networkingv1.ServiceCIDR) *networkingv1.ServiceCIDR {
	c.DeletionTimestamp = &metav1.Time{Time: testNow.Add(-ago)}
	return c
}

func withCondition(status metav1.ConditionStatus, reason, message string, c *networkingv1.ServiceCIDR) *networkingv1.ServiceCIDR {
	c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{
		Type: networkingv1.ServiceCIDRConditionReady, Status: status, Reason: reason, Message: message,
	})
	return c
}

func ready(c *networkingv1.ServiceCIDR) *networkingv1.ServiceCIDR {
	return withCondition(metav1.ConditionTrue, "", readyMessage, c)
}

// newIP returns a Service IPAddress as the apiserver's allocator labels it.
func newIP(addr string) *networkingv1.IPAddress {
	family := string(v1.IPv4Protocol)
	if netip.MustParseAddr(addr).Is6() {
		family = string(v1.IPv6Protocol)
	}
	return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{
		Name: addr,
		Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: family,
			networkingv1.LabelManagedBy:       ipAllocatorName,
		},
	}}
}

type fixture struct {
	c        *Controller
	client   *fake.Clientset
	clock    *clocktesting.FakeClock
	cidrs    cache.Store
	ips      cache.Store
	recorder *record.FakeRecorder
	ctx      context.Context
}

func newFixture(t *testing.T, cidrs []*networkingv1.ServiceCIDR, ips []*networkingv1.IPAddress) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, o := range cidrs {
		objs = append(objs, o)
	}
	for _, o := range ips {
		objs = append(objs, o)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	cidrInformer := factory.Networking().V1().ServiceCIDRs()
	ipInformer := factory.Networking().V1().IPAddresses()
	c := NewController(ctx, cidrInformer, ipInformer, client)
	clk := clocktesting.NewFakeClock(testNow)
	c.clock = clk
	// Retry without delay, and delay by the fake clock.
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
	c.loop.Queue = c.queue
	t.Cleanup(c.queue.ShutDown)
	rec := record.NewFakeRecorder(10)
	c.recorder = rec
	for _, o := range cidrs {
		if err := cidrInformer.Informer().GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range ips {
		if err := ipInformer.Informer().GetStore().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{c: c, client: client, clock: clk, cidrs: cidrInformer.Informer().GetStore(), ips: ipInformer.Informer().GetStore(), recorder: rec, ctx: ctx}
}

// describe renders the writes: finalizer patches and status applies.
func describe(t *testing.T, actions []clienttesting.Action) []string {
	t.Helper()
	var out []string
	for _, a := range actions {
		p, ok := a.(clienttesting.PatchAction)
		if !ok {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
			continue
		}
		switch {
		case p.GetSubresource() == "status" && p.GetPatchType() == types.ApplyPatchType:
			out = append(out, "apply status "+p.GetName()+" "+conditionOf(t, p.GetPatch()))
		default:
			out = append(out, fmt.Sprintf("patch %s %s", p.GetName(), p.GetPatch()))
		}
	}
	return out
}

// conditionOf summarises the Ready condition of an apply patch.
func conditionOf(t *testing.T, patch []byte) string {
	t.Helper()
	var obj networkingv1.ServiceCIDR
	if err := json.Unmarshal(patch, &obj); err != nil {
		t.Fatalf("decoding apply patch %s: %v", patch, err)
	}
	if len(obj.Status.Conditions) != 1 {
		return fmt.Sprintf("%d conditions", len(obj.Status.Conditions))
	}
	c := obj.Status.Conditions[0]
	if !c.LastTransitionTime.Time.Equal(testNow) {
		t.Errorf("lastTransitionTime %v, want %v", c.LastTransitionTime, testNow)
	}
	return fmt.Sprintf("%s=%s reason=%q message=%q", c.Type, c.Status, c.Reason, c.Message)
}

const (
	addFinalizerPatch    = `patch %s {"metadata":{"finalizers":["networking.k8s.io/service-cidr-finalizer"]}}`
	removeFinalizerPatch = `patch %s {"metadata":{"$deleteFromPrimitiveList/finalizers":["networking.k8s.io/service-cidr-finalizer"]}}`
	readyApply           = `apply status %s Ready=True reason="" message="Kubernetes Service CIDR is ready"`
	terminatingApply     = `apply status %s Ready=False reason="Terminating" message="There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"`
)

func TestSync(t *testing.T) {
	tests := []struct {
		name    string
		cidrs   []*networkingv1.ServiceCIDR
		ips     []*networkingv1.IPAddress
		want    []string
		requeue bool
	}{
		{name: "missing ServiceCIDR"},
		{name: "new ServiceCIDR gets the finalizer and Ready",
			cidrs: []*networkingv1.ServiceCIDR{newCIDR("x", "10.1.0.0/24")},
			want:  []string{fmt.Sprintf(addFinalizerPatch, "x"), fmt.Sprintf(readyApply, "x")}},
		{name: "ready ServiceCIDR is left alone",
			cidrs: []*networkingv1.ServiceCIDR{ready(protected(newCIDR("x", "10.1.0.0/24")))}},
		{name: "ready with another message is rewritten",
			cidrs: []*networkingv1.ServiceCIDR{withCondition(metav1.ConditionTrue, "", "Kubernetes default Service CIDR is ready", protected(newCIDR("x", "10.1.0.0/24")))},
			want:  []string{fmt.Sprintf(readyApply, "x")}},
		{name: "not ready becomes ready",
			cidrs: []*networkingv1.ServiceCIDR{withCondition(metav1.ConditionFalse, "Terminating", terminatingMessage, protected(newCIDR("x", "10.1.0.0/24")))},
			want:  []string{fmt.Sprintf(readyApply, "x")}},
		{name: "deleted and unused loses the finalizer after the grace period",
			cidrs: []*networkingv1.ServiceCIDR{deleting(deletionGracePeriod, ready(protected(newCIDR("x", "10.1.0.0/24"))))},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "deleted and unused within the grace period waits",
			cidrs:   []*networkingv1.ServiceCIDR{deleting(time.Second, ready(protected(newCIDR("x", "10.1.0.0/24"))))},
			requeue: true},
		{name: "deleted without our finalizer needs nothing",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, newCIDR("x", "10.1.0.0/24"))}},
		{name: "deleted with an IPv4 address in it is Terminating",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24"))))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.10")},
			want:  []string{fmt.Sprintf(terminatingApply, "x")}},
		{name: "already Terminating is not rewritten",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, withCondition(metav1.ConditionFalse, "Terminating", terminatingMessage, protected(newCIDR("x", "10.1.0.0/24"))))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.10")}},
		{name: "deleted with an IPv6 address in it is Terminating",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24", "fd00:1::/112"))))},
			ips:   []*networkingv1.IPAddress{newIP("fd00:1::a")},
			want:  []string{fmt.Sprintf(terminatingApply, "x")}},
		{name: "addresses not allocated by the apiserver do not block",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24"))))},
			ips: []*networkingv1.IPAddress{func() *networkingv1.IPAddress {
				ip := newIP("10.1.0.10")
				ip.Labels[networkingv1.LabelManagedBy] = "someone-else"
				return ip
			}()},
			want: []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "addresses outside do not block",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24"))))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.1.10"), newIP("fd00::1")},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "the IPv4 network and broadcast addresses do not block",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24", "fd00:1::/112"))))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.0"), newIP("10.1.0.255"), newIP("fd00:1::")},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "the last IPv6 address blocks",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "fd00:1::/112"))))},
			ips:   []*networkingv1.IPAddress{newIP("fd00:1::ffff")},
			want:  []string{fmt.Sprintf(terminatingApply, "x")}},
		{name: "a ServiceCIDR with the same range takes over",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24")))), ready(protected(newCIDR("y", "10.1.0.0/24")))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.10")},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "a larger ServiceCIDR takes over",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24")))), ready(protected(newCIDR("y", "10.0.0.0/8")))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.10")},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "a smaller ServiceCIDR holding the address takes it over",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24")))), ready(protected(newCIDR("y", "10.1.0.0/28")))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.10")},
			want:  []string{fmt.Sprintf(removeFinalizerPatch, "x")}},
		{name: "a smaller ServiceCIDR not holding the address does not",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24")))), ready(protected(newCIDR("y", "10.1.0.0/28")))},
			ips:   []*networkingv1.IPAddress{newIP("10.1.0.100")},
			want:  []string{fmt.Sprintf(terminatingApply, "x")}},
		{name: "a parent for only one family does not cover the other",
			cidrs: []*networkingv1.ServiceCIDR{deleting(time.Hour, ready(protected(newCIDR("x", "10.1.0.0/24", "fd00:1::/112")))), ready(protected(newCIDR("y", "10.0.0.0/8")))},
			ips:   []*networkingv1.IPAddress{newIP("fd00:1::a")},
			want:  []string{fmt.Sprintf(terminatingApply, "x")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.cidrs, tc.ips)
			f.client.ClearActions()
			if err := f.c.sync(f.ctx, "x"); err != nil {
				t.Fatal(err)
			}
			if got := describe(t, f.client.Actions()); !slices.Equal(got, tc.want) {
				t.Errorf("actions\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if f.c.queue.Len() != 0 {
				t.Fatalf("queued at once")
			}
			if tc.requeue {
				// It comes back when the grace period since the deletion
				// timestamp has passed.
				f.clock.Step(deletionGracePeriod - time.Second)
				testutil.WaitFor(t, "the requeue", func() bool { return f.c.queue.Len() == 1 })
			}
		})
	}
}

func TestStatusFailure(t *testing.T) {
	f := newFixture(t, []*networkingv1.ServiceCIDR{protected(newCIDR("x", "10.1.0.0/24"))}, nil)
	f.client.PrependReactor("patch", "servicecidrs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), "x", errors.New("injected"))
	})
	if err := f.c.sync(f.ctx, "x"); err == nil {
		t.Fatal("no error")
	}
	select {
	case e := <-f.recorder.Events:
		if e != "Warning KubernetesServiceCIDRError The ServiceCIDR Status can not be set to Ready=True" {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event")
	}
}

// A ServiceCIDR deleted while the finalizer is added needs nothing more;
// other patch errors are retried.
func TestFinalizerPatchErrors(t *testing.T) {
	f := newFixture(t, []*networkingv1.ServiceCIDR{newCIDR("x", "10.1.0.0/24")}, nil)
	var errs = []error{
		apierrors.NewNotFound(networkingv1.Resource("servicecidrs"), "x"),
		apierrors.NewConflict(networkingv1.Resource("servicecidrs"), "x", errors.New("injected")),
	}
	f.client.PrependReactor("patch", "servicecidrs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" && len(errs) > 0 {
			err := errs[0]
			errs = errs[1:]
			return true, nil, err
		}
		return false, nil, nil
	})
	if err := f.c.addFinalizer(f.ctx, newCIDR("x", "10.1.0.0/24")); err != nil {
		t.Errorf("not found: %v", err)
	}
	if err := f.c.addFinalizer(f.ctx, newCIDR("x", "10.1.0.0/24")); !apierrors.IsConflict(err) {
		t.Errorf("conflict: %v", err)
	}
}

// A ServiceCIDR that keeps failing is dropped after maxRetries retries.
func TestMaxRetries(t *testing.T) {
	f := newFixture(t, []*networkingv1.ServiceCIDR{newCIDR("x", "10.1.0.0/24")}, nil)
	calls := 0
	f.client.PrependReactor("patch", "servicecidrs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, errors.New("injected")
	})
	f.c.queue.Add("x")
	for i := 0; f.c.queue.Len() > 0; i++ {
		if i > 100 {
			t.Fatal("queue does not drain")
		}
		f.c.loop.ProcessNextWorkItem(f.ctx)
	}
	if calls != maxRetries+1 {
		t.Errorf("%d attempts, want %d", calls, maxRetries+1)
	}
}

func queued(f *fixture) []string {
	out := testutil.Drain[string](f.c.queue)
	sort.Strings(out)
	return out
}

func TestEventHandlers(t *testing.T) {
	cidrs := []*networkingv1.ServiceCIDR{
		newCIDR("big", "10.0.0.0/8"),
		newCIDR("small", "10.1.0.0/24"),
		newCIDR("other", "192.168.0.0/24"),
		newCIDR("v6", "fd00::/64"),
		newCIDR("dual", "10.1.0.0/28", "fd00::/120"),
	}
	f := newFixture(t, cidrs, nil)

	f.c.addServiceCIDR(newCIDR("new", "10.1.0.0/16"))
	if got, want := queued(f), []string{"big", "dual", "new", "small"}; !slices.Equal(got, want) {
		t.Errorf("add ServiceCIDR queued %v, want %v", got, want)
	}

	f.c.ipAddressChanged(newIP("10.1.0.5"))
	if got, want := queued(f), []string{"big", "dual", "small"}; !slices.Equal(got, want) {
		t.Errorf("add IP queued %v, want %v", got, want)
	}
	f.c.ipAddressChanged(cache.DeletedFinalStateUnknown{Key: "fd00::5", Obj: newIP("fd00::5")})
	if got, want := queued(f), []string{"dual", "v6"}; !slices.Equal(got, want) {
		t.Errorf("deleted IP queued %v, want %v", got, want)
	}
	// Network addresses belong to no range; foreign addresses are ignored.
	f.c.ipAddressChanged(newIP("10.1.0.0"))
	if got, want := queued(f), []string{"big"}; !slices.Equal(got, want) {
		t.Errorf("network address queued %v, want %v", got, want)
	}
	foreign := newIP("10.1.0.5")
	delete(foreign.Labels, networkingv1.LabelManagedBy)
	f.c.ipAddressChanged(foreign)
	if got := queued(f); len(got) != 0 {
		t.Errorf("foreign IP queued %v", got)
	}
	f.c.enqueue(cache.DeletedFinalStateUnknown{Key: "gone", Obj: newCIDR("gone")})
	if got, want := queued(f), []string{"gone"}; !slices.Equal(got, want) {
		t.Errorf("deleted ServiceCIDR queued %v, want %v", got, want)
	}
}

func TestAllocatable(t *testing.T) {
	tests := []struct {
		prefix, addr string
		want         bool
	}{
		{"10.0.0.0/24", "10.0.0.1", true},
		{"10.0.0.0/24", "10.0.0.254", true},
		{"10.0.0.0/24", "10.0.0.0", false},
		{"10.0.0.0/24", "10.0.0.255", false},
		{"10.0.0.0/24", "10.0.1.1", false},
		{"10.0.0.0/31", "10.0.0.1", false},
		{"10.0.0.0/32", "10.0.0.0", false},
		{"fd00::/120", "fd00::ff", true},
		{"fd00::/120", "fd00::", false},
		{"fd00::/120", "10.0.0.1", false},
		{"10.0.0.0/8", "fd00::1", false},
	}
	for _, tc := range tests {
		if got := allocatable(netip.MustParsePrefix(tc.prefix), netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("allocatable(%s, %s) = %v", tc.prefix, tc.addr, got)
		}
	}
}

func TestQueueName(t *testing.T) {
	rec := testutil.RecordQueueNames()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	NewController(ctx, factory.Networking().V1().ServiceCIDRs(), factory.Networking().V1().IPAddresses(), client)
	if !rec.Has("ipaddresses") {
		t.Errorf("no workqueue named ipaddresses (have %v)", rec.Names())
	}
}

// Run with real informers: a new ServiceCIDR gets the finalizer and the
// Ready condition; Run returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(newCIDR("x", "10.1.0.0/24"))
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(ctx, factory.Networking().V1().ServiceCIDRs(), factory.Networking().V1().IPAddresses(), client)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	testutil.WaitFor(t, "the finalizer and Ready", func() bool {
		x, err := client.NetworkingV1().ServiceCIDRs().Get(ctx, "x", metav1.GetOptions{})
		if err != nil || !slices.Contains(x.Finalizers, ServiceCIDRProtectionFinalizer) {
			return false
		}
		for _, c := range x.Status.Conditions {
			if c.Type == networkingv1.ServiceCIDRConditionReady && c.Status == metav1.ConditionTrue && c.Message == readyMessage {
				return true
			}
		}
		return false
	})
	cancel()
	<-done
	factory.Shutdown()
}
