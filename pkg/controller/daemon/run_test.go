package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/component-base/metrics/testutil"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/daemon/util"
	ctrltestutil "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// TestRunFollowsNodes drives the controller through (fake-backed)
// informers: pods on every node, a new node, a relabelled node.
func TestRunFollowsNodes(t *testing.T) {
	f := ctrltestutil.NewFixture(t)
	client, ctx := f.Client, f.Ctx
	ctrltestutil.NamePods(client)
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		// Play the scheduler: bind the pod where its affinity pins it.
		p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		node, err := util.GetTargetNodeName(p)
		if err != nil {
			return true, nil, err
		}
		p.Spec.NodeName = node
		return false, nil, nil
	})
	factory := f.Informers
	dsc, err := NewController(ctx, factory.Apps().V1().DaemonSets(), factory.Apps().V1().ControllerRevisions(),
		factory.Core().V1().Pods(), factory.Core().V1().Nodes(), client, flowcontrol.NewBackOff(time.Second, 15*time.Minute), v137Features)
	if err != nil {
		t.Fatal(err)
	}
	f.Run(func(ctx context.Context) { dsc.Run(ctx, 2) })

	for _, name := range []string{"a", "b"} {
		if _, err := client.CoreV1().Nodes().Create(ctx, newNode(name, map[string]string{"run": "yes"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds := newDS("ds")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"run": "yes"}
	if _, err := client.AppsV1().DaemonSets(testNS).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes := func(want ...string) {
		t.Helper()
		ctrltestutil.WaitUntil(t, fmt.Sprintf("pods on exactly %v", want), func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			got := map[string]bool{}
			for i := range pods.Items {
				node, err := util.GetTargetNodeName(&pods.Items[i])
				if err != nil {
					return false, err
				}
				got[node] = true
			}
			if len(got) != len(want) || len(pods.Items) != len(want) {
				return false, nil
			}
			for _, w := range want {
				if !got[w] {
					return false, nil
				}
			}
			cur, err := client.AppsV1().DaemonSets(testNS).Get(ctx, "ds", metav1.GetOptions{})
			return err == nil && cur.Status.DesiredNumberScheduled == int32(len(want)) && cur.Status.CurrentNumberScheduled == int32(len(want)), err
		})
	}
	waitNodes("a", "b")

	if _, err := client.CoreV1().Nodes().Create(ctx, newNode("c", map[string]string{"run": "yes"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes("a", "b", "c")

	// Node a stops matching: its pod goes (the fake API deletes at once).
	a, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	a.Labels = nil
	if _, err := client.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes("b", "c")
}

// fakeConsistency reports a lagging cache until released.
type fakeConsistency struct{ lagging bool }

func (f *fakeConsistency) WroteAt(types.NamespacedName, types.UID, schema.GroupResource, string) {}
func (f *fakeConsistency) Clear(types.NamespacedName, types.UID)                                 {}
func (f *fakeConsistency) EnsureReady(types.NamespacedName) error {
	if f.lagging {
		return &controller.ConsistencyError{ReadRV: "1", WroteRV: "2", GroupResource: podResource}
	}
	return nil
}

func TestStaleCacheSkipsSync(t *testing.T) {
	f := newFixture(t, newNode("n", nil))
	ds := newDS("ds")
	f.addDS(ds)
	store := &fakeConsistency{lagging: true}
	f.dsc.consistency = store
	before, _ := testutil.GetCounterMetricValue(staleSyncSkips.WithLabelValues("", "pods"))
	if err := f.sync(ds); err == nil {
		t.Fatal("sync ran on a stale cache")
	}
	if len(f.pc.Templates) != 0 || len(f.client.Actions()) != 0 {
		t.Errorf("acted on a stale cache: %d creates, %d API calls", len(f.pc.Templates), len(f.client.Actions()))
	}
	after, _ := testutil.GetCounterMetricValue(staleSyncSkips.WithLabelValues("", "pods"))
	if after-before != 1 {
		t.Errorf("daemonset_controller_stale_sync_skips_total{resource=pods} grew by %v, want 1", after-before)
	}
	store.lagging = false
	f.mustSync(ds)
	if len(f.pc.Templates) != 1 {
		t.Errorf("created %d pods once caught up, want 1", len(f.pc.Templates))
	}
}

func TestQueueNames(t *testing.T) {
	if queueName != "daemonset" || nodeUpdateQueueName != "daemonset-node-updates" {
		t.Errorf("queue names %q, %q differ from upstream's workqueue metric labels", queueName, nodeUpdateQueueName)
	}
}
