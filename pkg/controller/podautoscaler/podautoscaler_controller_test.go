package podautoscaler

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const cpuReason = "cpu resource utilization (percentage of request)"

// Three pods at 50% of their CPU against a 30% target: 5 replicas.
func TestScaleUpOnCPUUtilization(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 30))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(300, 500, 700)

	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("scale updates = %v, want [5]", got)
	}
	wantEvents(t, f.events(), "Normal SuccessfulRescale New size: 5; reason: "+cpuReason+" above target")

	hpa := f.hpa("web")
	st := hpa.Status
	if st.CurrentReplicas != 3 || st.DesiredReplicas != 5 {
		t.Errorf("replicas current %d desired %d, want 3 and 5", st.CurrentReplicas, st.DesiredReplicas)
	}
	if st.LastScaleTime == nil || !st.LastScaleTime.Time.Equal(testNow) {
		t.Errorf("lastScaleTime = %v, want %v", st.LastScaleTime, testNow)
	}
	if st.ObservedGeneration == nil || *st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %v, want 3", st.ObservedGeneration)
	}
	if len(st.CurrentMetrics) != 1 || st.CurrentMetrics[0].Type != autoscalingv2.ResourceMetricSourceType {
		t.Fatalf("currentMetrics = %+v", st.CurrentMetrics)
	}
	m := st.CurrentMetrics[0].Resource
	if m.Name != v1.ResourceCPU || *m.Current.AverageUtilization != 50 || m.Current.AverageValue.String() != "1" {
		t.Errorf("cpu status = %s %d%% %s, want cpu 50%% 1", m.Name, *m.Current.AverageUtilization, m.Current.AverageValue)
	}
	wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to 5")
	wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from "+cpuReason)
	wantCondition(t, hpa, autoscalingv2.ScalingLimited, v1.ConditionFalse, "DesiredWithinRange", "the desired count is within the acceptable range")
	if got := f.monitor.reconciles; len(got) != 1 || got[0] != "scale_up/none" {
		t.Errorf("reconciliations = %v", got)
	}
	if got := f.monitor.computations; len(got) != 1 || got[0] != "scale_up/none/Resource" {
		t.Errorf("computations = %v", got)
	}
	if f.monitor.desired[testNamespace+"/web"] != 5 {
		t.Errorf("desired replicas metric = %v", f.monitor.desired)
	}
}

func TestNoScaleWithinTolerance(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(520, 500, 490)

	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Fatalf("scale updates = %v, want none", got)
	}
	wantEvents(t, f.events())
	hpa := f.hpa("web")
	if hpa.Status.DesiredReplicas != 3 || hpa.Status.LastScaleTime != nil {
		t.Errorf("status = %+v", hpa.Status)
	}
	wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	if got := f.monitor.reconciles; len(got) != 1 || got[0] != "none/none" {
		t.Errorf("reconciliations = %v", got)
	}
}

// A reconciliation that changes nothing does not write the status again.
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	for i := 0; i < 3; i++ {
		if err := f.reconcile("web"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.statusWrites(); n != 1 {
		t.Errorf("status writes = %d, want 1", n)
	}
	// A new sample value changes the status: written.
	f.metrics.setResource(sameLevels(510, 510, 510))
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if n := f.statusWrites(); n != 2 {
		t.Errorf("status writes = %d, want 2", n)
	}
}

func TestLimits(t *testing.T) {
	cases := []struct {
		name             string
		current          int32
		min, max, target int32
		usage            int64
		want             int32
		reason, message  string
	}{{
		name: "capped by maxReplicas", current: 3, min: 1, max: 5, target: 10, usage: 1000, want: 5,
		reason: "TooManyReplicas", message: "the desired replica count is more than the maximum replica count",
	}, {
		// Without a behavior a step may at most double (or reach 4).
		name: "capped by the scale-up rate", current: 1, min: 1, max: 20, target: 10, usage: 1000, want: 4,
		reason: "ScaleUpLimit", message: "the desired replica count is increasing faster than the maximum scale rate",
	}, {
		name: "doubling", current: 3, min: 1, max: 20, target: 10, usage: 1000, want: 6,
		reason: "ScaleUpLimit", message: "the desired replica count is increasing faster than the maximum scale rate",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.current, cpuHPA("web", tc.min, tc.max, tc.target))
			f.addPods(cpuPods(int(tc.current))...)
			levels := make([]int64, tc.current)
			for i := range levels {
				levels[i] = tc.usage
			}
			f.metrics.resource = sameLevels(levels...)
			if err := f.reconcile("web"); err != nil {
				t.Fatal(err)
			}
			if got := f.scaleUpdates(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("scale updates = %v, want [%d]", got, tc.want)
			}
			wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, tc.reason, tc.message)
		})
	}
}

