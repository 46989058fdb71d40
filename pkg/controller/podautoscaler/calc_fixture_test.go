package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	metricsclient "github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler/metrics"
)

const (
	testNamespace  = "test-namespace"
	testPodPrefix  = "test-pod"
	testTolerance  = 0.1
	testCPUInit    = 2 * time.Minute
	testReadyDelay = 10 * time.Second
	containersPer  = 2
)

// testNow is the fake clock's time in every test.
var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// hotStart is a start time inside the CPU initialization period;
// coolStart one past it.
var (
	hotStart  = metav1.NewTime(testNow)
	coolStart = metav1.NewTime(testNow.Add(-3 * time.Minute))
)

// fakeMetrics is a MetricsClient serving canned values. Resource samples
// are per container ("container1", "container2", ...) and summed like the
// real client does; a pod without a row has no sample.
type fakeMetrics struct {
	mu sync.Mutex

	timestamp time.Time
	// resource[i] are the usages of the containers of pod metricPod(i).
	resource [][]int64
	// resourceNames overrides the pod name of row i.
	resourceNames []string
	// custom[i] is the custom metric of pod i (GetRawMetric) or, for
	// object metrics, custom[0] is the object's value.
	custom []int64
	// external are the series values of an external metric.
	external []int64
	err      error

	// Requests seen, for assertions.
	requests []string
}

func (f *fakeMetrics) record(format string, args ...interface{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, fmt.Sprintf(format, args...))
}

func (f *fakeMetrics) setResource(rows [][]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resource = rows
}

func (f *fakeMetrics) podName(i int) string {
	if i < len(f.resourceNames) {
		return f.resourceNames[i]
	}
	return fmt.Sprintf("%s-%d", testPodPrefix, i)
}

func (f *fakeMetrics) GetResourceMetric(_ context.Context, res v1.ResourceName, namespace string, selector labels.Selector, container string) (metricsclient.PodMetricsInfo, time.Time, error) {
	f.record("resource %s %s %s %s", res, namespace, selector, container)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	if len(f.resource) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	out := metricsclient.PodMetricsInfo{}
	for i, row := range f.resource {
		var sum int64
		found := false
		for j, v := range row {
			if container == "" || container == fmt.Sprintf("container%d", j+1) {
				sum += v
				found = true
			}
		}
		if found {
			out[f.podName(i)] = metricsclient.PodMetric{Timestamp: f.timestamp, Window: time.Minute, Value: sum}
		}
	}
	return out, f.timestamp, nil
}

func (f *fakeMetrics) GetRawMetric(_ context.Context, name, namespace string, selector, metricSelector labels.Selector) (metricsclient.PodMetricsInfo, time.Time, error) {
	f.record("raw %s %s %s %s", name, namespace, selector, metricSelector)
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	if len(f.custom) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from custom metrics API")
	}
	out := metricsclient.PodMetricsInfo{}
	for i, v := range f.custom {
		out[fmt.Sprintf("%s-%d", testPodPrefix, i)] = metricsclient.PodMetric{Timestamp: f.timestamp, Window: time.Minute, Value: v}
	}
	return out, f.timestamp, nil
}

func (f *fakeMetrics) GetObjectMetric(_ context.Context, name, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	f.record("object %s %s %s/%s %s", name, namespace, ref.Kind, ref.Name, metricSelector)
	if f.err != nil {
		return 0, time.Time{}, f.err
	}
	return f.custom[0], f.timestamp, nil
}

func (f *fakeMetrics) GetExternalMetric(_ context.Context, name, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	f.record("external %s %s %s", name, namespace, selector)
	if f.err != nil {
		return nil, time.Time{}, f.err
	}
	return f.external, f.timestamp, nil
}

// sameLevels gives every container of pod i the usage v[i].
func sameLevels(v ...int64) [][]int64 {
	rows := make([][]int64, len(v))
	for i := range v {
		rows[i] = make([]int64, containersPer)
		for j := range rows[i] {
			rows[i][j] = v[i]
		}
	}
	return rows
}

// cpuRequests gives n pods a request of q per container.
func cpuRequests(n int, q string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = q
	}
	return out
}

// podSet describes the selected pods: max(replicas, len(phase)) of them,
// each with per-index overrides. Defaults: Running, Ready, started at the
// zero time (long ago), not deleting, no requests.
type podSet struct {
	replicas int32
	ready    []v1.ConditionStatus
	phase    []v1.PodPhase
	start    []metav1.Time
	deleting []bool
	// requests[i] is the CPU request of each container of pod i.
	requests []string
}

func (s podSet) build() []*v1.Pod {
	n := max(int(s.replicas), len(s.phase))
	pods := make([]*v1.Pod, 0, n)
	for i := 0; i < n; i++ {
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%d", testPodPrefix, i),
				Namespace: testNamespace,
				Labels:    map[string]string{"name": testPodPrefix},
			},
			Status: v1.PodStatus{
				Phase:      v1.PodRunning,
				StartTime:  &metav1.Time{},
				Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
			},
		}
		for j := 0; j < containersPer; j++ {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("container%d", j+1)})
		}
		if i < len(s.ready) {
			p.Status.Conditions[0].Status = s.ready[i]
		}
		if i < len(s.phase) {
			p.Status.Phase = s.phase[i]
		}
		if i < len(s.start) {
			start := s.start[i]
			p.Status.StartTime = &start
		}
		if i < len(s.deleting) && s.deleting[i] {
			p.DeletionTimestamp = &metav1.Time{Time: testNow}
		}
		if i < len(s.requests) {
			for j := range p.Spec.Containers {
				p.Spec.Containers[j].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(s.requests[i])}
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// podLister serves pods from an indexer.
func podLister(pods ...*v1.Pod) (corelisters.PodLister, cache.Indexer) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		_ = idx.Add(p)
	}
	return corelisters.NewPodLister(idx), idx
}

// newTestCalc returns a calculator over pods and metrics with the test
// clock and periods.
func newTestCalc(pods []*v1.Pod, m *fakeMetrics) *ReplicaCalculator {
	lister, _ := podLister(pods...)
	c := NewReplicaCalculator(m, lister, testCPUInit, testReadyDelay, true)
	c.clock = testingclock.NewFakePassiveClock(testNow)
	return c
}

var testSelector = labels.SelectorFromSet(labels.Set{"name": testPodPrefix})

var defaultTolerances = Tolerances{testTolerance, testTolerance}

// makeInfo turns sample times into PodMetricsInfo with one window.
func makeInfo(samples map[string]time.Time, window time.Duration) metricsclient.PodMetricsInfo {
	out := metricsclient.PodMetricsInfo{}
	for name, ts := range samples {
		out[name] = metricsclient.PodMetric{Timestamp: ts, Window: window, Value: 1}
	}
	return out
}
