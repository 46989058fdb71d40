package daemonset

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// env is one test's world: a namespace, the DaemonSet controller, and
// nodes labelled with the namespace's name so that DaemonSets of other
// tests (which select on that label) never see them.
type env struct {
	t   *testing.T
	c   clientset.Interface
	ns  string
	ctx context.Context
}

// start gives a test a namespace, the controller, and a fake scheduler
// and kubelet for the namespace's pods.
func start(t *testing.T, prefix string) *env {
	t.Helper()
	// The default client rate limit (5 qps) would starve the controller
	// next to the fake kubelet's polling.
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := framework.CreateNamespace(t, c, prefix)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	factory := informers.NewSharedInformerFactory(c, 0)
	dsc, err := daemon.NewController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), c, flowcontrol.NewBackOff(time.Second, 15*time.Minute),
		daemon.Features{StaleControllerConsistency: true})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go dsc.Run(ctx, 2)
	e := &env{t: t, c: c, ns: ns, ctx: ctx}
	go e.node(ctx)
	return e
}

// node plays the scheduler and the kubelets for the namespace: it binds
// daemon pods where their node affinity pins them, marks bound pending pods
// Running and Ready, and finishes graceful deletions.
func (e *env) node(ctx context.Context) {
	kubelet := framework.Kubelet{Client: e.c}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pods, err := e.c.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		paused := map[string]bool{}
		if nodes, err := e.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: pausedLabel + "=true"}); err == nil {
			for _, n := range nodes.Items {
				paused[n.Name] = true
			}
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.DeletionTimestamp != nil:
				_ = e.c.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID}})
			case p.Spec.NodeName == "":
				target, err := util.GetTargetNodeName(p)
				if err != nil {
					continue
				}
				_ = e.c.CoreV1().Pods(e.ns).Bind(ctx, &v1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target:     v1.ObjectReference{Kind: "Node", Name: target},
				}, metav1.CreateOptions{})
			case p.Status.Phase == v1.PodPending && !paused[p.Spec.NodeName]:
				_, _ = kubelet.MarkRunningReady(ctx, p)
			}
		}
	}
}

// pausedLabel on a node stops its fake kubelet from starting pods.
const pausedLabel = "test.kcmclone/kubelet-paused"

// pauseKubelets stops (or restarts) the fake kubelet of the given nodes:
// pods bound there stay Pending.
func (e *env) pauseKubelets(pause bool, shorts ...string) {
	e.t.Helper()
	value := "null"
	if pause {
		value = `"true"`
	}
	for _, n := range shorts {
		e.patchNode(n, `{"metadata":{"labels":{"`+pausedLabel+`":`+value+`}}}`)
	}
}

// nodeName makes node names unique across tests.
func (e *env) nodeName(short string) string { return e.ns + "-" + short }

// addNode creates a node carrying the test's label plus lbls.
func (e *env) addNode(short string, lbls map[string]string, taints ...v1.Taint) *v1.Node {
	e.t.Helper()
	all := map[string]string{"test": e.ns}
	for k, v := range lbls {
		all[k] = v
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.nodeName(short), Labels: all}, Spec: v1.NodeSpec{Taints: taints}}
	created, err := e.c.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.c.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	// The TaintNodesByCondition admission plugin marks new nodes not-ready
	// (NoSchedule) until the node lifecycle controller sees them Ready.
	// Play that part: keep only the taints the test asked for.
	if !reflect.DeepEqual(created.Spec.Taints, n.Spec.Taints) {
		created.Spec.Taints = taints
		if created, err = e.c.CoreV1().Nodes().Update(e.ctx, created, metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return created
}

// patchNode applies a strategic merge patch to a node.
func (e *env) patchNode(short, patch string) {
	e.t.Helper()
	if _, err := e.c.CoreV1().Nodes().Patch(e.ctx, e.nodeName(short), types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// newDS is a DaemonSet selecting the test's nodes, with the API defaults
// left to the server (RollingUpdate, maxUnavailable 1, history limit 10).
func (e *env) newDS(name string) *apps.DaemonSet {
	lbls := map[string]string{"app": name}
	return &apps.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: apps.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: v1.PodSpec{
					NodeSelector: map[string]string{"test": e.ns},
					Containers:   []v1.Container{{Name: "agent", Image: "agent:1"}},
				},
			},
		},
	}
}

func (e *env) createDS(ds *apps.DaemonSet) *apps.DaemonSet {
	e.t.Helper()
	created, err := e.c.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

// patchDS applies a strategic merge patch (the controller writes status
// concurrently, so tests patch instead of updating).
func (e *env) patchDS(name, patch string) *apps.DaemonSet {
	e.t.Helper()
	ds, err := e.c.AppsV1().DaemonSets(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ds
}

func (e *env) pods(sel string) []v1.Pod {
	e.t.Helper()
	l, err := e.c.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// podNodes returns "node:phase" of every live pod of ds, sorted, with the
// test's node prefix removed.
func (e *env) podNodes(ds string) []string {
	var out []string
	for _, p := range e.pods("app=" + ds) {
		if p.DeletionTimestamp != nil {
			continue
		}
		n, err := util.GetTargetNodeName(&p)
		if err != nil {
			e.t.Fatalf("pod %s: %v", p.Name, err)
		}
		out = append(out, n[len(e.ns)+1:])
	}
	sort.Strings(out)
	return out
}

// waitPodsOn waits until ds has exactly one live pod on each of nodes and
// its status reports them all current, ready and up to date.
func (e *env) waitPodsOn(ds string, nodes ...string) *apps.DaemonSet {
	e.t.Helper()
	sort.Strings(nodes)
	want := fmt.Sprint(nodes)
	var cur *apps.DaemonSet
	var got string
	defer func() {
		if e.t.Failed() {
			e.dump(ds)
		}
	}()
	framework.Eventually(e.t, 60*time.Second, "pods of "+ds+" on "+want, func(ctx context.Context) (bool, error) {
		got = fmt.Sprint(e.podNodes(ds))
		if got != want {
			return false, nil
		}
		var err error
		cur, err = e.c.AppsV1().DaemonSets(e.ns).Get(ctx, ds, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n := int32(len(nodes))
		s := cur.Status
		return s.ObservedGeneration == cur.Generation && s.DesiredNumberScheduled == n && s.CurrentNumberScheduled == n &&
			s.NumberReady == n && s.UpdatedNumberScheduled == n && s.NumberAvailable == n && s.NumberMisscheduled == 0, nil
	})
	return cur
}

// dump logs what a failed wait saw.
func (e *env) dump(ds string) {
	cur, err := e.c.AppsV1().DaemonSets(e.ns).Get(context.Background(), ds, metav1.GetOptions{})
	if err == nil {
		e.t.Logf("DaemonSet %s generation %d status %+v", ds, cur.Generation, cur.Status)
	}
	l, _ := e.c.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{})
	for _, p := range l.Items {
		e.t.Logf("pod %s node %q phase %s deleting %v labels %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Labels)
	}
}
