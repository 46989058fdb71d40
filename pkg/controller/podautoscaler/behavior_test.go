package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func rules(window int32, selectPolicy autoscalingv2.ScalingPolicySelect, policies ...autoscalingv2.HPAScalingPolicy) *autoscalingv2.HPAScalingRules {
	return &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(window), SelectPolicy: ptr.To(selectPolicy), Policies: policies}
}

func podsPolicy(value, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: value, PeriodSeconds: period}
}

func percentPolicy(value, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PercentScalingPolicy, Value: value, PeriodSeconds: period}
}

// behaviorFixture runs an HPA with behavior over n cpu pods whose usage
// the test sets per reconciliation (target 50% of 1 CPU: 500m is on
// target, 1000m asks for twice the pods).
func behaviorFixture(t *testing.T, n int32, minReplicas, maxReplicas int32, b *autoscalingv2.HorizontalPodAutoscalerBehavior) *fixture {
	t.Helper()
	h := cpuHPA("web", minReplicas, maxReplicas, 50)
	h.Spec.Behavior = b
	f := newFixture(t, n, h)
	f.addPods(cpuPods(20)...)
	return f
}

// setUsage gives the first n pods usage and keeps the target at n replicas.
func (f *fixture) setUsage(n int32, usage int64) {
	levels := make([]int64, n)
	for i := range levels {
		levels[i] = usage
	}
	f.metrics.setResource(sameLevels(levels...))
	f.setReplicas(n)
	// Only the first n pods exist.
	idx := f.factory.Core().V1().Pods().Informer().GetIndexer()
	for _, p := range cpuPods(20)[n:] {
		_ = idx.Delete(p)
	}
	for _, p := range cpuPods(int(n)) {
		_ = idx.Add(p)
	}
}

func (f *fixture) reconcileOK() {
	f.t.Helper()
	if err := f.reconcile("web"); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) lastUpdate() int32 {
	u := f.scaleUpdates()
	if len(u) == 0 {
		return -1
	}
	return u[len(u)-1]
}

// A Pods policy limits what is added per period, counting the rescales
// already made in it.
func TestBehaviorScaleUpPodsPolicy(t *testing.T) {
	f := behaviorFixture(t, 3, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(1, 60)),
	})
	f.setUsage(3, 1000) // wants 6
	f.reconcileOK()
	if got := f.lastUpdate(); got != 4 {
		t.Fatalf("scaled to %d, want 4", got)
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")

	// Within the same period the pod allowance is used up.
	f.clock.Step(30 * time.Second)
	f.setUsage(4, 1000)
	f.reconcileOK()
	if n := len(f.scaleUpdates()); n != 1 {
		t.Fatalf("scaled again within the period: %v", f.scaleUpdates())
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, "ScaleUpLimit", "")

	f.clock.Step(31 * time.Second)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 5 {
		t.Fatalf("scaled to %d after the period, want 5", got)
	}
}

func TestBehaviorSelectPolicy(t *testing.T) {
	cases := []struct {
		name   string
		rules  *autoscalingv2.HPAScalingRules
		want   int32 // -1: no rescale
		reason string
	}{
		{"max change picks the larger", rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(1, 60), percentPolicy(100, 60)), 8, "DesiredWithinRange"},
		{"min change picks the smaller", rules(0, autoscalingv2.MinChangePolicySelect, podsPolicy(1, 60), percentPolicy(100, 60)), 5, "ScaleUpLimit"},
		{"percent rounds up", rules(0, autoscalingv2.MaxChangePolicySelect, percentPolicy(10, 60)), 5, "ScaleUpLimit"},
		{"disabled", rules(0, autoscalingv2.DisabledPolicySelect, podsPolicy(10, 60)), -1, "ScaleUpLimit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := behaviorFixture(t, 4, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: tc.rules})
			f.setUsage(4, 1000) // wants 8
			f.reconcileOK()
			if got := f.lastUpdate(); got != tc.want {
				t.Fatalf("scaled to %d, want %d", got, tc.want)
			}
			wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, map[bool]v1.ConditionStatus{true: v1.ConditionFalse, false: v1.ConditionTrue}[tc.reason == "DesiredWithinRange"], tc.reason, "")
		})
	}
}

