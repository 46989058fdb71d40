package podautoscaler

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	T       = v1.ConditionTrue
	F       = v1.ConditionFalse
	running = v1.PodRunning
	pending = v1.PodPending
	failed  = v1.PodFailed
)

type resourceCase struct {
	name       string
	pods       podSet
	levels     [][]int64
	podNames   []string
	container  string
	target     int32
	tolerances *Tolerances

	wantReplicas    int32
	wantUtilization int32
	wantRaw         int64
	wantErr         string
}

func runResourceCases(t *testing.T, cases []resourceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{resource: tc.levels, resourceNames: tc.podNames}
			calc := newTestCalc(tc.pods.build(), m)
			tol := defaultTolerances
			if tc.tolerances != nil {
				tol = *tc.tolerances
			}
			replicas, util, raw, ts, err := calc.GetResourceReplicas(context.Background(), tc.pods.replicas, tc.target, v1.ResourceCPU, tol, testNamespace, testSelector, tc.container)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if replicas != tc.wantReplicas || util != tc.wantUtilization || raw != tc.wantRaw {
				t.Errorf("got (replicas %d, utilization %d, raw %d), want (%d, %d, %d)", replicas, util, raw, tc.wantReplicas, tc.wantUtilization, tc.wantRaw)
			}
			if !ts.Equal(m.timestamp) {
				t.Errorf("timestamp = %v, want %v", ts, m.timestamp)
			}
		})
	}
}

