package podautoscaler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// recordingMonitor keeps what the controller reports.
type recordingMonitor struct {
	mu           sync.Mutex
	reconciles   []string // action/error
	computations []string // action/error/type
	hpas         int
	desired      map[string]int32
	skips        []schema.GroupResource
}

func (m *recordingMonitor) reconciled(action actionLabel, err errorLabel, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reconciles = append(m.reconciles, string(action)+"/"+string(err))
}

func (m *recordingMonitor) metricComputed(action actionLabel, err errorLabel, _ time.Duration, t autoscalingv2.MetricSourceType) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.computations = append(m.computations, string(action)+"/"+string(err)+"/"+string(t))
}

func (m *recordingMonitor) hpaAdded()   { m.mu.Lock(); m.hpas++; m.mu.Unlock() }
func (m *recordingMonitor) hpaDeleted() { m.mu.Lock(); m.hpas--; m.mu.Unlock() }

func (m *recordingMonitor) desiredReplicas(ns, name string, n int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.desired == nil {
		m.desired = map[string]int32{}
	}
	m.desired[ns+"/"+name] = n
}

func (m *recordingMonitor) syncSkipped(gr schema.GroupResource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.skips = append(m.skips, gr)
}

// scaleTarget serves a Deployment's scale subresource.
type scaleTarget struct {
	mu       sync.Mutex
	scale    *autoscalingv1.Scale
	missing  bool
	updates  []int32
	conflict int   // how many updates to refuse with a conflict first
	failWith error // refuse every update with this
	gets     int
}

func (s *scaleTarget) install(c *fakescale.FakeScaleClient) {
	c.AddReactor("get", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.gets++
		gr := a.GetResource().GroupResource()
		name := a.(clienttesting.GetAction).GetName()
		if s.missing || gr.Resource != "deployments" || name != s.scale.Name {
			return true, nil, fmt.Errorf(`deployments.apps "%s" not found`, name)
		}
		return true, s.scale.DeepCopy(), nil
	})
	c.AddReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		obj := a.(clienttesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		if s.failWith != nil {
			return true, nil, s.failWith
		}
		if s.conflict > 0 {
			s.conflict--
			return true, nil, errConflict()
		}
		s.updates = append(s.updates, obj.Spec.Replicas)
		s.scale.Spec.Replicas = obj.Spec.Replicas
		return true, s.scale.DeepCopy(), nil
	})
}

// fixture is a controller over fake clients whose informer caches are
// filled by hand; tests call reconcileKey directly.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	scales   *fakescale.FakeScaleClient
	target   *scaleTarget
	metrics  *fakeMetrics
	ctrl     *Controller
	recorder *record.FakeRecorder
	clock    *testingclock.FakeClock
	monitor  *recordingMonitor
}

func testMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}, {Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ReplicationController"}, apimeta.RESTScopeNamespace)
	return m
}

// newFixture builds the controller with hpas known and a Deployment
// "some-deployment" of replicas whose scale selects the test pods.
func newFixture(t *testing.T, replicas int32, hpas ...*autoscalingv2.HorizontalPodAutoscaler) *fixture {
	t.Helper()
	return newFixtureWith(t, v137Features, replicas, hpas...)
}

// v137Features are the v1.37 defaults of the gates the controller reads.
var v137Features = Features{HPAGeneration: true, HPAConfigurableTolerance: true, HPAScaleToZero: true,
	PodLevelResources: true, HPAOptimizedSelectorStore: true, StaleControllerConsistency: true}

// newFixtureWith is newFixture with the given features.
func newFixtureWith(t *testing.T, features Features, replicas int32, hpas ...*autoscalingv2.HorizontalPodAutoscaler) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	objs := make([]runtime.Object, 0, len(hpas))
	for _, h := range hpas {
		objs = append(objs, h)
	}
	f := &fixture{
		t:       t,
		ctx:     ctx,
		client:  fake.NewClientset(objs...),
		scales:  &fakescale.FakeScaleClient{},
		metrics: &fakeMetrics{timestamp: testNow},
		clock:   testingclock.NewFakeClock(testNow),
		monitor: &recordingMonitor{},
		target: &scaleTarget{scale: &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: testDeploymentRef.Name, Namespace: testNamespace, ResourceVersion: "1"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
			Status:     autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "name=" + testPodPrefix},
		}},
	}
	f.target.install(f.scales)
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	hpaInformer := f.factory.Autoscaling().V2().HorizontalPodAutoscalers()
	podInformer := f.factory.Core().V1().Pods()
	f.ctrl = NewController(ctx, f.client.CoreV1(), f.scales, f.client.AutoscalingV2(), testMapper(), f.metrics,
		hpaInformer, podInformer, 15*time.Second, 5*time.Minute, testTolerance, testCPUInit, testReadyDelay, features)
	f.recorder = record.NewFakeRecorder(100)
	f.ctrl.eventRecorder = f.recorder
	f.ctrl.clock = f.clock
	f.ctrl.replicaCalc.clock = f.clock
	f.ctrl.monitor = f.monitor
	for _, h := range hpas {
		f.addHPA(h)
	}
	return f
}