func TestBehaviorScaleDownPercentPolicy(t *testing.T) {
	f := behaviorFixture(t, 8, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, percentPolicy(50, 60)),
	})
	f.setUsage(8, 50) // wants 2
	f.reconcileOK()
	if got := f.lastUpdate(); got != 4 {
		t.Fatalf("scaled to %d, want 4", got)
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")

	// The period started at 8: nothing more may go yet.
	f.clock.Step(10 * time.Second)
	f.setUsage(4, 50)
	f.reconcileOK()
	if n := len(f.scaleUpdates()); n != 1 {
		t.Fatalf("scaled again within the period: %v", f.scaleUpdates())
	}
	f.clock.Step(51 * time.Second)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 2 {
		t.Fatalf("scaled to %d, want 2", got)
	}
}

func TestBehaviorMinReplicasWinsOverPolicy(t *testing.T) {
	f := behaviorFixture(t, 8, 6, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, percentPolicy(50, 60)),
	})
	f.setUsage(8, 50)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 6 {
		t.Fatalf("scaled to %d, want 6", got)
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingLimited, v1.ConditionTrue, "TooFewReplicas", "the desired replica count is less than the minimum replica count")
}

// A scale-up stabilization window holds the count at the lowest
// recommendation of the window.
func TestBehaviorScaleUpStabilization(t *testing.T) {
	f := behaviorFixture(t, 4, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: rules(60, autoscalingv2.MaxChangePolicySelect, podsPolicy(10, 15)),
	})
	f.setUsage(4, 1000)
	f.reconcileOK()
	if n := len(f.scaleUpdates()); n != 0 {
		t.Fatalf("scaled within the window: %v", f.scaleUpdates())
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation")

	f.clock.Step(61 * time.Second)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 8 {
		t.Fatalf("scaled to %d, want 8", got)
	}
}

// A scale-down rule without a window of its own uses the controller's
// --horizontal-pod-autoscaler-downscale-stabilization.
func TestBehaviorDefaultScaleDownWindow(t *testing.T) {
	f := behaviorFixture(t, 4, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleDown: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{percentPolicy(100, 15)}},
	})
	f.ctrl.downscaleStabilisationWindow = time.Minute
	f.setUsage(4, 250) // wants 2
	f.reconcileOK()
	if n := len(f.scaleUpdates()); n != 0 {
		t.Fatalf("scaled within the window: %v", f.scaleUpdates())
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized", "")
	f.clock.Step(61 * time.Second)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 2 {
		t.Fatalf("scaled to %d, want 2", got)
	}
}

// The behavior's tolerances replace the controller's per direction.
func TestBehaviorTolerance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		up, down *resource.Quantity
		usage    int64
		want     int32
	}{
		{"controller tolerance up", nil, nil, 600, 6},
		{"wider scale-up tolerance", ptr.To(resource.MustParse("0.5")), nil, 600, -1},
		{"scale-down tolerance does not widen up", nil, ptr.To(resource.MustParse("0.5")), 600, 6},
		{"controller tolerance down", nil, nil, 400, 4},
		{"wider scale-down tolerance", nil, ptr.To(resource.MustParse("0.5")), 400, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(10, 15))
			up.Tolerance = tc.up
			down := rules(0, autoscalingv2.MaxChangePolicySelect, percentPolicy(100, 15))
			down.Tolerance = tc.down
			f := behaviorFixture(t, 5, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: up, ScaleDown: down})
			f.setUsage(5, tc.usage) // ratio 1.2 or 0.8
			f.reconcileOK()
			if got := f.lastUpdate(); got != tc.want {
				t.Fatalf("scaled to %d, want %d", got, tc.want)
			}
		})
	}
}

// A behavior that skipped API defaulting (a partial one) is completed
// rather than dereferenced.
func TestBehaviorPartialIsDefaulted(t *testing.T) {
	f := behaviorFixture(t, 2, 1, 20, &autoscalingv2.HorizontalPodAutoscalerBehavior{})
	f.setUsage(2, 2000) // wants 8; default policies allow max(+4, +100%) = 6
	f.reconcileOK()
	if got := f.lastUpdate(); got != 6 {
		t.Fatalf("scaled to %d, want 6", got)
	}
}

