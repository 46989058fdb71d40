package nodelifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	nodetopology "k8s.io/component-helpers/node/topology"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	nc       *Controller
	recorder *record.FakeRecorder
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	nc, err := NewController(ctx,
		factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Apps().V1().DaemonSets(), client,
		5*time.Second, time.Minute, 50*time.Second, 0.1, 0.01, 50, 0.55, Features{LeaseCircuitBreaker: true})
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(t0)
	nc.clock = clk
	rec := record.NewFakeRecorder(100)
	nc.recorder = rec
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return &fixture{t: t, ctx: ctx, client: client, clock: clk, nc: nc, recorder: rec}
}

func readyNode(name string, status v1.ConditionStatus, heartbeat time.Time, taints ...v1.Taint) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: ktypes.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			Labels: map[string]string{v1.LabelTopologyRegion: "r", v1.LabelTopologyZone: "z"}},
		Spec: v1.NodeSpec{Taints: taints},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{
			{Type: v1.NodeReady, Status: status, LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)},
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)},
		}},
	}
}

func readyPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       v1.PodSpec{NodeName: node},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionTrue},
		}},
	}
}

// getNode reads the node from the fake API.
func (f *fixture) getNode(name string) *v1.Node {
	f.t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// waitCache waits until the informer cache satisfies cond.
func (f *fixture) waitCache(what string, cond func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		f.t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (f *fixture) waitNodeCache(name string, cond func(*v1.Node) bool) {
	f.t.Helper()
	f.waitCache("node "+name+" in cache", func() bool {
		n, err := f.nc.nodeLister.Get(name)
		return err == nil && cond(n)
	})
}

func (f *fixture) monitor() {
	f.t.Helper()
	if err := f.nc.monitorNodeHealth(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func hasTaint(n *v1.Node, key string, effect v1.TaintEffect) bool {
	return taintExists(n.Spec.Taints, &v1.Taint{Key: key, Effect: effect})
}

func TestNotReadyNoScheduleTaintLiftedWhenReady(t *testing.T) {
	node := readyNode("n1", v1.ConditionTrue, t0,
		v1.Taint{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
		v1.Taint{Key: "example.com/user", Effect: v1.TaintEffectNoSchedule})
	f := newFixture(t, node)
	if err := f.nc.doNoScheduleTaintingPass(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	got := f.getNode("n1")
	if hasTaint(got, v1.TaintNodeNotReady, v1.TaintEffectNoSchedule) {
		t.Errorf("not-ready:NoSchedule taint still there: %v", got.Spec.Taints)
	}
	if !hasTaint(got, "example.com/user", v1.TaintEffectNoSchedule) {
		t.Errorf("user taint was removed: %v", got.Spec.Taints)
	}
}

func TestNoScheduleTaintsFollowConditions(t *testing.T) {
	node := readyNode("n1", v1.ConditionFalse, t0)
	node.Spec.Unschedulable = true
	node.Status.Conditions = append(node.Status.Conditions,
		v1.NodeCondition{Type: v1.NodeDiskPressure, Status: v1.ConditionTrue},
		v1.NodeCondition{Type: v1.NodePIDPressure, Status: v1.ConditionTrue},
		v1.NodeCondition{Type: v1.NodeNetworkUnavailable, Status: v1.ConditionTrue})
	node.Status.Conditions[1].Status = v1.ConditionTrue // MemoryPressure
	f := newFixture(t, node)
	if err := f.nc.doNoScheduleTaintingPass(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	got := f.getNode("n1")
	for _, k := range []string{v1.TaintNodeNotReady, v1.TaintNodeMemoryPressure, v1.TaintNodeDiskPressure,
		v1.TaintNodePIDPressure, v1.TaintNodeNetworkUnavailable, v1.TaintNodeUnschedulable} {
		if !hasTaint(got, k, v1.TaintEffectNoSchedule) {
			t.Errorf("missing %s:NoSchedule in %v", k, got.Spec.Taints)
		}
	}
	if len(got.Spec.Taints) != 6 {
		t.Errorf("want 6 taints, got %v", got.Spec.Taints)
	}
	for _, tt := range got.Spec.Taints {
		if tt.TimeAdded == nil {
			t.Errorf("taint %s has no timeAdded", tt.Key)
		}
	}

	// Ready=Unknown swaps not-ready for unreachable.
	got.Status.Conditions[0].Status = v1.ConditionUnknown
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(f.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitNodeCache("n1", func(n *v1.Node) bool { return n.Status.Conditions[0].Status == v1.ConditionUnknown })
	if err := f.nc.doNoScheduleTaintingPass(f.ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	got = f.getNode("n1")
	if hasTaint(got, v1.TaintNodeNotReady, v1.TaintEffectNoSchedule) || !hasTaint(got, v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule) {
		t.Errorf("want unreachable instead of not-ready: %v", got.Spec.Taints)
	}
}

func TestGracePeriodMarksConditionsUnknownAndPodsNotReady(t *testing.T) {
	f := newFixture(t, readyNode("n1", v1.ConditionTrue, t0), readyNode("n2", v1.ConditionTrue, t0), readyPod("p1", "n1"))
	f.monitor()
	if c := getNodeCondition(&f.getNode("n1").Status, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Fatalf("Ready changed within the grace period: %v", c)
	}

	// n2 keeps heartbeating, n1 goes silent.
	f.clock.Step(51 * time.Second)
	n2 := f.getNode("n2")
	n2.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(f.clock.Now())
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(f.ctx, n2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitNodeCache("n2", func(n *v1.Node) bool { return n.Status.Conditions[0].LastHeartbeatTime.Time.Equal(f.clock.Now()) })
	f.monitor()

	n1 := f.getNode("n1")
	for _, ct := range []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure} {
		c := getNodeCondition(&n1.Status, ct)
		if c.Status != v1.ConditionUnknown || c.Reason != "NodeStatusUnknown" || c.Message != "Kubelet stopped posting node status." {
			t.Errorf("%s: want Unknown/NodeStatusUnknown, got %+v", ct, c)
		}
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeDiskPressure, v1.NodePIDPressure} {
		c := getNodeCondition(&n1.Status, ct)
		if c == nil || c.Status != v1.ConditionUnknown || c.Reason != "NodeStatusNeverUpdated" {
			t.Errorf("%s: want Unknown/NodeStatusNeverUpdated, got %+v", ct, c)
		}
	}
	if c := getNodeCondition(&f.getNode("n2").Status, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("heartbeating n2 marked %v", c.Status)
	}
	pod, err := f.client.CoreV1().Pods("default").Get(f.ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Conditions[0].Status != v1.ConditionFalse {
		t.Errorf("pod still Ready: %+v", pod.Status.Conditions)
	}
	wantEvents(t, f.recorder, "Normal RegisteredNode", "Normal NodeNotReady Node n1 status is now: NodeNotReady", "Warning NodeNotReady Node is not ready")

	// The unhealthy node is queued and tainted unreachable:NoExecute.
	f.waitNodeCache("n1", func(n *v1.Node) bool { return n.Status.Conditions[0].Status == v1.ConditionUnknown })
	f.nc.doNoExecuteTaintingPass(f.ctx)
	n1 = f.getNode("n1")
	if !hasTaint(n1, v1.TaintNodeUnreachable, v1.TaintEffectNoExecute) || hasTaint(n1, v1.TaintNodeNotReady, v1.TaintEffectNoExecute) {
		t.Errorf("want unreachable:NoExecute only, got %v", n1.Spec.Taints)
	}
}

func TestLeaseRenewalKeepsNodeHealthy(t *testing.T) {
	lease := func(renew time.Time) *coordLease { return newLease("n1", renew) }
	f := newFixture(t, readyNode("n1", v1.ConditionTrue, t0), readyNode("n2", v1.ConditionTrue, t0), lease(t0))
	f.monitor()
	f.clock.Step(40 * time.Second)
	l, _ := f.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(f.ctx, "n1", metav1.GetOptions{})
	l.Spec.RenewTime = &metav1.MicroTime{Time: f.clock.Now()}
	if _, err := f.client.CoordinationV1().Leases(v1.NamespaceNodeLease).Update(f.ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitCache("lease renewal", func() bool {
		l, err := f.nc.leaseLister.Leases(v1.NamespaceNodeLease).Get("n1")
		return err == nil && l.Spec.RenewTime.Time.Equal(f.clock.Now())
	})
	f.monitor()
	f.clock.Step(20 * time.Second) // 60s since status, 20s since lease
	f.monitor()
	if c := getNodeCondition(&f.getNode("n1").Status, v1.NodeReady); c.Status != v1.ConditionTrue {
		t.Errorf("node with a renewed lease marked %v", c.Status)
	}
	if c := getNodeCondition(&f.getNode("n2").Status, v1.NodeReady); c.Status != v1.ConditionUnknown {
		t.Errorf("silent node n2 marked %v", c.Status)
	}
}

func TestNoExecuteTaintsAreRateLimitedPerZone(t *testing.T) {
	var objs []runtime.Object
	for i := 0; i < 8; i++ {
		objs = append(objs, readyNode(fmt.Sprintf("ok%d", i), v1.ConditionTrue, t0))
	}
	objs = append(objs, readyNode("bad1", v1.ConditionFalse, t0), readyNode("bad2", v1.ConditionFalse, t0))
	f := newFixture(t, objs...)
	f.monitor() // zone Normal: 2 of 10 not ready
	if got := f.nc.zoneStates[nodetopology.GetZoneKey(readyNode("x", "", t0))]; got != stateNormal {
		t.Fatalf("zone state %q, want Normal", got)
	}
	noExec := func() int {
		c := 0
		for _, n := range []string{"bad1", "bad2"} {
			if hasTaint(f.getNode(n), v1.TaintNodeNotReady, v1.TaintEffectNoExecute) {
				c++
			}
		}
		return c
	}
	f.nc.doNoExecuteTaintingPass(f.ctx)
	if got := noExec(); got != 1 {
		t.Fatalf("after first pass %d nodes tainted, want 1 (burst 1)", got)
	}
	f.nc.doNoExecuteTaintingPass(f.ctx)
	if got := noExec(); got != 1 {
		t.Fatalf("without time passing %d nodes tainted, want 1", got)
	}
	f.clock.Step(10 * time.Second) // 0.1 qps: one more token
	f.nc.doNoExecuteTaintingPass(f.ctx)
	if got := noExec(); got != 2 {
		t.Fatalf("after 10s %d nodes tainted, want 2", got)
	}

	// bad1 recovers: its NoExecute taint goes on the next pass.
	b := f.getNode("bad1")
	b.Status.Conditions[0].Status = v1.ConditionTrue
	b.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(f.clock.Now())
	b.Status.Conditions[0].LastTransitionTime = metav1.NewTime(f.clock.Now())
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(f.ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitNodeCache("bad1", func(n *v1.Node) bool {
		return n.Status.Conditions[0].Status == v1.ConditionTrue && hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoExecute)
	})
	f.monitor()
	if n := f.getNode("bad1"); hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoExecute) {
		t.Errorf("taint not removed from recovered node: %v", n.Spec.Taints)
	}
}

func TestFullDisruptionStopsTainting(t *testing.T) {
	f := newFixture(t, readyNode("n1", v1.ConditionFalse, t0), readyNode("n2", v1.ConditionFalse, t0))
	f.monitor()
	for z, s := range f.nc.zoneStates {
		if s != stateFullDisruption {
			t.Errorf("zone %q: %s, want FullDisruption", z, s)
		}
	}
	f.nc.doNoExecuteTaintingPass(f.ctx)
	for _, n := range []string{"n1", "n2"} {
		if node := f.getNode(n); hasTaint(node, v1.TaintNodeNotReady, v1.TaintEffectNoExecute) {
			t.Errorf("%s tainted in full disruption: %v", n, node.Spec.Taints)
		}
	}
}

func TestComputeZoneState(t *testing.T) {
	nc := &Controller{unhealthyZoneThreshold: 0.55}
	mk := func(ready, notReady int) []*v1.NodeCondition {
		var out []*v1.NodeCondition
		for i := 0; i < ready; i++ {
			out = append(out, &v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue})
		}
		for i := 0; i < notReady; i++ {
			out = append(out, &v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionUnknown})
		}
		return out
	}
	for _, tc := range []struct {
		ready, notReady int
		want            ZoneState
	}{
		{3, 0, stateNormal},
		{0, 1, stateFullDisruption},
		{1, 2, stateNormal}, // at most two unhealthy never counts as partial
		{2, 3, statePartialDisruption},
		{3, 3, stateNormal}, // 50% < 55%
	} {
		n, got := nc.ComputeZoneState(mk(tc.ready, tc.notReady))
		if got != tc.want || n != tc.notReady {
			t.Errorf("%d ready, %d not: got %d %s, want %s", tc.ready, tc.notReady, n, got, tc.want)
		}
	}
	nc.largeClusterThreshold, nc.secondaryEvictionLimiterQPS = 50, 0.01
	if nc.ReducedQPSFunc(50) != 0 || nc.ReducedQPSFunc(51) != 0.01 {
		t.Error("ReducedQPSFunc")
	}
}

func wantEvents(t *testing.T, rec *record.FakeRecorder, prefixes ...string) {
	t.Helper()
	var got []string
	for {
		select {
		case e := <-rec.Events:
			got = append(got, e)
			continue
		default:
		}
		break
	}
	for _, p := range prefixes {
		found := false
		for _, e := range got {
			if len(e) >= len(p) && e[:len(p)] == p {
				found = true
			}
		}
		if !found {
			t.Errorf("no event %q in %q", p, got)
		}
	}
}

func TestPodBoundToUnhealthyNodeMarkedNotReady(t *testing.T) {
	f := newFixture(t, readyNode("n1", v1.ConditionFalse, t0), readyNode("n2", v1.ConditionTrue, t0))
	f.monitor()
	for _, p := range []*v1.Pod{readyPod("late", "n1"), readyPod("fine", "n2")} {
		if _, err := f.client.CoreV1().Pods("default").Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	f.waitCache("pods in cache", func() bool {
		ps, _ := f.nc.podsOnNode("n1")
		qs, _ := f.nc.podsOnNode("n2")
		return len(ps) == 1 && len(qs) == 1
	})
	for f.nc.podUpdateQueue.Len() > 0 {
		key, _ := f.nc.podUpdateQueue.Get()
		f.nc.processPod(f.ctx, key)
	}
	for name, want := range map[string]v1.ConditionStatus{"late": v1.ConditionFalse, "fine": v1.ConditionTrue} {
		p, err := f.client.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Status.Conditions[0].Status; got != want {
			t.Errorf("pod %s Ready=%s, want %s", name, got, want)
		}
	}
}

// The lease circuit breaker follows the gate value the app passes in.
func TestLeaseCircuitBreakerFromConstructor(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		client := fake.NewClientset()
		factory := informers.NewSharedInformerFactory(client, 0)
		nc, err := NewController(context.Background(),
			factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
			factory.Apps().V1().DaemonSets(), client,
			5*time.Second, time.Minute, 50*time.Second, 0.1, 0.01, 50, 0.55, Features{LeaseCircuitBreaker: enabled})
		if err != nil {
			t.Fatal(err)
		}
		if nc.circuitBreaker != enabled {
			t.Errorf("gate %v: circuitBreaker = %v", enabled, nc.circuitBreaker)
		}
	}
}
