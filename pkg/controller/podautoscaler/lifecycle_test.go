package podautoscaler

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

// objectHPA scales on an object metric with a Value target of 10.
func objectHPA(minReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	h := cpuHPA("web", minReplicas, 10, 50)
	h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: *testDeploymentRef,
		Metric:          autoscalingv2.MetricIdentifier{Name: "qps"},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("10"))},
	}}}
	return h
}

// With minReplicas 0 and an object metric, the controller may take the
// workload to zero and, remembering it did, bring it back.
func TestScaleToZeroAndBack(t *testing.T) {
	f := newFixture(t, 2, objectHPA(0))
	f.addPods(cpuPods(2)...)
	f.metrics.custom = []int64{0}
	f.reconcileOK()
	f.clock.Step(6 * time.Minute) // past the downscale stabilization
	f.reconcileOK()
	if got := f.lastUpdate(); got != 0 {
		t.Fatalf("scaled to %d, want 0", got)
	}
	wantCondition(t, f.hpa("web"), autoscalingv2.ScaledToZero, v1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")

	f.setReplicas(0)
	f.metrics.custom = []int64{15000}
	f.reconcileOK()
	if got := f.lastUpdate(); got != 2 {
		t.Fatalf("scaled to %d from zero, want 2", got)
	}
	wantEvents(t, f.events(), "Normal SuccessfulRescale New size: 0", "Normal SuccessfulRescale New size: 2; reason: Deployment metric qps above target")
	wantCondition(t, f.hpa("web"), autoscalingv2.ScaledToZero, v1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
}

// Back from zero, a minReplicas raised meanwhile applies even when the
// metric asks for less. (Without a behavior the min/max bounds already
// raise it, with an empty reason as upstream; the behavior path names it.)
func TestScaleFromZeroHonoursRaisedMin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
		reason   string
	}{
		{"no behavior", nil, ""},
		{"behavior", &autoscalingv2.HorizontalPodAutoscalerBehavior{}, "Current number of replicas below Spec.MinReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := objectHPA(3)
			h.Spec.Behavior = tc.behavior
			h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue, Reason: "ScaledToZero"}}
			f := newFixture(t, 0, h)
			f.metrics.custom = []int64{0}
			f.reconcileOK()
			if got := f.lastUpdate(); got != 3 {
				t.Fatalf("scaled to %d, want 3", got)
			}
			if got := f.events(); len(got) != 1 || got[0] != "Normal SuccessfulRescale New size: 3; reason: "+tc.reason {
				t.Errorf("events = %q", got)
			}
		})
	}
}

// Only pods metrics: nothing could ask for pods, so zero stays disabled
// even after our own scale-down.
func TestScaledToZeroWithoutObjectMetricStaysDisabled(t *testing.T) {
	h := cpuHPA("web", 0, 10, 50)
	h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue}}
	f := newFixture(t, 0, h)
	f.reconcileOK()
	wantCondition(t, f.hpa("web"), autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "")
}

func TestScaleToZeroGateOff(t *testing.T) {
	fs := v137Features
	fs.HPAScaleToZero = false
	h := objectHPA(0)
	h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionTrue}}
	f := newFixtureWith(t, fs, 0, h)
	f.metrics.custom = []int64{15000}
	f.reconcileOK()
	if got := f.scaleUpdates(); len(got) != 0 {
		t.Fatalf("scaled from zero with the gate off: %v", got)
	}
	hpa := f.hpa("web")
	wantCondition(t, hpa, autoscalingv2.ScalingActive, v1.ConditionFalse, "ScalingDisabled", "")
	if condition(hpa, autoscalingv2.ScaledToZero) != nil {
		t.Error("ScaledToZero kept with the gate off")
	}
}

// With the feature off a rescale drops the ScaledToZero condition.
func TestScaleToZeroGateOffOnRescale(t *testing.T) {
	fs := v137Features
	fs.HPAScaleToZero = false
	h := cpuHPA("web", 1, 10, 30)
	h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScaledToZero, Status: v1.ConditionFalse}}
	f := newFixtureWith(t, fs, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(300, 500, 700)
	f.reconcileOK()
	if got := f.lastUpdate(); got != 5 {
		t.Fatalf("scaled to %d, want 5", got)
	}
	if condition(f.hpa("web"), autoscalingv2.ScaledToZero) != nil {
		t.Error("ScaledToZero kept with the gate off")
	}
}

