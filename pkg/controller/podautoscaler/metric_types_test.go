package podautoscaler

import (
	"fmt"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Each metric source proposes replicas its own way and reports its own
// status and name (the name shows in the rescale reason).
func TestMetricSources(t *testing.T) {
	extSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"queue": "a"}}
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	cases := []struct {
		name       string
		spec       autoscalingv2.MetricSpec
		setup      func(*fixture)
		want       int32
		wantReason string
		wantStatus autoscalingv2.MetricStatus
		wantCalls  []string
	}{{
		name: "pods average value",
		spec: podsMetric("qps", "10"),
		setup: func(f *fixture) {
			f.metrics.custom = []int64{20000, 20000, 20000}
		},
		want:       6,
		wantReason: "pods metric qps above target",
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
			Metric: autoscalingv2.MetricIdentifier{Name: "qps"}, Current: autoscalingv2.MetricValueStatus{AverageValue: milli(20000)}}},
		wantCalls: []string{"raw qps test-namespace name=test-pod "},
	}, {
		name: "object value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: *testDeploymentRef,
			Metric:          autoscalingv2.MetricIdentifier{Name: "qps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "get"}}},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("10")},
		}},
		setup:      func(f *fixture) { f.metrics.custom = []int64{20000} },
		want:       6,
		wantReason: "Deployment metric qps above target",
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: *testDeploymentRef,
			Metric:          autoscalingv2.MetricIdentifier{Name: "qps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "get"}}},
			Current:         autoscalingv2.MetricValueStatus{Value: milli(20000)}}},
		wantCalls: []string{"object qps test-namespace Deployment/some-deployment verb=get"},
	}, {
		// Upstream names this source an external metric.
		name: "object average value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: *testDeploymentRef,
			Metric:          autoscalingv2.MetricIdentifier{Name: "qps"},
			Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("10")},
		}},
		setup:      func(f *fixture) { f.metrics.custom = []int64{60000} },
		want:       6,
		wantReason: "external metric qps(nil) above target",
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
			DescribedObject: *testDeploymentRef,
			Metric:          autoscalingv2.MetricIdentifier{Name: "qps"},
			Current:         autoscalingv2.MetricValueStatus{AverageValue: milli(20000)}}},
	}, {
		name: "external value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_length", Selector: extSelector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: q("10")},
		}},
		setup:      func(f *fixture) { f.metrics.external = []int64{15000, 5000} },
		want:       6,
		wantReason: fmt.Sprintf("external metric queue_length(%+v) above target", extSelector),
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: "queue_length", Selector: extSelector},
			Current: autoscalingv2.MetricValueStatus{Value: milli(20000)}}},
		wantCalls: []string{"external queue_length test-namespace queue=a"},
	}, {
		name: "external average value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_length", Selector: extSelector},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("5")},
		}},
		setup:      func(f *fixture) { f.metrics.external = []int64{30000} },
		want:       6,
		wantReason: fmt.Sprintf("external metric queue_length(%+v) above target", extSelector),
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
			Metric:  autoscalingv2.MetricIdentifier{Name: "queue_length", Selector: extSelector},
			Current: autoscalingv2.MetricValueStatus{AverageValue: milli(10000)}}},
	}, {
		name: "container resource utilization",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
			Name: v1.ResourceCPU, Container: "container2",
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
		}},
		setup:      func(f *fixture) { f.metrics.resource = [][]int64{{0, 1000}, {0, 1000}, {0, 1000}} },
		want:       6,
		wantReason: "cpu container resource utilization (percentage of request) above target",
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
			Name: v1.ResourceCPU, Container: "container2",
			Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](100), AverageValue: milli(1000)}}},
		wantCalls: []string{"resource cpu test-namespace name=test-pod container2"},
	}, {
		// Memory is reported in binary units, like metrics-server does.
		name: "memory average value",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name:   v1.ResourceMemory,
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: q("1Mi")},
		}},
		setup: func(f *fixture) {
			mi := int64(1024 * 1024 * 1000)
			f.metrics.resource = sameLevels(mi, mi, mi)
		},
		want:       6,
		wantReason: "memory resource above target",
		wantStatus: autoscalingv2.MetricStatus{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
			Name: v1.ResourceMemory, Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse("2Mi"))}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cpuHPA("web", 1, 10, 50)
			h.Spec.Metrics = []autoscalingv2.MetricSpec{tc.spec}
			f := newFixture(t, 3, h)
			f.addPods(cpuPods(3)...)
			tc.setup(f)
			if err := f.reconcile("web"); err != nil {
				t.Fatal(err)
			}
			if got := f.lastUpdate(); got != tc.want {
				t.Fatalf("scaled to %d, want %d", got, tc.want)
			}
			wantEvents(t, f.events(), fmt.Sprintf("Normal SuccessfulRescale New size: %d; reason: %s", tc.want, tc.wantReason))
			st := f.hpa("web").Status.CurrentMetrics
			if len(st) != 1 || !equality.Semantic.DeepEqual(st[0], tc.wantStatus) {
				t.Errorf("currentMetrics = %+v\nwant %+v", st, tc.wantStatus)
			}
			if st[0].Type == autoscalingv2.ResourceMetricSourceType && st[0].Resource.Current.AverageValue.String() != tc.wantStatus.Resource.Current.AverageValue.String() {
				t.Errorf("average value printed %s, want %s", st[0].Resource.Current.AverageValue, tc.wantStatus.Resource.Current.AverageValue)
			}
			if tc.wantCalls != nil && fmt.Sprint(f.metrics.requests) != fmt.Sprint(tc.wantCalls) {
				t.Errorf("metric requests = %q, want %q", f.metrics.requests, tc.wantCalls)
			}
			if got := f.monitor.computations; len(got) != 1 || got[0] != "scale_up/none/"+string(tc.spec.Type) {
				t.Errorf("computations = %v", got)
			}
		})
	}
}

