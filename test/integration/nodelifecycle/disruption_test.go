package nodelifecycle

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/tainteviction"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

const (
	disruptionRegion = "region-1"
	// disruptionQPS is --node-eviction-rate (and the secondary rate): one
	// NoExecute taint per zone every 30s, with a burst of one. The nodes
	// must go silent within one token of phase 1 (see the test); 30s leaves
	// a loaded machine room for it.
	disruptionQPS = float32(1.0 / 30)
	tokenInterval = 30 * time.Second
	// podToleration is how long the test pods tolerate the unreachable
	// NoExecute taint.
	podToleration = 2 * time.Second
)

// runControllersWithRate runs the node lifecycle and taint eviction
// controllers with the given eviction rates until the test ends.
func runControllersWithRate(t *testing.T, c clientset.Interface, qps float32) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(c, 0)
	nlc, err := nodelifecycle.NewController(ctx,
		factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Apps().V1().DaemonSets(), c,
		time.Second, gracePeriod, gracePeriod, qps, qps, 50, 0.55, nodelifecycle.Features{LeaseCircuitBreaker: true})
	if err != nil {
		t.Fatal(err)
	}
	tec, err := tainteviction.NewController(ctx, c, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), "taint-eviction-controller", false)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{}, 2)
	go func() { nlc.Run(ctx); done <- struct{}{} }()
	go func() { tec.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		factory.Shutdown()
	})
}

// leaseRenewer plays the kubelets of some nodes renewing their Leases
// (every 250ms, well within the grace period even on a loaded machine)
// until stop, which silences all of them at once.
type leaseRenewer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func renewLeases(t *testing.T, c clientset.Interface, names ...string) *leaseRenewer {
	t.Helper()
	leases := c.CoordinationV1().Leases(v1.NamespaceNodeLease)
	renew := func(ctx context.Context, name string) error {
		now := &metav1.MicroTime{Time: time.Now()}
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
					AcquireTime: now, RenewTime: now},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		l.Spec.RenewTime = now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	}
	for _, name := range names {
		if err := renew(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &leaseRenewer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, name := range names {
				_ = renew(ctx, name)
			}
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *leaseRenewer) stop() {
	r.cancel()
	<-r.done
}

// createZonedNode registers a node of zone (in disruptionRegion) the way a
// kubelet does and reports it Ready; it is deleted, with its Lease, when
// the test ends.
func createZonedNode(t *testing.T, c clientset.Interface, name, zone string) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		v1.LabelTopologyRegion: disruptionRegion,
		v1.LabelTopologyZone:   zone,
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = c.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	postNodeReady(t, c, name, v1.ConditionTrue)
}

// postNodeReady posts the node's status as its kubelet would: a fresh
// heartbeat on every condition, Ready as given, no pressure.
func postNodeReady(t *testing.T, c clientset.Interface, name string, ready v1.ConditionStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		want := map[v1.NodeConditionType]v1.ConditionStatus{
			v1.NodeReady: ready, v1.NodeMemoryPressure: v1.ConditionFalse,
			v1.NodeDiskPressure: v1.ConditionFalse, v1.NodePIDPressure: v1.ConditionFalse,
		}
		reasons := map[v1.ConditionStatus]string{v1.ConditionTrue: "KubeletReady", v1.ConditionFalse: "KubeletNotReady"}
		var conds []v1.NodeCondition
		for _, typ := range []v1.NodeConditionType{v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			cond := v1.NodeCondition{Type: typ, Status: want[typ], LastHeartbeatTime: now, LastTransitionTime: now}
			if typ == v1.NodeReady {
				cond.Reason = reasons[ready]
			}
			for _, old := range n.Status.Conditions {
				if old.Type == typ && old.Status == cond.Status {
					cond.LastTransitionTime = old.LastTransitionTime
				}
			}
			conds = append(conds, cond)
		}
		n.Status.Conditions = conds
		_, err = c.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// createRunningPod binds a running, Ready pod to node that tolerates the
// unreachable NoExecute taint for podToleration only, and not-ready for
// the usual 300s.
func createRunningPod(t *testing.T, c clientset.Interface, ns, node string) {
	t.Helper()
	ctx := context.Background()
	pod := boundPod("pod-"+node, node, v1.Toleration{
		Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To(int64(podToleration / time.Second)),
	}, v1.Toleration{
		Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute,
		TolerationSeconds: ptr.To[int64](300),
	})
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clusterState is what the test watches: every node's Ready status and
// taints, and every test pod's readiness and deletion.
type clusterState struct {
	ready     map[string]v1.ConditionStatus
	reason    map[string]string
	noExecute map[string][]string // node → NoExecute taint keys
	noSched   map[string][]string // node → NoSchedule taint keys
	podReady  map[string]bool     // pod → Ready condition True
	evicted   map[string]bool     // pod → deleted or being deleted
}

func observe(ctx context.Context, c clientset.Interface, ns string, nodes []string) (*clusterState, error) {
	s := &clusterState{
		ready: map[string]v1.ConditionStatus{}, reason: map[string]string{},
		noExecute: map[string][]string{}, noSched: map[string][]string{},
		podReady: map[string]bool{}, evicted: map[string]bool{},
	}
	for _, name := range nodes {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if r := readyCondition(n); r != nil {
			s.ready[name], s.reason[name] = r.Status, r.Reason
		}
		for _, taint := range n.Spec.Taints {
			switch taint.Effect {
			case v1.TaintEffectNoExecute:
				s.noExecute[name] = append(s.noExecute[name], taint.Key)
			case v1.TaintEffectNoSchedule:
				s.noSched[name] = append(s.noSched[name], taint.Key)
			}
		}
		pod := "pod-" + name
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s.evicted[pod] = true
		case err != nil:
			return nil, err
		default:
			s.evicted[pod] = p.DeletionTimestamp != nil
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodReady {
					s.podReady[pod] = cond.Status == v1.ConditionTrue
				}
			}
		}
	}
	return s, nil
}