// A lower proposal waits for the stabilization window: the highest
// recommendation of the window (the initial replica count) wins until it
// has aged out.
func TestDownscaleStabilizationAndMinReplicas(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 2, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(50, 50, 50)

	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Fatalf("scaled within the stabilization window: %v", got)
	}
	hpa := f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
	wantCondition(t, hpa, autoscalingv2.ScalingLimited, v1.ConditionFalse, "DesiredWithinRange", "")

	f.clock.Step(4 * time.Minute)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Fatalf("scaled within the stabilization window: %v", got)
	}

	// Past the 5 minute window the proposal (1) applies, raised to min.
	f.clock.Step(time.Minute + time.Second)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("scale updates = %v, want [2]", got)
	}
	wantEvents(t, f.events(), "Normal SuccessfulRescale New size: 2; reason: All metrics below target")
	hpa = f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.ScalingLimited, v1.ConditionTrue, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
	if got := f.monitor.reconciles; got[len(got)-1] != "scale_down/none" {
		t.Errorf("reconciliations = %v", got)
	}
	// A computation's action compares with the last reported count (none
	// yet at the first one).
	if got := f.monitor.computations; len(got) != 3 || got[0] != "scale_up/none/Resource" || got[1] != "scale_down/none/Resource" {
		t.Errorf("computations = %v", got)
	}
}

// Without minReplicas the floor is 1.
func TestDefaultMinReplicas(t *testing.T) {
	h := cpuHPA("web", 1, 10, 50)
	h.Spec.MinReplicas = nil
	h.Spec.Metrics = []autoscalingv2.MetricSpec{podsMetric("qps", "10")}
	f := newFixture(t, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.custom = []int64{0, 0, 0}
	f.reconcileOK()
	f.clock.Step(6 * time.Minute)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 1 {
		t.Fatalf("scaled to %d, want 1", got)
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, "TooFewReplicas", "")
}

// Expired recommendations are overwritten, so the history stays bounded.
func TestRecommendationsBounded(t *testing.T) {
	f := newFixture(t, 3)
	for i := 0; i < 10; i++ {
		f.ctrl.stabilizeRecommendation("k", int32(i))
		f.clock.Step(6 * time.Minute)
	}
	if n := len(f.ctrl.recommendations["k"]); n != 1 {
		t.Errorf("%d recommendations kept, want 1", n)
	}
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   rules(60, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 60)),
		ScaleDown: rules(120, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 60)),
	}
	for i := 0; i < 10; i++ {
		f.ctrl.stabilizeRecommendationWithBehaviors(normalizationArg{Key: "b", ScaleUpBehavior: b.ScaleUp, ScaleDownBehavior: b.ScaleDown, CurrentReplicas: 3, DesiredReplicas: int32(i)})
		f.clock.Step(3 * time.Minute)
	}
	if n := len(f.ctrl.recommendations["b"]); n != 1 {
		t.Errorf("%d behavior recommendations kept, want 1", n)
	}
}

// The stabilization window is the controller's setting.
func TestDownscaleStabilizationWindowSetting(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.ctrl.downscaleStabilisationWindow = 30 * time.Second
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(250, 250, 250)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(31 * time.Second)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("scale updates = %v, want [2]", got)
	}
}