func TestInvalidMetricSpecs(t *testing.T) {
	badSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}
	cases := []struct {
		name      string
		spec      autoscalingv2.MetricSpec
		reason    string
		wantLabel string
	}{{
		name:      "unknown type",
		spec:      autoscalingv2.MetricSpec{Type: "Magic"},
		reason:    "InvalidMetricSourceType",
		wantLabel: "none/spec/Magic",
	}, {
		name: "object without target",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: *testDeploymentRef, Metric: autoscalingv2.MetricIdentifier{Name: "qps"}}},
		reason:    "FailedGetObjectMetric",
		wantLabel: "none/internal/Object",
	}, {
		name: "object with bad selector",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
			DescribedObject: *testDeploymentRef, Metric: autoscalingv2.MetricIdentifier{Name: "qps", Selector: badSelector}}},
		reason:    "FailedGetObjectMetric",
		wantLabel: "none/internal/Object",
	}, {
		name: "external without target",
		spec: autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "q"}}},
		reason:    "FailedGetExternalMetric",
		wantLabel: "none/internal/External",
	}, {
		name:      "resource without target",
		spec:      autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: v1.ResourceCPU}},
		reason:    "FailedGetResourceMetric",
		wantLabel: "none/internal/Resource",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cpuHPA("web", 1, 10, 50)
			h.Spec.Metrics = []autoscalingv2.MetricSpec{tc.spec}
			f := newFixture(t, 3, h)
			f.addPods(cpuPods(3)...)
			if err := f.reconcile("web"); err == nil {
				t.Fatal("want an error")
			}
			wantCondition(t, f.hpa("web"), autoscalingv2.ScalingActive, v1.ConditionFalse, tc.reason, "")
			if got := f.monitor.computations; len(got) != 1 || got[0] != tc.wantLabel {
				t.Errorf("computations = %v, want [%s]", got, tc.wantLabel)
			}
		})
	}
}

// The largest proposal wins and names the rescale reason.
func TestLargestProposalWins(t *testing.T) {
	h := cpuHPA("web", 1, 10, 50)
	h.Spec.Metrics = append(h.Spec.Metrics, podsMetric("qps", "10"))
	f := newFixture(t, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(1000, 1000, 1000) // 6
	f.metrics.custom = []int64{15000, 15000, 15000}   // 5
	if err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, f.events(), "Normal SuccessfulRescale New size: 6; reason: "+cpuReason+" above target")
	if n := len(f.hpa("web").Status.CurrentMetrics); n != 2 {
		t.Errorf("%d metric statuses, want 2", n)
	}
}