// The cases and expectations follow upstream's replica calculator tests.
func TestGetResourceReplicasScale(t *testing.T) {
	runResourceCases(t, []resourceCase{{
		name:         "scale up",
		pods:         podSet{replicas: 3, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(300, 500, 700),
		target:       30,
		wantReplicas: 5, wantUtilization: 50, wantRaw: containersPer * 500,
	}, {
		name:         "scale up: container metric",
		pods:         podSet{replicas: 3, requests: cpuRequests(3, "1.0")},
		container:    "container2",
		levels:       [][]int64{{1000, 300}, {1000, 500}, {1000, 700}},
		target:       30,
		wantReplicas: 5, wantUtilization: 50, wantRaw: 500,
	}, {
		name:         "scale up: unready pod scales less",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, T}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(300, 500, 700),
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: containersPer * 600,
	}, {
		name:         "scale up: hot-CPU container scales less",
		pods:         podSet{replicas: 3, start: []metav1.Time{hotStart, coolStart, coolStart}, requests: cpuRequests(3, "1.0")},
		container:    "container2",
		levels:       [][]int64{{0, 300}, {0, 500}, {0, 700}},
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: 600,
	}, {
		name:         "scale up: hot-CPU pod scales less",
		pods:         podSet{replicas: 3, start: []metav1.Time{hotStart, coolStart, coolStart}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(300, 500, 700),
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: containersPer * 600,
	}, {
		name:         "no scale: unready pods ignored",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{T, F, F}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(400, 500, 700),
		target:       30,
		wantReplicas: 3, wantUtilization: 40, wantRaw: containersPer * 400,
	}, {
		name:         "no scale: hot-CPU pods ignored",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{T, F, F}, start: []metav1.Time{coolStart, hotStart, hotStart}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(400, 500, 700),
		target:       30,
		wantReplicas: 3, wantUtilization: 40, wantRaw: containersPer * 400,
	}, {
		name:         "scale up: failed pods ignored",
		pods:         podSet{replicas: 2, ready: []v1.ConditionStatus{T, T, F, F}, phase: []v1.PodPhase{running, running, failed, failed}, requests: cpuRequests(4, "1.0")},
		levels:       sameLevels(500, 700),
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: containersPer * 600,
	}, {
		name:         "scale up: failed pods ignored with missing container metric",
		pods:         podSet{replicas: 2, ready: []v1.ConditionStatus{T, T, F, F}, phase: []v1.PodPhase{running, running, failed, failed}, requests: cpuRequests(4, "1.0")},
		container:    "container2",
		levels:       [][]int64{{1000, 500}, {9000, 700}, {1000}, {9000}},
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: 600,
	}, {
		name:         "scale up: pods being deleted are ignored",
		pods:         podSet{replicas: 2, ready: []v1.ConditionStatus{T, T, F, F}, phase: []v1.PodPhase{running, running, running, running}, deleting: []bool{false, false, true, true}, requests: cpuRequests(4, "1.0")},
		levels:       sameLevels(500, 700),
		target:       30,
		wantReplicas: 4, wantUtilization: 60, wantRaw: containersPer * 600,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5, requests: cpuRequests(5, "1.0")},
		levels:       sameLevels(100, 300, 500, 250, 250),
		target:       50,
		wantReplicas: 3, wantUtilization: 28, wantRaw: containersPer * 280,
	}, {
		name:         "scale down: container metric",
		pods:         podSet{replicas: 5, requests: cpuRequests(5, "1.0")},
		container:    "container2",
		levels:       [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}},
		target:       50,
		wantReplicas: 3, wantUtilization: 28, wantRaw: 280,
	}, {
		name:         "scale down: exclude unready pods",
		pods:         podSet{replicas: 5, ready: []v1.ConditionStatus{T, T, T, F, F}, requests: cpuRequests(5, "1.0")},
		levels:       sameLevels(100, 300, 500, 250, 250),
		target:       50,
		wantReplicas: 2, wantUtilization: 30, wantRaw: containersPer * 300,
	}, {
		name:         "scale down: exclude unscheduled pods",
		pods:         podSet{replicas: 5, ready: []v1.ConditionStatus{T, F, F, F, F}, phase: []v1.PodPhase{running, pending, pending, pending, pending}, requests: cpuRequests(5, "1.0")},
		levels:       sameLevels(100),
		target:       50,
		wantReplicas: 1, wantUtilization: 10, wantRaw: containersPer * 100,
	}, {
		name:         "scale down: ignore hot-CPU pods",
		pods:         podSet{replicas: 5, start: []metav1.Time{coolStart, coolStart, coolStart, hotStart, hotStart}, requests: cpuRequests(5, "1.0")},
		levels:       sameLevels(100, 300, 500, 250, 250),
		target:       50,
		wantReplicas: 2, wantUtilization: 30, wantRaw: containersPer * 300,
	}, {
		name:         "scale down: failed pods ignored",
		pods:         podSet{replicas: 5, ready: []v1.ConditionStatus{T, T, T, T, T, F, F}, phase: []v1.PodPhase{running, running, running, running, running, failed, failed}, requests: cpuRequests(7, "1.0")},
		levels:       sameLevels(100, 300, 500, 250, 250),
		target:       50,
		wantReplicas: 3, wantUtilization: 28, wantRaw: containersPer * 280,
	}, {
		// Regression: a terminating pod that still runs must not count.
		name:         "scale down: still-running pods being deleted are ignored",
		pods:         podSet{replicas: 5, ready: []v1.ConditionStatus{T, T, T, T, T, F, F}, phase: []v1.PodPhase{running, running, running, running, running, running, running}, deleting: []bool{false, false, false, false, false, true, true}, requests: cpuRequests(7, "1.0")},
		container:    "container2",
		levels:       [][]int64{{1000, 100}, {1000, 300}, {1000, 500}, {1000, 250}, {1000, 250}},
		target:       50,
		wantReplicas: 3, wantUtilization: 28, wantRaw: 280,
	}})
}

