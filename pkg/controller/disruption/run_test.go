package disruption

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// TestRunConverges drives the controller through informers on a fake
// clientset: the budget's status is written through the status
// subresource, and a stale DisruptionTarget condition is reset by the
// stale-condition worker (timeout 0 here).
func TestRunConverges(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	dc := NewControllerInternal(ctx,
		factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets(),
		client, nil, &scalefake.FakeScaleClient{}, &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}},
		clock.RealClock{}, 0)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { dc.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	pdb := minAvailablePDB("pdb", intstr.FromInt32(1))
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	victim := readyPod("victim")
	victim.Status.Conditions = append(victim.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	for _, p := range []*v1.Pod{readyPod("a"), victim} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var got *policy.PodDisruptionBudget
	testutil.WaitUntil(t, "status with 2 healthy and 1 disruption allowed", func(ctx context.Context) (bool, error) {
		var err error
		got, err = client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb", metav1.GetOptions{})
		return err == nil && got.Status.CurrentHealthy == 2 && got.Status.DisruptionsAllowed == 1, err
	})
	testutil.WaitUntil(t, "the stale DisruptionTarget reset", func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := disruptionTargetCondition(p)
		return c != nil && c.Status == v1.ConditionFalse, nil
	})
	for _, a := range client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "poddisruptionbudgets" && a.GetSubresource() != "status" {
			t.Errorf("budget written outside the status subresource: %v", a)
		}
	}
}

// Run returns, with its queues shut down, when ctx ends before the caches
// ever sync.
func TestRunStopsWithoutCacheSync(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	dc := NewController(ctx,
		factory.Core().V1().Pods(), factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(), factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(), factory.Apps().V1().StatefulSets(),
		client, nil, &scalefake.FakeScaleClient{}, &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}})
	cancel() // informers never started
	dc.Run(ctx, 1)
	if !dc.queue.ShuttingDown() || !dc.recheckQueue.ShuttingDown() || !dc.stalePodDisruptionQueue.ShuttingDown() {
		t.Fatal("queues left running")
	}
}