func TestScaleLimitsWithRules(t *testing.T) {
	now := testNow
	ev := func(change int32, ago time.Duration) timestampedScaleEvent {
		return timestampedScaleEvent{replicaChange: change, timestamp: now.Add(-ago)}
	}
	cases := []struct {
		name       string
		current    int32
		ups, downs []timestampedScaleEvent
		rules      *autoscalingv2.HPAScalingRules
		wantUp     int32
		wantDown   int32
	}{{
		name:     "no history",
		current:  10,
		rules:    rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 60), percentPolicy(50, 60)),
		wantUp:   15, // max(14, 15)
		wantDown: 5,  // min(6, 5)
	}, {
		name:     "min change",
		current:  10,
		rules:    rules(0, autoscalingv2.MinChangePolicySelect, podsPolicy(4, 60), percentPolicy(50, 60)),
		wantUp:   14,
		wantDown: 6,
	}, {
		// The period started before the rescales within it.
		name:     "history within the period",
		current:  10,
		ups:      []timestampedScaleEvent{ev(3, 30*time.Second), ev(5, 2*time.Minute)},
		downs:    []timestampedScaleEvent{ev(1, 10*time.Second)},
		rules:    rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 60)),
		wantUp:   12, // start 10-3+1 = 8
		wantDown: 4,
	}, {
		name:     "disabled",
		current:  10,
		rules:    rules(0, autoscalingv2.DisabledPolicySelect, podsPolicy(4, 60)),
		wantUp:   10,
		wantDown: 10,
	}, {
		name:     "percent down truncates",
		current:  5,
		rules:    rules(0, autoscalingv2.MaxChangePolicySelect, percentPolicy(30, 60)),
		wantUp:   7, // ceil(6.5)
		wantDown: 3, // int(3.5)
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := calculateScaleUpLimitWithScalingRules(tc.current, tc.ups, tc.downs, tc.rules, now); got != tc.wantUp {
				t.Errorf("scale-up limit = %d, want %d", got, tc.wantUp)
			}
			if got := calculateScaleDownLimitWithBehaviors(tc.current, tc.ups, tc.downs, tc.rules, now); got != tc.wantDown {
				t.Errorf("scale-down limit = %d, want %d", got, tc.wantDown)
			}
		})
	}
}

// Events older than the longest policy period are overwritten instead of
// piling up.
func TestStoreScaleEventReusesOutdated(t *testing.T) {
	f := newFixture(t, 1)
	b := &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 60)),
		ScaleDown: rules(0, autoscalingv2.MaxChangePolicySelect, podsPolicy(4, 30)),
	}
	f.ctrl.storeScaleEvent(b, "k", 1, 3)
	f.ctrl.storeScaleEvent(b, "k", 3, 2)
	f.clock.Step(61 * time.Second)
	f.ctrl.storeScaleEvent(b, "k", 2, 7)
	if ups := f.ctrl.scaleUpEvents["k"]; len(ups) != 1 || ups[0].replicaChange != 5 || ups[0].outdated {
		t.Errorf("scale-up events = %+v", ups)
	}
	f.ctrl.storeScaleEvent(b, "k", 7, 6)
	if downs := f.ctrl.scaleDownEvents["k"]; len(downs) != 1 || downs[0].replicaChange != 1 || !downs[0].timestamp.Equal(f.clock.Now()) {
		t.Errorf("scale-down events = %+v", downs)
	}
	// Without a behavior nothing is recorded.
	f.ctrl.storeScaleEvent(nil, "other", 1, 3)
	if _, ok := f.ctrl.scaleUpEvents["other"]; ok {
		t.Error("event stored without a behavior")
	}
}

func TestConvertDesiredReplicasWithRules(t *testing.T) {
	cases := []struct {
		current, desired, min, max int32
		want                       int32
		reason                     string
	}{
		{3, 5, 1, 10, 5, "DesiredWithinRange"},
		{3, 0, 1, 10, 1, "TooFewReplicas"},
		{3, 20, 1, 10, 6, "ScaleUpLimit"},
		{3, 20, 1, 5, 5, "TooManyReplicas"},
		{1, 20, 1, 10, 4, "ScaleUpLimit"},
		// The would-be limit is named even when the count is within it.
		{3, 2, 1, 10, 2, "DesiredWithinRange"},
	}
	for _, tc := range cases {
		got, reason, _ := convertDesiredReplicasWithRules(tc.current, tc.desired, tc.min, tc.max)
		if got != tc.want || reason != tc.reason {
			t.Errorf("convert(%d -> %d, [%d,%d]) = %d %s, want %d %s", tc.current, tc.desired, tc.min, tc.max, got, reason, tc.want, tc.reason)
		}
	}
}