func TestGetResourceReplicasTolerance(t *testing.T) {
	mixed := []string{"0.9", "1.0", "1.1"}
	runResourceCases(t, []resourceCase{{
		name:         "within default tolerance",
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(1010, 1030, 1020),
		target:       100,
		wantReplicas: 3, wantUtilization: 102, wantRaw: containersPer * 1020,
	}, {
		name:         "outside 0% tolerance",
		tolerances:   &Tolerances{0, 0},
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(909, 1010, 1111),
		target:       100,
		wantReplicas: 4, wantUtilization: 101, wantRaw: containersPer * 1010,
	}, {
		name:         "within 200% scale-up tolerance",
		tolerances:   &Tolerances{testTolerance, 2},
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(1890, 1910, 1900),
		target:       100,
		wantReplicas: 3, wantUtilization: 190, wantRaw: containersPer * 1900,
	}, {
		name:         "outside 8% scale-up tolerance (superfluous scale-down tolerance)",
		tolerances:   &Tolerances{2, .08},
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(1100, 1080, 1090),
		target:       100,
		wantReplicas: 4, wantUtilization: 109, wantRaw: containersPer * 1090,
	}, {
		name:         "within 36% scale-down tolerance",
		tolerances:   &Tolerances{.36, testTolerance},
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(660, 640, 650),
		target:       100,
		wantReplicas: 3, wantUtilization: 65, wantRaw: containersPer * 650,
	}, {
		name:         "outside 34% scale-down tolerance",
		tolerances:   &Tolerances{.34, testTolerance},
		pods:         podSet{replicas: 3, requests: mixed},
		levels:       sameLevels(660, 640, 650),
		target:       100,
		wantReplicas: 2, wantUtilization: 65, wantRaw: containersPer * 650,
	}})
}

func TestGetResourceReplicasMissingMetrics(t *testing.T) {
	runResourceCases(t, []resourceCase{{
		// Samples of pods the lister does not know are not counted.
		name:         "superfluous metrics counted",
		pods:         podSet{replicas: 4, requests: cpuRequests(4, "1.0")},
		levels:       sameLevels(4000, 9500, 3000, 7000, 3200, 2000),
		target:       100,
		wantReplicas: 24, wantUtilization: 587, wantRaw: containersPer * 5875,
	}, {
		name:         "some pods missing metrics scales down",
		pods:         podSet{replicas: 4, requests: cpuRequests(4, "1.0")},
		levels:       sameLevels(400, 95),
		target:       100,
		wantReplicas: 3, wantUtilization: 24, wantRaw: 495,
	}, {
		name:         "no change: metric equal to target",
		pods:         podSet{replicas: 2, requests: cpuRequests(2, "1.0")},
		levels:       sameLevels(1000),
		target:       100,
		wantReplicas: 2, wantUtilization: 100, wantRaw: containersPer * 1000,
	}, {
		// Missing pods count as 0% on a scale-up: 190% over two pods is
		// within tolerance of doing nothing.
		name:         "no change: metric above target",
		pods:         podSet{replicas: 2, requests: cpuRequests(2, "1.0")},
		levels:       sameLevels(1900),
		target:       100,
		wantReplicas: 2, wantUtilization: 190, wantRaw: containersPer * 1900,
	}, {
		// Missing pods count as 100% on a scale-down.
		name:         "no change: metric below target",
		pods:         podSet{replicas: 2, requests: cpuRequests(2, "1.0")},
		levels:       sameLevels(600),
		target:       100,
		wantReplicas: 2, wantUtilization: 60, wantRaw: containersPer * 600,
	}, {
		name:         "no change: unready pod metric missing",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, T}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(100, 450),
		target:       50,
		wantReplicas: 3, wantUtilization: 45, wantRaw: containersPer * 450,
	}, {
		name:         "no change: hot-CPU pod metric missing",
		pods:         podSet{replicas: 3, start: []metav1.Time{hotStart, coolStart, coolStart}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(100, 450),
		target:       50,
		wantReplicas: 3, wantUtilization: 45, wantRaw: containersPer * 450,
	}, {
		name:         "scale up: unready pod metric missing",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, T}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(100, 2000),
		target:       50,
		wantReplicas: 4, wantUtilization: 200, wantRaw: containersPer * 2000,
	}, {
		name:         "scale up: hot-CPU pod metric missing",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, T}, start: []metav1.Time{hotStart, coolStart, coolStart}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(100, 2000),
		target:       50,
		wantReplicas: 4, wantUtilization: 200, wantRaw: containersPer * 2000,
	}, {
		name:         "scale down: unready pod metric missing",
		pods:         podSet{replicas: 4, ready: []v1.ConditionStatus{F, T, T, T}, requests: cpuRequests(4, "1.0")},
		levels:       sameLevels(100, 100, 100),
		target:       50,
		wantReplicas: 3, wantUtilization: 10, wantRaw: containersPer * 100,
	}, {
		// Missing pods count as the target, not 100%, when it is above.
		name:         "scale down: target over 100",
		pods:         podSet{replicas: 4, ready: []v1.ConditionStatus{F, T, T, T}, requests: []string{"1.0", "1.0", "2.0", "2.0"}},
		levels:       sameLevels(200, 100, 100),
		target:       300,
		wantReplicas: 2, wantUtilization: 6, wantRaw: containersPer * 100,
	}, {
		name:         "rolling update with maxSurge: extra pod missing metric",
		pods:         podSet{replicas: 2, phase: []v1.PodPhase{running, running, running}, requests: cpuRequests(3, "1.0")},
		levels:       sameLevels(100, 100),
		target:       50,
		wantReplicas: 2, wantUtilization: 10, wantRaw: containersPer * 100,
	}, {
		name:     "disjoint pod and metric names",
		pods:     podSet{replicas: 1, requests: cpuRequests(1, "1.0")},
		levels:   sameLevels(100),
		podNames: []string{"an-older-pod-name"},
		target:   100,
		wantErr:  "no metrics returned matched known pods",
	}, {
		name:    "no metrics returned from metrics API",
		pods:    podSet{replicas: 4, requests: cpuRequests(3, "1.0")},
		target:  100,
		wantErr: "unable to get metrics for resource cpu: no metrics returned from resource metrics API",
	}, {
		name:    "missing CPU request on container",
		pods:    podSet{replicas: 1},
		levels:  sameLevels(200),
		target:  100,
		wantErr: "missing request for cpu in container container1 of Pod test-pod-0",
	}, {
		name:    "all pods unready",
		pods:    podSet{replicas: 2, ready: []v1.ConditionStatus{F, F}, requests: cpuRequests(2, "1.0")},
		levels:  sameLevels(100, 100),
		target:  50,
		wantErr: "did not receive metrics for targeted pods (pods might be unready)",
	}, {
		name:    "no pods",
		pods:    podSet{},
		levels:  sameLevels(100),
		target:  50,
		wantErr: "no pods returned by selector while calculating replica count",
	}})
}

