package podautoscaler

import (
	"context"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // what the app imports
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// TestRun drives the controller through its work loop and real (fake
// backed) informers: the HPA is picked up, its target scaled, the status
// written and an event sent to the API; then the periodic resync sees the
// next sample.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	scales := &fakescale.FakeScaleClient{}
	target := &scaleTarget{scale: &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: testDeploymentRef.Name, Namespace: testNamespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 3},
		Status:     autoscalingv1.ScaleStatus{Replicas: 3, Selector: "name=" + testPodPrefix},
	}}
	target.install(scales)
	m := &fakeMetrics{resource: sameLevels(300, 500, 700)}

	factory := informers.NewSharedInformerFactory(client, time.Hour)
	a := NewController(ctx, client.CoreV1(), scales, client.AutoscalingV2(), testMapper(), m,
		factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(),
		50*time.Millisecond, 0, testTolerance, testCPUInit, testReadyDelay, v137Features)
	clk := testingclock.NewFakeClock(testNow)
	a.clock, a.replicaCalc.clock = clk, clk
	pods := cpuPods(5)
	createPods := func(pods ...*v1.Pod) {
		t.Helper()
		for _, p := range pods {
			if _, err := client.CoreV1().Pods(testNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	createPods(pods[:3]...)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { a.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	if _, err := client.AutoscalingV2().HorizontalPodAutoscalers(testNamespace).Create(ctx, cpuHPA("web", 1, 10, 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		testutil.WaitFor(t, what, cond)
	}
	poll("the first rescale", func() bool {
		h, err := client.AutoscalingV2().HorizontalPodAutoscalers(testNamespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && h.Status.DesiredReplicas == 5
	})
	poll("the event", func() bool {
		evs, err := client.CoreV1().Events(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "SuccessfulRescale" && e.Source.Component == "horizontal-pod-autoscaler" && strings.HasPrefix(e.Message, "New size: 5;") {
				return true
			}
		}
		return false
	})

	// The next sync period picks up the new pods and samples without any
	// HPA event: 5 pods at 90% against 30% want 15, capped at 10.
	createPods(pods[3:]...)
	m.setResource(sameLevels(900, 900, 900, 900, 900))
	poll("the resync", func() bool {
		u := target.scaleUpdatesLocked()
		return len(u) >= 2 && u[len(u)-1] == 10
	})
}

func (s *scaleTarget) scaleUpdatesLocked() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.updates...)
}

// The metric families and the queue name are upstream's.
func TestMetricsExposed(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 30))
	f.ctrl.monitor = promMonitor{}
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(300, 500, 700)
	f.reconcileOK()
	promMonitor{}.syncSkipped(hpaResource)
	f.ctrl.queue.Add("x")

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"horizontal_pod_autoscaler_controller_reconciliations_total":               {"action": "scale_up", "error": "none"},
		"horizontal_pod_autoscaler_controller_reconciliation_duration_seconds":     {"action": "scale_up", "error": "none"},
		"horizontal_pod_autoscaler_controller_metric_computation_total":            {"action": "scale_up", "error": "none", "metric_type": "Resource"},
		"horizontal_pod_autoscaler_controller_metric_computation_duration_seconds": {"action": "scale_up", "error": "none", "metric_type": "Resource"},
		"horizontal_pod_autoscaler_controller_num_horizontal_pod_autoscalers":      {},
		"horizontal_pod_autoscaler_controller_desired_replicas":                    {"namespace": testNamespace, "hpa_name": "web"},
		"horizontal_pod_autoscaler_controller_stale_sync_skips_total":              {"group": "autoscaling", "resource": "horizontalpodautoscalers"},
		"workqueue_adds_total": {"name": "horizontalpodautoscaler"},
	}
	for _, fam := range families {
		labels, ok := want[fam.GetName()]
		if !ok {
			continue
		}
		for _, m := range fam.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				delete(want, fam.GetName())
				break
			}
		}
	}
	for name, labels := range want {
		t.Errorf("no %s%v exposed", name, labels)
	}
}