func (s *clusterState) String() string {
	var b strings.Builder
	names := make([]string, 0, len(s.ready))
	for n := range s.ready {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s: Ready=%s(%s) NoExecute=%v NoSchedule=%v pod ready=%t evicted=%t; ",
			n, s.ready[n], s.reason[n], s.noExecute[n], s.noSched[n], s.podReady["pod-"+n], s.evicted["pod-"+n])
	}
	return b.String()
}

func (s *clusterState) hasNoExecute(node, key string) bool {
	for _, k := range s.noExecute[node] {
		if k == key {
			return true
		}
	}
	return false
}

func (s *clusterState) hasNoSchedule(node, key string) bool {
	for _, k := range s.noSched[node] {
		if k == key {
			return true
		}
	}
	return false
}

// waitState polls the cluster until cond holds.
func waitState(t *testing.T, c clientset.Interface, ns string, nodes []string, timeout time.Duration, what string, cond func(*clusterState) bool) *clusterState {
	t.Helper()
	var last *clusterState
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := observe(ctx, c, ns, nodes)
		if err != nil {
			// A loaded apiserver may fail a read now and then; poll on.
			lastErr = err
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v (last read error: %v); last seen: %v", timeout, what, err, lastErr, last)
	}
	return last
}

// zoneGauges reads the controller's node_collector_zone_health and
// node_collector_unhealthy_nodes_in_zone for a zone of disruptionRegion.
func zoneGauges(t *testing.T, zone string) (health, unhealthy float64, found bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	key := disruptionRegion + ":\x00:" + zone
	value := func(f *dto.MetricFamily) (float64, bool) {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "zone" && l.GetValue() == key {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	var okH, okU bool
	for _, f := range families {
		switch f.GetName() {
		case "node_collector_zone_health":
			health, okH = value(f)
		case "node_collector_unhealthy_nodes_in_zone":
			unhealthy, okU = value(f)
		}
	}
	return health, unhealthy, okH && okU
}

func waitZoneGauges(t *testing.T, zone string, health, unhealthy float64) {
	t.Helper()
	var h, u float64
	var found bool
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		h, u, found = zoneGauges(t, zone)
		return found && h == health && u == unhealthy, nil
	})
	if err != nil {
		t.Fatalf("zone %s: health %v%% with %v unhealthy nodes (found=%t), want %v%% and %v", zone, h, u, found, health, unhealthy)
	}
}