// A utilization ratio just past the tolerance scales; one just inside does
// not.
func TestGetResourceReplicasToleranceBoundary(t *testing.T) {
	const pods = 10
	// Every pod uses 150m of a 300m request: 50% utilization.
	requests := []string{"400m", "200m", "310m", "290m", "302m", "298m", "301m", "299m", "300m", "300m"}
	levels := make([]int64, pods)
	for i := range levels {
		levels[i] = 150
	}
	// 1/(2*0.9) is the target utilization where 50% is exactly the
	// scale-down tolerance away.
	edge := 1 / (2 * (1 - testTolerance))

	target := int32((edge + .01) * 100)
	calc := newTestCalc(podSet{replicas: pods, requests: requests}.build(), &fakeMetrics{resource: sameLevels(levels...)})
	replicas, util, _, _, err := calc.GetResourceReplicas(context.Background(), pods, target, v1.ResourceCPU, defaultTolerances, testNamespace, testSelector, "")
	wantReplicas := int32(math.Ceil(0.5 / (edge + .01) * pods))
	if err != nil || replicas != wantReplicas || util != 50 {
		t.Errorf("past tolerance: got %d replicas at %d%% (%v), want %d", replicas, util, err, wantReplicas)
	}

	target = int32((edge + .004) * 100)
	replicas, _, _, _, err = calc.GetResourceReplicas(context.Background(), pods, target, v1.ResourceCPU, defaultTolerances, testNamespace, testSelector, "")
	if err != nil || replicas != pods {
		t.Errorf("within tolerance: got %d replicas (%v), want %d", replicas, err, pods)
	}
}

type plainCase struct {
	name       string
	pods       podSet
	values     []int64
	target     int64
	tolerances *Tolerances

	wantReplicas int32
	wantUsage    int64
	wantErr      string
}