func TestReplicasOutsideBounds(t *testing.T) {
	cases := []struct {
		name    string
		current int32
		want    int32
		reason  string
	}{
		{"above max", 12, 10, "Current number of replicas above Spec.MaxReplicas"},
		{"below min", 1, 2, "Current number of replicas below Spec.MinReplicas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.current, cpuHPA("web", 2, 10, 50))
			if err := f.reconcile("web"); err != nil {
				t.Fatal(err)
			}
			if got := f.scaleUpdates(); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("scale updates = %v, want [%d]", got, tc.want)
			}
			wantEvents(t, f.events(), "Normal SuccessfulRescale New size: "+strconv.Itoa(int(tc.want))+"; reason: "+tc.reason)
			if len(f.metrics.requests) != 0 {
				t.Errorf("metrics were fetched: %v", f.metrics.requests)
			}
			hpa := f.hpa("web")
			if hpa.Status.DesiredReplicas != tc.want || hpa.Status.CurrentReplicas != tc.current || hpa.Status.CurrentMetrics != nil {
				t.Errorf("status = %+v", hpa.Status)
			}
			if condition(hpa, autoscalingv2.ScalingActive) != nil {
				t.Errorf("ScalingActive set without computing metrics")
			}
		})
	}
}

// A workload scaled to zero by someone else stays there.
func TestScalingDisabledAtZero(t *testing.T) {
	f := newFixture(t, 0, cpuHPA("web", 1, 10, 50))
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Fatalf("scale updates = %v", got)
	}
	hpa := f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
	wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	if hpa.Status.DesiredReplicas != 0 || hpa.Status.CurrentReplicas != 0 {
		t.Errorf("status = %+v", hpa.Status)
	}
}

func TestFailedGetScale(t *testing.T) {
	cases := []struct {
		name      string
		mutate    func(*fixture, *autoscalingv2.HorizontalPodAutoscaler)
		wantErr   string
		wantEvent string
		wantLabel string
	}{{
		name:      "missing target",
		mutate:    func(f *fixture, _ *autoscalingv2.HorizontalPodAutoscaler) { f.target.missing = true },
		wantErr:   `failed to query scale subresource for Deployment/test-namespace/some-deployment: deployments.apps "some-deployment" not found`,
		wantEvent: `Warning FailedGetScale deployments.apps "some-deployment" not found`,
		wantLabel: "none/internal",
	}, {
		name: "unknown kind",
		mutate: func(_ *fixture, h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.ScaleTargetRef.Kind = "Widget"
		},
		wantErr:   `unable to determine resource for scale target reference: no matches for apps/, Resource=Widget`,
		wantEvent: `Warning FailedGetScale no matches for apps/, Resource=Widget`,
		wantLabel: "none/internal",
	}, {
		// A bad apiVersion is the spec's fault.
		name: "invalid apiVersion",
		mutate: func(_ *fixture, h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.ScaleTargetRef.APIVersion = "a/b/c"
		},
		wantErr:   "invalid API version in scale target reference: unexpected GroupVersion string: a/b/c",
		wantEvent: "Warning FailedGetScale unexpected GroupVersion string: a/b/c",
		wantLabel: "none/spec",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cpuHPA("web", 1, 10, 50)
			f := newFixture(t, 3)
			tc.mutate(f, h)
			if _, err := f.client.AutoscalingV2().HorizontalPodAutoscalers(testNamespace).Create(f.ctx, h, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.addHPA(h)
			err := f.reconcile("web")
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			wantEvents(t, f.events(), tc.wantEvent)
			hpa := f.hpa("web")
			msg := strings.TrimPrefix(tc.wantEvent, "Warning FailedGetScale ")
			wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: "+msg)
			if got := f.monitor.reconciles; len(got) != 1 || got[0] != tc.wantLabel {
				t.Errorf("reconciliations = %v, want [%s]", got, tc.wantLabel)
			}
		})
	}
}

func TestSelectorProblems(t *testing.T) {
	cases := []struct {
		name       string
		selector   string
		wantEvents []string
		reason     string
		message    string
	}{{
		name:       "missing",
		selector:   "",
		wantEvents: []string{"Warning SelectorRequired selector is required", "Warning FailedComputeMetricsReplicas selector is required"},
		reason:     "InvalidSelector",
		message:    "the HPA target's scale is missing a selector",
	}, {
		name:     "unparsable",
		selector: "name in (",
		wantEvents: []string{
			"Warning InvalidSelector couldn't convert selector into a corresponding internal selector object: ",
			"Warning FailedComputeMetricsReplicas couldn't convert selector",
		},
		reason:  "InvalidSelector",
		message: "",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
			f.target.scale.Status.Selector = tc.selector
			err := f.reconcile("web")
			if err == nil || !strings.HasPrefix(err.Error(), "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/some-deployment: ") {
				t.Fatalf("err = %v", err)
			}
			wantEvents(t, f.events(), tc.wantEvents...)
			hpa := f.hpa("web")
			wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, tc.reason, tc.message)
			if hpa.Status.CurrentReplicas != 3 {
				t.Errorf("currentReplicas = %d, want 3", hpa.Status.CurrentReplicas)
			}
		})
	}
}