func TestObservedGenerationGate(t *testing.T) {
	fs := v137Features
	fs.HPAGeneration = false
	h := cpuHPA("web", 1, 10, 50)
	h.Status.ObservedGeneration = ptr.To[int64](1)
	f := newFixtureWith(t, fs, 3, h)
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	f.reconcileOK()
	if og := f.hpa("web").Status.ObservedGeneration; og != nil {
		t.Errorf("observedGeneration = %v with the gate off, want unset", *og)
	}
}

func TestAmbiguousSelectorLimit(t *testing.T) {
	for _, tc := range []struct {
		gate bool
		want int
	}{{true, 2}, {false, 3}} {
		t.Run(map[bool]string{true: "optimized store", false: "legacy store"}[tc.gate], func(t *testing.T) {
			fs := v137Features
			fs.HPAOptimizedSelectorStore = tc.gate
			f := newFixtureWith(t, fs, 3, cpuHPA("a", 1, 10, 50), cpuHPA("b", 1, 10, 50), cpuHPA("c", 1, 10, 50))
			f.addPods(cpuPods(3)...)
			f.metrics.resource = sameLevels(500, 500, 500)
			_ = f.reconcile("a")
			_ = f.reconcile("b")
			_ = f.reconcile("c")
			msg := condition(f.hpa("c"), autoscalingv2.ScalingActive).Message
			if n := strings.Count(msg, "test-namespace/"); n != tc.want {
				t.Errorf("message names %d HPAs, want %d: %s", n, tc.want, msg)
			}
		})
	}
}

// recordingQueue notes rate-limited adds.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu          sync.Mutex
	rateLimited []string
	added       []string
}

func (q *recordingQueue) AddRateLimited(key string) {
	q.mu.Lock()
	q.rateLimited = append(q.rateLimited, key)
	q.mu.Unlock()
}

func (q *recordingQueue) Add(key string) {
	q.mu.Lock()
	q.added = append(q.added, key)
	q.mu.Unlock()
}

func (f *fixture) recordQueue() *recordingQueue {
	q := &recordingQueue{TypedRateLimitingInterface: f.ctrl.queue}
	f.ctrl.queue = q
	return q
}

// Every reconciliation, failed or not, schedules the next one a sync
// period later; a deleted HPA is not rescheduled.
func TestSyncRequeues(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.metrics.err = errors.New("boom")
	q := f.recordQueue()
	if err := f.ctrl.sync(f.ctx, testNamespace+"/web"); err != nil {
		t.Fatalf("sync must log, not return, errors: %v", err)
	}
	if err := f.ctrl.sync(f.ctx, testNamespace+"/gone"); err != nil {
		t.Fatal(err)
	}
	if len(q.rateLimited) != 1 || q.rateLimited[0] != testNamespace+"/web" {
		t.Errorf("requeued %v, want only the existing HPA", q.rateLimited)
	}
}

func TestFixedIntervalRateLimiter(t *testing.T) {
	r := NewDefaultHPARateLimiter(15 * time.Second)
	for i := 0; i < 3; i++ {
		if d := r.When("k"); d != 15*time.Second {
			t.Fatalf("When = %v, want the fixed 15s", d)
		}
	}
	r.Forget("k")
	if r.NumRequeues("k") != 1 {
		t.Error("NumRequeues must stay 1")
	}
}

func TestEventHandlers(t *testing.T) {
	f := newFixture(t, 3)
	q := f.recordQueue()
	h := cpuHPA("web", 1, 10, 50)

	f.ctrl.enqueueHPA(h)
	f.ctrl.enqueueHPA(h)
	if f.monitor.hpas != 1 {
		t.Errorf("HPA count = %d after adding one twice", f.monitor.hpas)
	}
	if len(q.added) != 2 {
		t.Errorf("adds = %v", q.added)
	}

	// Status-only updates wait for the resync; a spec change does not.
	statusOnly := h.DeepCopy()
	statusOnly.Status.CurrentReplicas = 3
	f.ctrl.updateHPA(h, statusOnly)
	if len(q.added) != 2 || len(q.rateLimited) != 1 {
		t.Errorf("status update: adds %v, rate limited %v", q.added, q.rateLimited)
	}
	specChange := h.DeepCopy()
	specChange.Generation++
	f.ctrl.updateHPA(h, specChange)
	if len(q.added) != 3 {
		t.Errorf("spec change not queued at once: adds %v", q.added)
	}

	f.ctrl.deleteHPA(cache.DeletedFinalStateUnknown{Key: testNamespace + "/web", Obj: h})
	if f.monitor.hpas != 0 {
		t.Errorf("HPA count = %d after deletion", f.monitor.hpas)
	}
	if f.ctrl.selectors.putIfPresent(hpaKey{Namespace: testNamespace, Name: "web"}, labels.Everything()) {
		t.Error("selector of a deleted HPA kept")
	}
}