func (tc plainCase) tol() Tolerances {
	if tc.tolerances != nil {
		return *tc.tolerances
	}
	return defaultTolerances
}

func TestGetMetricReplicas(t *testing.T) {
	cases := []plainCase{{
		name:         "scale up",
		pods:         podSet{replicas: 3},
		values:       []int64{20000, 10000, 30000},
		target:       15000,
		wantReplicas: 4, wantUsage: 20000,
	}, {
		// Readiness only matters for CPU: a not-ready pod's custom metric
		// still counts.
		name:         "scale up: unready hot-CPU pod scales less",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{T, T, F}, start: []metav1.Time{coolStart, coolStart, hotStart}},
		values:       []int64{50000, 10000, 30000},
		target:       15000,
		wantReplicas: 6, wantUsage: 30000,
	}, {
		name:         "scale up: unready hot-CPU pods avoid scale-down",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, F}, start: []metav1.Time{hotStart, coolStart, hotStart}},
		values:       []int64{50000, 15000, 30000},
		target:       15000,
		wantReplicas: 7, wantUsage: 31666,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5},
		values:       []int64{12000, 12000, 12000, 12000, 12000},
		target:       20000,
		wantReplicas: 3, wantUsage: 12000,
	}, {
		name:         "within default tolerance",
		pods:         podSet{replicas: 3},
		values:       []int64{20000, 21000, 21000},
		target:       20000,
		wantReplicas: 3, wantUsage: 20666,
	}, {
		name:         "outside configurable 1% tolerance",
		tolerances:   &Tolerances{testTolerance, .01},
		pods:         podSet{replicas: 3},
		values:       []int64{20000, 21000, 21000},
		target:       20000,
		wantReplicas: 4, wantUsage: 20666,
	}, {
		name:         "no change: missing metrics",
		pods:         podSet{replicas: 5},
		values:       []int64{20000, 19000, 21000},
		target:       20000,
		wantReplicas: 5, wantUsage: 20000,
	}, {
		// Missing pods count as exactly on target on a scale-down.
		name:         "scale down: missing pods count as on target",
		pods:         podSet{replicas: 4},
		values:       []int64{5000, 5000},
		target:       20000,
		wantReplicas: 3, wantUsage: 5000,
	}, {
		name:         "rolling update with maxSurge: extra pod missing metric",
		pods:         podSet{replicas: 2, phase: []v1.PodPhase{running, running, running}},
		values:       []int64{10000, 10000},
		target:       17000,
		wantReplicas: 2, wantUsage: 10000,
	}, {
		name:    "no metrics",
		pods:    podSet{replicas: 2},
		target:  100,
		wantErr: "unable to get metric qps: no metrics returned from custom metrics API",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{custom: tc.values}
			calc := newTestCalc(tc.pods.build(), m)
			replicas, usage, _, err := calc.GetMetricReplicas(context.Background(), tc.pods.replicas, tc.target, "qps", tc.tol(), testNamespace, testSelector, testSelector)
			checkPlain(t, tc, replicas, usage, err)
		})
	}
}

func checkPlain(t *testing.T, tc plainCase, replicas int32, usage int64, err error) {
	t.Helper()
	if tc.wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if replicas != tc.wantReplicas || usage != tc.wantUsage {
		t.Errorf("got (replicas %d, usage %d), want (%d, %d)", replicas, usage, tc.wantReplicas, tc.wantUsage)
	}
}

func TestGetRawResourceReplicas(t *testing.T) {
	// Average value targets treat missing pods like custom metrics do.
	calc := newTestCalc(podSet{replicas: 4}.build(), &fakeMetrics{resource: sameLevels(100, 100)})
	replicas, usage, _, err := calc.GetRawResourceReplicas(context.Background(), 4, 800, v1.ResourceMemory, defaultTolerances, testNamespace, testSelector, "")
	if err != nil || replicas != 3 || usage != 200 {
		t.Errorf("got (%d, %d, %v), want (3, 200)", replicas, usage, err)
	}
}

var testDeploymentRef = &autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: "some-deployment"}