func TestAmbiguousSelector(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("first", 1, 10, 50), cpuHPA("second", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	if err := f.reconcile("first"); err != nil {
		t.Fatalf("first HPA: %v", err)
	}
	f.events()
	err := f.reconcile("second")
	if err == nil {
		t.Fatal("second HPA over the same pods must fail")
	}
	wantEvents(t, f.events(), "Warning AmbiguousSelector pods by selector name=test-pod are controlled by more than one HPA (e.g. [", "Warning FailedComputeMetricsReplicas")
	hpa := f.hpa("second")
	c := condition(hpa, autoscalingv2.ScalingActive)
	if c == nil || c.Status != v1.ConditionFalse || c.Reason != "AmbiguousSelector" ||
		!strings.Contains(c.Message, "test-namespace/first") || !strings.Contains(c.Message, "test-namespace/second") {
		t.Errorf("ScalingActive = %+v", c)
	}
}

func TestMetricFailure(t *testing.T) {
	h := cpuHPA("web", 1, 10, 50)
	h.Status.DesiredReplicas = 4
	f := newFixture(t, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.err = errors.New("boom")

	err := f.reconcile("web")
	inner := "failed to get cpu utilization: unable to get metrics for resource cpu: boom"
	wantErr := "failed to compute desired number of replicas based on listed metrics for Deployment/test-namespace/some-deployment: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: " + inner
	if err == nil || err.Error() != wantErr {
		t.Fatalf("err = %v\nwant %s", err, wantErr)
	}
	wantEvents(t, f.events(),
		"Warning FailedGetResourceMetric "+inner,
		"Warning FailedComputeMetricsReplicas invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: "+inner)
	hpa := f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "FailedGetResourceMetric", "the HPA was unable to compute the replica count: "+inner)
	// The observed count is refreshed, the last decision kept.
	if hpa.Status.CurrentReplicas != 3 || hpa.Status.DesiredReplicas != 4 {
		t.Errorf("status = %+v", hpa.Status)
	}
	if got := f.monitor.computations; len(got) != 1 || got[0] != "none/internal/Resource" {
		t.Errorf("computations = %v", got)
	}
	if got := f.monitor.reconciles; len(got) != 1 || got[0] != "none/internal" {
		t.Errorf("reconciliations = %v", got)
	}
}

func podsMetric(name string, average string) autoscalingv2.MetricSpec {
	q := resource.MustParse(average)
	return autoscalingv2.MetricSpec{
		Type: autoscalingv2.PodsMetricSourceType,
		Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: name},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
		},
	}
}