func TestSpecChangeRateLimitedWithGenerationGateOff(t *testing.T) {
	fs := v137Features
	fs.HPAGeneration = false
	f := newFixtureWith(t, fs, 3)
	q := f.recordQueue()
	h := cpuHPA("web", 1, 10, 50)
	specChange := h.DeepCopy()
	specChange.Generation++
	f.ctrl.updateHPA(h, specChange)
	if len(q.added) != 0 || len(q.rateLimited) != 1 {
		t.Errorf("adds %v, rate limited %v", q.added, q.rateLimited)
	}
}

// A deleted HPA found by the reconciliation (its selector gone) fails the
// selector check rather than being re-registered.
func TestHPADeletedDuringReconciliation(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.ctrl.selectors.delete(hpaKey{Namespace: testNamespace, Name: "web"})
	err := f.reconcile("web")
	if err == nil || !strings.Contains(err.Error(), "HPA test-namespace/web was deleted during reconciliation") {
		t.Fatalf("err = %v", err)
	}
}

type staleStore struct{ rv string }

func (s staleStore) LastStoreSyncResourceVersion() string { return s.rv }

// After writing a status the controller waits for the informer to show it
// before reconciling that HPA again.
func TestConsistencyWaitsForOwnWrite(t *testing.T) {
	f := newFixture(t, 3, cpuHPA("web", 1, 10, 50))
	f.addPods(cpuPods(3)...)
	f.metrics.resource = sameLevels(500, 500, 500)
	f.ctrl.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{hpaResource: staleStore{rv: "5"}})
	f.reconcileOK()
	if f.statusWrites() != 1 {
		t.Fatal("no status written")
	}
	gets := f.target.gets
	if _, err := f.ctrl.reconcileKey(f.ctx, testNamespace+"/web"); err == nil {
		t.Fatal("reconciled from a cache older than our write")
	}
	if f.target.gets != gets {
		t.Error("the target was read during a skipped sync")
	}
	if len(f.monitor.skips) != 1 || f.monitor.skips[0] != hpaResource {
		t.Errorf("skips = %v", f.monitor.skips)
	}
	// Deleting the HPA forgets the write.
	f.ctrl.deleteHPA(f.hpa("web"))
	if err := f.ctrl.consistency.EnsureReady(types.NamespacedName{Namespace: testNamespace, Name: "web"}); err != nil {
		t.Errorf("still waiting after deletion: %v", err)
	}
}

func TestConsistencyGate(t *testing.T) {
	fs := v137Features
	fs.StaleControllerConsistency = false
	f := newFixtureWith(t, fs, 3)
	f.ctrl.consistency.WroteAt(types.NamespacedName{Namespace: testNamespace, Name: "web"}, "uid", hpaResource, "100")
	if err := f.ctrl.consistency.EnsureReady(types.NamespacedName{Namespace: testNamespace, Name: "web"}); err != nil {
		t.Errorf("gate off must not wait: %v", err)
	}
}

func TestSelectorStore(t *testing.T) {
	s := newSelectorStore()
	a := hpaKey{Namespace: "ns", Name: "a"}
	if !s.putIfAbsent(a, labels.Nothing()) || s.putIfAbsent(a, labels.Everything()) {
		t.Fatal("putIfAbsent must add once")
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"app": "x"}}}
	if got := s.hpasMatchingPods("ns", []*v1.Pod{pod}, 0); len(got) != 0 {
		t.Errorf("the placeholder selector matched: %v", got)
	}
	if !s.putIfPresent(a, labels.SelectorFromSet(labels.Set{"app": "x"})) {
		t.Fatal("putIfPresent refused a known key")
	}
	if s.putIfPresent(hpaKey{Namespace: "ns", Name: "b"}, labels.Everything()) {
		t.Fatal("putIfPresent added an unknown key")
	}
	if got := s.hpasMatchingPods("ns", []*v1.Pod{pod}, 0); len(got) != 1 || got[0] != a {
		t.Errorf("matching = %v", got)
	}
	if got := s.hpasMatchingPods("other", []*v1.Pod{pod}, 0); len(got) != 0 {
		t.Errorf("other namespace matched: %v", got)
	}
	s.delete(a)
	if len(s.namespaces) != 0 {
		t.Errorf("empty namespace kept: %v", s.namespaces)
	}
	if parseHPAKey("ns/x") != (hpaKey{Namespace: "ns", Name: "x"}) || parseHPAKey("x") != (hpaKey{Name: "x"}) {
		t.Error("parseHPAKey")
	}
	if a.String() != "ns/a" {
		t.Errorf("String() = %q", a.String())
	}
}