func TestGetObjectMetricReplicas(t *testing.T) {
	cases := []plainCase{{
		name:         "scale up",
		pods:         podSet{replicas: 3},
		values:       []int64{20000},
		target:       15000,
		wantReplicas: 4, wantUsage: 20000,
	}, {
		name:         "scale up: very large metric saturates replicas to MaxInt32",
		pods:         podSet{replicas: 3},
		values:       []int64{math.MaxInt64},
		target:       1,
		wantReplicas: math.MaxInt32, wantUsage: math.MaxInt64,
	}, {
		// Only ready pods are multiplied.
		name:         "scale up: ignores unready pods",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, F}},
		values:       []int64{50000},
		target:       10000,
		wantReplicas: 5, wantUsage: 50000,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5},
		values:       []int64{12000},
		target:       20000,
		wantReplicas: 3, wantUsage: 12000,
	}, {
		name:         "within default tolerance",
		pods:         podSet{replicas: 3},
		values:       []int64{20666},
		target:       20000,
		wantReplicas: 3, wantUsage: 20666,
	}, {
		name:         "outside configurable 1% tolerance",
		tolerances:   &Tolerances{testTolerance, .01},
		pods:         podSet{replicas: 3},
		values:       []int64{20666},
		target:       20000,
		wantReplicas: 4, wantUsage: 20666,
	}, {
		name:    "no pods",
		pods:    podSet{},
		values:  []int64{30000},
		target:  10000,
		wantErr: "unable to calculate ready pods: no pods returned by selector while calculating replica count",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{custom: tc.values, timestamp: testNow}
			calc := newTestCalc(tc.pods.build(), m)
			current := tc.pods.replicas
			if current == 0 {
				current = 2
			}
			replicas, usage, ts, err := calc.GetObjectMetricReplicas(context.Background(), current, tc.target, "qps", tc.tol(), testNamespace, testDeploymentRef, testSelector, testSelector)
			checkPlain(t, tc, replicas, usage, err)
			if err == nil && !ts.IsZero() {
				t.Errorf("timestamp = %v, upstream reports none for object metrics", ts)
			}
		})
	}
}

// From zero replicas there are no pods to count: the ratio itself is the
// proposal, so a zero metric keeps zero and anything else starts pods.
func TestGetObjectMetricReplicasFromZero(t *testing.T) {
	for _, tc := range []struct {
		value int64
		want  int32
	}{{0, 0}, {1, 1}, {15000, 2}, {10000, 1}} {
		calc := newTestCalc(nil, &fakeMetrics{custom: []int64{tc.value}})
		replicas, _, _, err := calc.GetObjectMetricReplicas(context.Background(), 0, 10000, "qps", defaultTolerances, testNamespace, testDeploymentRef, testSelector, testSelector)
		if err != nil || replicas != tc.want {
			t.Errorf("value %d: got %d (%v), want %d", tc.value, replicas, err, tc.want)
		}
	}
}

func TestGetObjectPerPodMetricReplicas(t *testing.T) {
	cases := []plainCase{{
		name:         "scale up",
		pods:         podSet{replicas: 3},
		values:       []int64{20000},
		target:       5000,
		wantReplicas: 4, wantUsage: 6667,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5},
		values:       []int64{6000},
		target:       2000,
		wantReplicas: 3, wantUsage: 1200,
	}, {
		name:         "within default tolerance",
		pods:         podSet{replicas: 4},
		values:       []int64{20166},
		target:       5000,
		wantReplicas: 4, wantUsage: 5042,
	}, {
		name:         "outside configurable 1% tolerance",
		tolerances:   &Tolerances{testTolerance, .01},
		pods:         podSet{replicas: 4},
		values:       []int64{20208},
		target:       5000,
		wantReplicas: 5, wantUsage: 5052,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{custom: tc.values, timestamp: testNow}
			calc := newTestCalc(tc.pods.build(), m)
			replicas, usage, ts, err := calc.GetObjectPerPodMetricReplicas(context.Background(), tc.pods.replicas, tc.target, "qps", tc.tol(), testNamespace, testDeploymentRef, testSelector)
			checkPlain(t, tc, replicas, usage, err)
			if !ts.Equal(testNow) {
				t.Errorf("timestamp = %v, want %v", ts, testNow)
			}
		})
	}
}

var testExternalSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"label": "value"}}

func TestGetExternalMetricReplicas(t *testing.T) {
	cases := []plainCase{{
		name:         "scale down: ignores unready pods (would otherwise scale up)",
		pods:         podSet{replicas: 3, ready: []v1.ConditionStatus{F, T, F}},
		values:       []int64{8600},
		target:       4400,
		wantReplicas: 2, wantUsage: 8600,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5},
		values:       []int64{8600},
		target:       14334,
		wantReplicas: 3, wantUsage: 8600,
	}, {
		name:         "within default tolerance",
		pods:         podSet{replicas: 3},
		values:       []int64{8600},
		target:       8888,
		wantReplicas: 3, wantUsage: 8600,
	}, {
		name:         "outside configurable 1% tolerance",
		tolerances:   &Tolerances{testTolerance, .01},
		pods:         podSet{replicas: 3},
		values:       []int64{8900},
		target:       8800,
		wantReplicas: 4, wantUsage: 8900,
	}, {
		name:         "series are summed",
		pods:         podSet{replicas: 2},
		values:       []int64{3000, 5000, 2000},
		target:       5000,
		wantReplicas: 4, wantUsage: 10000,
	}, {
		name:         "usage overflow caps at MaxInt64",
		pods:         podSet{replicas: 3},
		values:       []int64{math.MaxInt64, 1},
		target:       math.MaxInt64,
		wantReplicas: 3, wantUsage: math.MaxInt64,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{external: tc.values}
			calc := newTestCalc(tc.pods.build(), m)
			replicas, usage, _, err := calc.GetExternalMetricReplicas(context.Background(), tc.pods.replicas, tc.target, "qps", tc.tol(), testNamespace, testExternalSelector, testSelector)
			checkPlain(t, tc, replicas, usage, err)
			if want := "external qps " + testNamespace + " label=value"; len(m.requests) != 1 || m.requests[0] != want {
				t.Errorf("requests = %q, want %q", m.requests, want)
			}
		})
	}
}

func TestGetExternalPerPodMetricReplicas(t *testing.T) {
	cases := []plainCase{{
		name:         "replica count overflow saturates to MaxInt32",
		pods:         podSet{replicas: 1},
		values:       []int64{math.MaxInt64},
		target:       1,
		wantReplicas: math.MaxInt32, wantUsage: math.MaxInt64,
	}, {
		name:         "usage overflow with huge target leaves replicas unchanged",
		pods:         podSet{replicas: 1},
		values:       []int64{math.MaxInt64, math.MaxInt64},
		target:       math.MaxInt64,
		wantReplicas: 1, wantUsage: math.MaxInt64,
	}, {
		name:         "scale up",
		pods:         podSet{replicas: 3},
		values:       []int64{8600},
		target:       2150,
		wantReplicas: 4, wantUsage: 2867,
	}, {
		name:         "scale down",
		pods:         podSet{replicas: 5},
		values:       []int64{8600},
		target:       2867,
		wantReplicas: 3, wantUsage: 1720,
	}, {
		name:         "within default tolerance",
		pods:         podSet{replicas: 3},
		values:       []int64{8600},
		target:       2900,
		wantReplicas: 3, wantUsage: 2867,
	}, {
		name:         "outside configurable 1% tolerance",
		tolerances:   &Tolerances{testTolerance, .01},
		pods:         podSet{replicas: 3},
		values:       []int64{8600},
		target:       2800,
		wantReplicas: 4, wantUsage: 2867,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMetrics{external: tc.values, timestamp: testNow}
			calc := newTestCalc(nil, m)
			replicas, usage, ts, err := calc.GetExternalPerPodMetricReplicas(context.Background(), tc.pods.replicas, tc.target, "qps", tc.tol(), testNamespace, testExternalSelector)
			checkPlain(t, tc, replicas, usage, err)
			if !ts.Equal(testNow) {
				t.Errorf("timestamp = %v, want %v", ts, testNow)
			}
		})
	}
}