// When one metric fails, the others may still scale up (the failing one
// could only ask for more), but not down.
func TestPartialMetricFailure(t *testing.T) {
	t.Run("scale up", func(t *testing.T) {
		h := cpuHPA("web", 1, 10, 30)
		h.Spec.Metrics = append(h.Spec.Metrics, podsMetric("qps", "10"))
		f := newFixture(t, 3, h)
		f.addPods(cpuPods(3)...)
		f.metrics.resource = sameLevels(300, 500, 700) // custom metrics: none

		err := f.reconcile("web")
		if err == nil || err.Error() != "invalid metrics (1 invalid out of 2), first error is: failed to get pods metric value: unable to get metric qps: no metrics returned from custom metrics API" {
			t.Fatalf("err = %v", err)
		}
		if got := f.scaleUpdates(); len(got) != 1 || got[0] != 5 {
			t.Fatalf("scale updates = %v, want [5]", got)
		}
		wantEvents(t, f.events(), "Warning FailedGetPodsMetric unable to get metric qps: no metrics returned from custom metrics API", "Normal SuccessfulRescale New size: 5")
		hpa := f.hpa("web")
		wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionTrue, "ValidMetricFound", "")
		if len(hpa.Status.CurrentMetrics) != 2 || hpa.Status.CurrentMetrics[1].Type != "" {
			t.Errorf("currentMetrics = %+v, want the failed one empty", hpa.Status.CurrentMetrics)
		}
		if got := f.monitor.reconciles; got[0] != "scale_up/internal" {
			t.Errorf("reconciliations = %v", got)
		}
	})
	t.Run("no scale down", func(t *testing.T) {
		h := cpuHPA("web", 1, 10, 50)
		h.Spec.Metrics = append(h.Spec.Metrics, podsMetric("qps", "10"))
		f := newFixture(t, 3, h)
		f.addPods(cpuPods(3)...)
		f.metrics.resource = sameLevels(100, 100, 100)
		f.clock.Step(10 * time.Minute)

		if err := f.reconcile("web"); err == nil {
			t.Fatal("want an error")
		}
		if got := f.scaleUpdates(); len(got) != 0 {
			t.Fatalf("scale updates = %v", got)
		}
		wantCondition(t, f.hpa("web"), autoscalingv2.ScalingActive, v1.ConditionFalse, "FailedGetPodsMetric", "the HPA was unable to compute the replica count: unable to get metric qps: no metrics returned from custom metrics API")
	})
}

func TestScaleUpdateConflictIsRetried(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 30))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(300, 500, 700)
	f.target.conflict = 1
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.scaleUpdates(); len(got) != 1 || got[0] != 5 {
		t.Fatalf("scale updates = %v, want [5]", got)
	}
	if f.target.gets != 2 {
		t.Errorf("scale reads = %d, want 2 (one fresh read after the conflict)", f.target.gets)
	}
}

func TestScaleUpdateFailure(t *testing.T) {
	h := cpuHPA("web", 1, 10, 30)
	h.Status.DesiredReplicas = 3
	f := newFixture(t, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(300, 500, 700)
	f.target.failWith = errors.New("nope")

	err := f.reconcile("web")
	if err == nil || err.Error() != "failed to rescale Deployment/test-namespace/some-deployment: nope" {
		t.Fatalf("err = %v", err)
	}
	wantEvents(t, f.events(), "Warning FailedRescale New size: 5; reason: "+cpuReason+" above target; error: nope")
	hpa := f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: nope")
	if hpa.Status.DesiredReplicas != 3 || hpa.Status.LastScaleTime != nil || len(hpa.Status.CurrentMetrics) != 1 {
		t.Errorf("status = %+v", hpa.Status)
	}
}

func TestStatusUpdateFailure(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	f.client.PrependReactor("update", "horizontalpodautoscalers", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is sad")
	})
	err := f.reconcile("web")
	if err == nil || err.Error() != "failed to update status for web: etcd is sad" {
		t.Fatalf("err = %v", err)
	}
	wantEvents(t, f.events(), "Warning FailedUpdateStatus etcd is sad")
}

func TestDeletedHPAIsForgotten(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	key := testNamespace + "/web"
	if len(f.ctrl.recommendations[key]) == 0 {
		t.Fatal("no recommendation recorded")
	}
	if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Delete(f.hpa("web")); err != nil {
		t.Fatal(err)
	}
	deleted, err := f.ctrl.reconcileKey(f.ctx, key)
	if !deleted || err != nil {
		t.Fatalf("reconcileKey = %v, %v; want deleted", deleted, err)
	}
	if _, ok := f.ctrl.recommendations[key]; ok {
		t.Error("recommendations of a deleted HPA kept")
	}
}

// The controller's pod lister is the label-indexed one (every HPA lists
// its target's pods each sync period).
func TestPodsListedThroughTheLabelsIndex(t *testing.T) {
	f := newFixture(t, 3)
	if _, ok := f.factory.Core().V1().Pods().Informer().GetIndexer().GetIndexers()[controller.PodLabelsIndex]; !ok {
		t.Fatalf("the controller did not add the %s index to the pod informer", controller.PodLabelsIndex)
	}
}