// When every node of every zone goes silent at once the controller blames
// itself (or the network in front of it), not the nodes: upstream's
// handleDisruption enters "master disruption mode", where every zone is
// FullDisruption and NoExecute tainting is stopped (rate 0; it also lifts
// NoExecute taints already there, which this test does not exercise), so
// no pod is evicted although every node is Unknown, marked unreachable
// (NoSchedule, which is not rate limited) and its pods marked NotReady. As soon as one node is Ready again the mode ends: zones get the
// limiter of their own state back (Normal, or the normal rate for a zone
// still fully disrupted while another is not) and the silent nodes are
// tainted unreachable:NoExecute and their pods evicted, one node per zone
// per token.
//
// The zone rate limiters have a burst of one token, and upstream queues
// nodes for tainting (processTaintBaseEviction) before the same pass's
// handleDisruption stops the limiters; its markNodeAsReachable works from
// the pass's node list, so a taint added in between would survive. To keep
// that window from mattering, a first phase spends each zone's token on
// an ordinary NotReady node (which also shows NoExecute tainting working
// in this setup) shortly before the nodes go silent.
func TestFullDisruptionStopsEvictions(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "full-disruption")

	// Zone states are computed over all nodes: none may be left over.
	framework.Eventually(t, 30*time.Second, "no nodes left by other tests", func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})

	zones := map[string]string{"a1": "zone-a", "a2": "zone-a", "b1": "zone-b", "b2": "zone-b"}
	nodes := []string{"a1", "a2", "b1", "b2"}
	for _, n := range nodes {
		createZonedNode(t, c, n, zones[n])
	}
	renewer := renewLeases(t, c, nodes...)
	runControllersWithRate(t, c, disruptionQPS)
	for _, n := range nodes {
		createRunningPod(t, c, ns, n)
	}

	waitState(t, c, ns, nodes, 30*time.Second, "all nodes Ready without taints", func(s *clusterState) bool {
		for _, n := range nodes {
			if s.ready[n] != v1.ConditionTrue || len(s.noExecute[n]) > 0 || len(s.noSched[n]) > 0 {
				return false
			}
		}
		return true
	})
	waitZoneGauges(t, "zone-a", 100, 0)
	waitZoneGauges(t, "zone-b", 100, 0)

	t.Log("phase 1: a1 and b1 report NotReady while their zones are healthy")
	postNodeReady(t, c, "a1", v1.ConditionFalse)
	postNodeReady(t, c, "b1", v1.ConditionFalse)
	waitState(t, c, ns, nodes, 30*time.Second, "not-ready:NoExecute on a1 and b1", func(s *clusterState) bool {
		return s.hasNoExecute("a1", v1.TaintNodeNotReady) && s.hasNoExecute("b1", v1.TaintNodeNotReady)
	})
	// Both zones' tokens are spent now; the next ones come tokenInterval later.
	tokensSpent := time.Now()
	postNodeReady(t, c, "a1", v1.ConditionTrue)
	postNodeReady(t, c, "b1", v1.ConditionTrue)
	waitState(t, c, ns, nodes, 30*time.Second, "a1 and b1 Ready without taints", func(s *clusterState) bool {
		return s.ready["a1"] == v1.ConditionTrue && s.ready["b1"] == v1.ConditionTrue &&
			len(s.noExecute["a1"])+len(s.noExecute["b1"])+len(s.noSched["a1"])+len(s.noSched["b1"]) == 0
	})

	t.Log("phase 2: every node goes silent at once")
	renewer.stop()
	state := waitState(t, c, ns, nodes, 60*time.Second, "every node Unknown, unreachable:NoSchedule, pods not ready", func(s *clusterState) bool {
		for _, n := range nodes {
			if s.ready[n] != v1.ConditionUnknown || s.reason[n] != "NodeStatusUnknown" ||
				!s.hasNoSchedule(n, v1.TaintNodeUnreachable) || s.podReady["pod-"+n] {
				return false
			}
		}
		return true
	})
	allUnknown := time.Now()
	t.Logf("the nodes went Unknown %s after the zones' tokens were spent", allUnknown.Sub(tokensSpent))
	waitZoneGauges(t, "zone-a", 0, 2)
	waitZoneGauges(t, "zone-b", 0, 2)
	// Tainting, were it still on, would resume with the zones' next
	// tokens (at most tokenInterval from now); watch until well past that
	// and the pods' toleration.
	watchUntil := allUnknown.Add(tokenInterval + podToleration + 5*time.Second)
	for time.Now().Before(watchUntil) {
		s, err := observe(context.Background(), c, ns, nodes)
		if err != nil {
			t.Logf("reading the cluster: %v", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, n := range nodes {
			if len(s.noExecute[n]) > 0 || s.evicted["pod-"+n] || s.ready[n] != v1.ConditionUnknown {
				t.Fatalf("in full disruption: %v", s)
			}
		}
		state = s
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("no NoExecute taint and no eviction while fully disrupted: %v", state)
	waitZoneGauges(t, "zone-a", 0, 2)
	waitZoneGauges(t, "zone-b", 0, 2)

	t.Log("phase 3: a1 comes back")
	renewLeases(t, c, "a1")
	postNodeReady(t, c, "a1", v1.ConditionTrue)
	waitZoneGauges(t, "zone-a", 50, 1)
	waitZoneGauges(t, "zone-b", 0, 2)
	// The limiters restart empty: the first taints come a token later.
	state = waitState(t, c, ns, nodes, tokenInterval+podToleration+45*time.Second,
		"a2 and a node of zone-b tainted unreachable:NoExecute and their pods evicted", func(s *clusterState) bool {
			zoneB := (s.hasNoExecute("b1", v1.TaintNodeUnreachable) && s.evicted["pod-b1"]) ||
				(s.hasNoExecute("b2", v1.TaintNodeUnreachable) && s.evicted["pod-b2"])
			return s.hasNoExecute("a2", v1.TaintNodeUnreachable) && s.evicted["pod-a2"] && zoneB
		})
	if state.ready["a1"] != v1.ConditionTrue || len(state.noExecute["a1"]) > 0 || len(state.noSched["a1"]) > 0 || state.evicted["pod-a1"] {
		t.Errorf("the node that came back was disturbed: %v", state)
	}
}