// addHPA puts hpa in the cache and registers it as the add handler does.
func (f *fixture) addHPA(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	f.t.Helper()
	if err := f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Add(hpa); err != nil {
		f.t.Fatal(err)
	}
	f.ctrl.enqueueHPA(hpa)
}

func (f *fixture) addPods(pods ...*v1.Pod) {
	f.t.Helper()
	for _, p := range pods {
		if err := f.factory.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			f.t.Fatal(err)
		}
	}
}

// reconcile runs one reconciliation of the HPA and then, as the informer
// would, puts the written status into the cache.
func (f *fixture) reconcile(name string) error {
	f.t.Helper()
	_, err := f.ctrl.reconcileKey(f.ctx, testNamespace+"/"+name)
	if cur, getErr := f.client.AutoscalingV2().HorizontalPodAutoscalers(testNamespace).Get(f.ctx, name, metav1.GetOptions{}); getErr == nil {
		_ = f.factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer().GetIndexer().Update(cur)
	}
	return err
}

func (f *fixture) hpa(name string) *autoscalingv2.HorizontalPodAutoscaler {
	f.t.Helper()
	h, err := f.client.AutoscalingV2().HorizontalPodAutoscalers(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// statusWrites counts the HPA status updates sent.
func (f *fixture) statusWrites() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "horizontalpodautoscalers" {
			n++
		}
	}
	return n
}

func (f *fixture) scaleUpdates() []int32 {
	f.target.mu.Lock()
	defer f.target.mu.Unlock()
	return append([]int32(nil), f.target.updates...)
}

// setReplicas changes the target's replicas as its controller would.
func (f *fixture) setReplicas(n int32) {
	f.target.mu.Lock()
	defer f.target.mu.Unlock()
	f.target.scale.Spec.Replicas = n
	f.target.scale.Status.Replicas = n
}

func condition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			return &hpa.Status.Conditions[i]
		}
	}
	return nil
}

// wantCondition checks a condition's status, reason and message (message
// unchecked when empty).
func wantCondition(t *testing.T, hpa *autoscalingv2.HorizontalPodAutoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason, message string) {
	t.Helper()
	c := condition(hpa, ct)
	if c == nil {
		t.Errorf("no %s condition in %+v", ct, hpa.Status.Conditions)
		return
	}
	if c.Status != status || c.Reason != reason || (message != "" && c.Message != message) {
		t.Errorf("%s = (%s, %s, %q), want (%s, %s, %q)", ct, c.Status, c.Reason, c.Message, status, reason, message)
	}
}

// wantEvents checks that the events, in order, start with the prefixes.
func wantEvents(t *testing.T, got []string, prefixes ...string) {
	t.Helper()
	if len(got) != len(prefixes) {
		t.Errorf("events = %q, want %d matching %q", got, len(prefixes), prefixes)
		return
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(got[i], p) {
			t.Errorf("event %d = %q, want prefix %q", i, got[i], p)
		}
	}
}

// cpuHPA targets averageUtilization percent of CPU on the test Deployment.
func cpuHPA(name string, minReplicas, maxReplicas, utilization int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), Generation: 3, ResourceVersion: "10"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: testDeploymentRef.Name},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   v1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)},
				},
			}},
		},
	}
}

// cpuPods are n ready pods, started long ago, requesting 1 CPU per
// container.
func cpuPods(n int) []*v1.Pod {
	return podSet{replicas: int32(n), start: repeatTime(coolStart, n), requests: cpuRequests(n, "1.0")}.build()
}

func repeatTime(t metav1.Time, n int) []metav1.Time {
	out := make([]metav1.Time, n)
	for i := range out {
		out[i] = t
	}
	return out
}

func milli(v int64) *resource.Quantity { return resource.NewMilliQuantity(v, resource.DecimalSI) }

func errConflict() error {
	return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, testDeploymentRef.Name, fmt.Errorf("the object has been modified"))
}
