// Package nodelifecycle tests the node lifecycle and taint eviction
// controllers together against a real apiserver.
package nodelifecycle

import (
	"context"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/tainteviction"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const gracePeriod = 4 * time.Second

// runControllers runs both controllers in-process, with a short grace
// period, until the test ends.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	nlc, err := nodelifecycle.NewController(ctx,
		factory.Coordination().V1().Leases(), factory.Core().V1().Pods(), factory.Core().V1().Nodes(),
		factory.Apps().V1().DaemonSets(), c,
		time.Second, gracePeriod, gracePeriod, 0.1, 0.01, 50, 0.55, nodelifecycle.Features{LeaseCircuitBreaker: true})
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

// createReadyNode registers a node as a kubelet does: create (admission
// adds node.kubernetes.io/not-ready:NoSchedule), then post Ready=True.
func createReadyNode(t *testing.T, c clientset.Interface, name string) *v1.Node {
	t.Helper()
	ctx := context.Background()
	n, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if !hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoSchedule) {
		t.Fatalf("admission did not add the not-ready taint: %v", n.Spec.Taints)
	}
	now := metav1.Now()
	n.Status.Conditions = []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
	}
	n, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// heartbeat renews the node's Lease every second until the test ends, as
// a healthy kubelet does.
func heartbeat(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	leases := c.CoordinationV1().Leases(v1.NamespaceNodeLease)
	l, err := leases.Create(ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if nl, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
				l = nl
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = leases.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func hasTaint(n *v1.Node, key string, effect v1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func boundPod(name, nodeName string, tolerations ...v1.Toleration) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			NodeName:    nodeName,
			Containers:  []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations: tolerations,
		},
	}
}

// A node that stops posting status loses Ready (Unknown), gets the
// unreachable taints, its pods are marked NotReady and, once their
// tolerationSeconds run out, evicted.
func TestNodeLifecycle(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "nodelifecycle")
	runControllers(t, c)

	// A healthy node in the same zone, so the zone is not fully disrupted
	// (which would stop all NoExecute tainting).
	createReadyNode(t, c, "healthy-node")
	heartbeat(t, c, "healthy-node")
	createReadyNode(t, c, "silent-node")

	framework.Eventually(t, 30*time.Second, "not-ready:NoSchedule taint lifted from Ready nodes", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"healthy-node", "silent-node"} {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || hasTaint(n, v1.TaintNodeNotReady, v1.TaintEffectNoSchedule) {
				return false, err
			}
		}
		return true, nil
	})

	// Default admission gives pods 300s tolerations for not-ready and
	// unreachable; a short explicit one makes the test observe eviction.
	tol := v1.Toleration{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](2)}
	pod, err := c.CoreV1().Pods(ns).Create(context.Background(), boundPod("victim", "silent-node", tol), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = v1.PodRunning
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	survivor, err := c.CoreV1().Pods(ns).Create(context.Background(), boundPod("survivor", "healthy-node"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var sawNotReadyPod bool
	framework.Eventually(t, 60*time.Second, "silent node Unknown with unreachable taints", func(ctx context.Context) (bool, error) {
		if p, err := c.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{}); err == nil {
			for _, cond := range p.Status.Conditions {
				if cond.Type == v1.PodReady && cond.Status == v1.ConditionFalse {
					sawNotReadyPod = true
				}
			}
		}
		n, err := c.CoreV1().Nodes().Get(ctx, "silent-node", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r := readyCondition(n)
		return r != nil && r.Status == v1.ConditionUnknown && r.Reason == "NodeStatusUnknown" &&
			hasTaint(n, v1.TaintNodeUnreachable, v1.TaintEffectNoSchedule) &&
			hasTaint(n, v1.TaintNodeUnreachable, v1.TaintEffectNoExecute), nil
	})

	framework.Eventually(t, 60*time.Second, "pod on the silent node evicted", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady && cond.Status == v1.ConditionFalse {
				sawNotReadyPod = true
			}
		}
		// Without a kubelet the pod stays terminating; being deleted counts.
		return p.DeletionTimestamp != nil, nil
	})
	if !sawNotReadyPod {
		t.Error("the pod on the silent node was never marked Ready=False")
	}

	if n, err := c.CoreV1().Nodes().Get(context.Background(), "healthy-node", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if r := readyCondition(n); r == nil || r.Status != v1.ConditionTrue || len(n.Spec.Taints) != 0 {
		t.Errorf("heartbeating node changed: ready=%v taints=%v", r, n.Spec.Taints)
	}
	if p, err := c.CoreV1().Pods(ns).Get(context.Background(), survivor.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod on the healthy node was touched: %v", err)
	}
}

// A pod that does not tolerate a NoExecute taint is evicted right away,
// with a DisruptionTarget condition saying why.
func TestUntoleratedNoExecuteTaintEvicts(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "taint-eviction")
	runControllers(t, c)

	n := createReadyNode(t, c, "tainted-node")
	heartbeat(t, c, "tainted-node")
	if _, err := c.CoreV1().Pods(ns).Create(context.Background(), boundPod("victim", "tainted-node"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "taint added", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "example.com/maintenance", Effect: v1.TaintEffectNoExecute})
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	})
	framework.Eventually(t, 30*time.Second, "untolerating pod evicted", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil || p.DeletionTimestamp == nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.DisruptionTarget && cond.Reason == "DeletionByTaintManager" {
				return true, nil
			}
		}
		t.Errorf("pod deleted without DisruptionTarget condition: %+v", p.Status.Conditions)
		return true, nil
	})
	framework.Eventually(t, 30*time.Second, "TaintManagerEviction event", func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "TaintManagerEviction" && e.Message == "Marking for deletion Pod "+ns+"/victim" &&
				e.Source.Component == "taint-eviction-controller" {
				return true, nil
			}
		}
		return false, nil
	})
}