func TestToleranceString(t *testing.T) {
	if got := (Tolerances{0.1, 0.025}).String(); got != "[down:10.0%, up:2.5%]" {
		t.Errorf("String() = %q", got)
	}
}

func TestGroupPods(t *testing.T) {
	minute := time.Minute
	ready := func(status v1.ConditionStatus, changed time.Time) []v1.PodCondition {
		return []v1.PodCondition{{Type: v1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(changed)}}
	}
	pod := func(name string, phase v1.PodPhase, start *time.Time, conds []v1.PodCondition) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.PodStatus{Phase: phase, Conditions: conds}}
		if start != nil {
			s := metav1.NewTime(*start)
			p.Status.StartTime = &s
		}
		return p
	}
	at := func(d time.Duration) *time.Time { t := testNow.Add(d); return &t }

	cases := []struct {
		name     string
		pod      *v1.Pod
		sample   *time.Time // nil: no sample
		resource v1.ResourceName
		want     string // ready, unready, missing, ignored
	}{
		{"no sample", pod("p", running, at(-time.Hour), ready(T, testNow.Add(-time.Hour))), nil, v1.ResourceCPU, "missing"},
		{"pending is unready without a sample", pod("p", pending, nil, nil), nil, v1.ResourceCPU, "unready"},
		{"failed is ignored", pod("p", failed, at(-time.Hour), nil), at(0), v1.ResourceCPU, "ignored"},
		{"custom metric ignores readiness", pod("p", running, at(-time.Second), ready(F, testNow)), at(0), "", "ready"},
		{"memory ignores readiness", pod("p", running, at(-time.Second), ready(F, testNow)), at(0), v1.ResourceMemory, "ready"},
		{"cpu without Ready condition", pod("p", running, at(-time.Hour), nil), at(0), v1.ResourceCPU, "unready"},
		{"cpu without start time", pod("p", running, nil, ready(T, testNow.Add(-time.Hour))), at(0), v1.ResourceCPU, "unready"},
		// In the initialization period the sample must start after the
		// pod became ready.
		{"initializing, sample window after ready", pod("p", running, at(-time.Minute), ready(T, testNow.Add(-50*time.Second))), at(10 * time.Second), v1.ResourceCPU, "ready"},
		{"initializing, sample window overlaps ready", pod("p", running, at(-time.Minute), ready(T, testNow.Add(-50*time.Second))), at(0), v1.ResourceCPU, "unready"},
		{"initializing, not ready", pod("p", running, at(-time.Minute), ready(F, testNow.Add(-50*time.Second))), at(10 * time.Second), v1.ResourceCPU, "unready"},
		// After it, only a pod that has never been ready is ignored.
		{"initialized, ready", pod("p", running, at(-3*time.Minute), ready(T, testNow.Add(-10*time.Second))), at(-2 * time.Minute), v1.ResourceCPU, "ready"},
		{"initialized, never became ready", pod("p", running, at(-3*time.Minute), ready(F, testNow.Add(-3*time.Minute+5*time.Second))), at(0), v1.ResourceCPU, "unready"},
		{"initialized, became unready later", pod("p", running, at(-3*time.Minute), ready(F, testNow.Add(-time.Minute))), at(0), v1.ResourceCPU, "ready"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			metrics := map[string]time.Time{}
			if tc.sample != nil {
				metrics[tc.pod.Name] = *tc.sample
			}
			calc := newTestCalc(nil, &fakeMetrics{})
			info := makeInfo(metrics, minute)
			g := calc.groupPods([]*v1.Pod{tc.pod}, info, tc.resource)
			got := "ready"
			switch {
			case g.ignored.Has("p"):
				got = "ignored"
			case g.missing.Has("p"):
				got = "missing"
			case g.unready.Has("p"):
				got = "unready"
			case g.readyCount != 1:
				got = "nowhere"
			}
			if got != tc.want {
				t.Errorf("pod grouped %s, want %s", got, tc.want)
			}
		})
	}
}
