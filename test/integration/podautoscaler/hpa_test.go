// Package podautoscaler tests the horizontal pod autoscaler against a real
// apiserver: Deployments and HPAs live there, the Deployment and
// ReplicaSet controllers make the pods, and a fake metrics.k8s.io served
// by the test reports their CPU usage.
package podautoscaler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler/metrics"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const (
	// syncPeriod replaces the 15s default so tests converge quickly.
	syncPeriod = 500 * time.Millisecond
	// stabilization replaces the 5m downscale stabilization window.
	stabilization = 5 * time.Second
)

// fakeMetricsServer plays metrics-server: every running pod of a namespace
// reports that namespace's CPU usage, sampled now over a one second window.
type fakeMetricsServer struct {
	client clientset.Interface
	mu     sync.Mutex
	usage  map[string]string // namespace -> CPU per pod
}

func (s *fakeMetricsServer) setUsage(ns, cpu string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage[ns] = cpu
}

func (s *fakeMetricsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// /apis/metrics.k8s.io/v1beta1/namespaces/<ns>/pods
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 6 || parts[1] != "metrics.k8s.io" || parts[2] != "v1beta1" || parts[3] != "namespaces" || parts[5] != "pods" {
		http.NotFound(w, r)
		return
	}
	ns := parts[4]
	s.mu.Lock()
	cpu, ok := s.usage[ns]
	s.mu.Unlock()
	type container struct {
		Name  string            `json:"name"`
		Usage map[string]string `json:"usage"`
	}
	type podMetrics struct {
		Metadata   map[string]string `json:"metadata"`
		Timestamp  string            `json:"timestamp"`
		Window     string            `json:"window"`
		Containers []container       `json:"containers"`
	}
	list := struct {
		Kind       string       `json:"kind"`
		APIVersion string       `json:"apiVersion"`
		Items      []podMetrics `json:"items"`
	}{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1", Items: []podMetrics{}}
	if ok {
		pods, err := s.client.CoreV1().Pods(ns).List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("labelSelector")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for _, p := range pods.Items {
			if p.Status.Phase != v1.PodRunning || p.DeletionTimestamp != nil {
				continue
			}
			list.Items = append(list.Items, podMetrics{
				Metadata:   map[string]string{"name": p.Name, "namespace": p.Namespace},
				Timestamp:  time.Now().UTC().Format(time.RFC3339),
				Window:     "1s",
				Containers: []container{{Name: "app", Usage: map[string]string{"cpu": cpu}}},
			})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// startTest gives a test a namespace, a node agent marking its pods ready,
// the Deployment, ReplicaSet and HPA controllers, and the fake metrics API.
func startTest(t *testing.T, prefix string) (clientset.Interface, string, context.Context, *fakeMetricsServer) {
	t.Helper()
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, prefix)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))

	fms := &fakeMetricsServer{client: c, usage: map[string]string{}}
	srv := httptest.NewServer(fms)
	metricsClient, err := metrics.NewRESTMetricsClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Discovery()))
	scaleClient, err := scale.NewForConfig(cp.Config, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(c.Discovery()))
	if err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactory(c, time.Hour)
	dc, err := deployment.NewController(ctx, factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, deployment.Features{TerminatingReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	rsc := replicaset.NewController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), c, replicaset.BurstReplicas, replicaset.Features{TerminatingReplicas: true, StaleControllerConsistency: true, PodDeletionCost: true})
	hpa := podautoscaler.NewController(ctx, c.CoreV1(), scaleClient, c.AutoscalingV2(), mapper, metricsClient,
		factory.Autoscaling().V2().HorizontalPodAutoscalers(), factory.Core().V1().Pods(),
		syncPeriod, stabilization, 0.1, 5*time.Minute, 30*time.Second, podautoscaler.Features{HPAGeneration: true, HPAConfigurableTolerance: true,
			HPAScaleToZero: true, PodLevelResources: true, HPAOptimizedSelectorStore: true, StaleControllerConsistency: true})
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() { dc.Run(ctx, 2) })
	wg.Go(func() { rsc.Run(ctx, 2) })
	wg.Go(func() { hpa.Run(ctx, 5) })
	framework.Kubelet{Client: c}.Run(ctx, ns)
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
		srv.Close()
	})
	return c, ns, ctx, fms
}

// webDeployment runs replicas pods requesting 100m CPU each.
func webDeployment(replicas int32) *appsv1.Deployment {
	lbl := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "app", Image: "nginx",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}},
				}}},
			},
		},
	}
}

// cpuHPA is what `kubectl autoscale deployment <target> --cpu=50% --min
// --max` creates.
func cpuHPA(target string, minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To(minReplicas),
			MaxReplicas:    maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   v1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
				},
			}},
		},
	}
}

func getCondition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) autoscalingv2.HorizontalPodAutoscalerCondition {
	for _, c := range h.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return autoscalingv2.HorizontalPodAutoscalerCondition{}
}

// hasCondition reports whether the condition has the status and reason.
func hasCondition(h *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status v1.ConditionStatus, reason string) bool {
	c := getCondition(h, t)
	return c.Status == status && c.Reason == reason
}

// waitHPA polls the HPA until cond holds.
func waitHPA(t *testing.T, c clientset.Interface, ns, name, what string, cond func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var last *autoscalingv2.HorizontalPodAutoscaler
	framework.Eventually(t, 90*time.Second, what, func(ctx context.Context) (bool, error) {
		h, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = h
		return cond(h), nil
	})
	return last
}

// waitEvent waits for an event about the HPA with reason whose message
// starts with prefix.
func waitEvent(t *testing.T, c clientset.Interface, ns, reason, eventType, prefix string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("a %s event %q", reason, prefix), func(ctx context.Context) (bool, error) {
		evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == eventType && e.InvolvedObject.Kind == "HorizontalPodAutoscaler" &&
				e.Source.Component == "horizontal-pod-autoscaler" && strings.HasPrefix(e.Message, prefix) {
				return true, nil
			}
		}
		return false, nil
	})
}

func waitReplicas(t *testing.T, c clientset.Interface, ns string, want int32) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, fmt.Sprintf("the Deployment to run %d ready pods", want), func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return *d.Spec.Replicas == want && d.Status.ReadyReplicas == want && d.Status.Replicas == want, nil
	})
}

// High CPU scales a Deployment up, at most doubling per step and no
// further than maxReplicas; low CPU scales it down to minReplicas once the
// stabilization window has passed. Status and events say why each time.
func TestScaleUpAndDownOnCPUUtilization(t *testing.T) {
	c, ns, ctx, fms := startTest(t, "hpa-cpu")
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, webDeployment(2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, c, ns, 2)

	// 200m of 100m: four times the 50% target.
	fms.setUsage(ns, "200m")
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, cpuHPA("web", 2, 5), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cpuReason := "cpu resource utilization (percentage of request) above target"
	// 2 pods want 8, a step may at most double: 4.
	waitEvent(t, c, ns, "SuccessfulRescale", v1.EventTypeNormal, "New size: 4; reason: "+cpuReason)
	// 4 pods want 16: maxReplicas stops at 5.
	waitEvent(t, c, ns, "SuccessfulRescale", v1.EventTypeNormal, "New size: 5; reason: "+cpuReason)
	waitReplicas(t, c, ns, 5)
	h := waitHPA(t, c, ns, "web", "the HPA to report the maximum", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.CurrentReplicas == 5 && h.Status.DesiredReplicas == 5 &&
			hasCondition(h, autoscalingv2.ScalingLimited, v1.ConditionTrue, "TooManyReplicas")
	})
	if c := getCondition(h, autoscalingv2.ScalingLimited); c.Message != "the desired replica count is more than the maximum replica count" {
		t.Errorf("ScalingLimited message = %q", c.Message)
	}
	if c := getCondition(h, autoscalingv2.ScalingActive); c.Status != v1.ConditionTrue || c.Reason != "ValidMetricFound" ||
		c.Message != "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)" {
		t.Errorf("ScalingActive = %+v", c)
	}
	if c := getCondition(h, autoscalingv2.AbleToScale); c.Status != v1.ConditionTrue {
		t.Errorf("AbleToScale = %+v", c)
	}
	if h.Status.LastScaleTime == nil || h.Status.ObservedGeneration == nil || *h.Status.ObservedGeneration != h.Generation {
		t.Errorf("lastScaleTime %v, observedGeneration %v (generation %d)", h.Status.LastScaleTime, h.Status.ObservedGeneration, h.Generation)
	}
	if len(h.Status.CurrentMetrics) != 1 || h.Status.CurrentMetrics[0].Resource == nil ||
		*h.Status.CurrentMetrics[0].Resource.Current.AverageUtilization != 200 ||
		h.Status.CurrentMetrics[0].Resource.Current.AverageValue.String() != "200m" {
		t.Errorf("currentMetrics = %+v", h.Status.CurrentMetrics)
	}

	// 10m: the proposal is 1 pod. The highest recommendation of the
	// window holds the count first, then minReplicas bounds it.
	fms.setUsage(ns, "10m")
	waitHPA(t, c, ns, "web", "the scale-down to be stabilized", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return hasCondition(h, autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized")
	})
	waitEvent(t, c, ns, "SuccessfulRescale", v1.EventTypeNormal, "New size: 2; reason: All metrics below target")
	waitReplicas(t, c, ns, 2)
	h = waitHPA(t, c, ns, "web", "the HPA to report the minimum", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return h.Status.CurrentReplicas == 2 && h.Status.DesiredReplicas == 2 &&
			hasCondition(h, autoscalingv2.ScalingLimited, v1.ConditionTrue, "TooFewReplicas")
	})
	if c := getCondition(h, autoscalingv2.ScalingLimited); c.Message != "the desired replica count is less than the minimum replica count" {
		t.Errorf("ScalingLimited message = %q", c.Message)
	}
}

// An HPA whose target does not exist cannot scale: AbleToScale is False
// with FailedGetScale, and a warning event says why.
func TestMissingScaleTarget(t *testing.T) {
	c, ns, ctx, _ := startTest(t, "hpa-missing")
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, cpuHPA("nope", 1, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := waitHPA(t, c, ns, "nope", "AbleToScale False", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return hasCondition(h, autoscalingv2.AbleToScale, v1.ConditionFalse, "FailedGetScale")
	})
	want := `the HPA controller was unable to get the target's current scale: deployments.apps "nope" not found`
	if c := getCondition(h, autoscalingv2.AbleToScale); c.Message != want {
		t.Errorf("AbleToScale message = %q, want %q", c.Message, want)
	}
	waitEvent(t, c, ns, "FailedGetScale", v1.EventTypeWarning, `deployments.apps "nope" not found`)
}

// Without metrics for its pods the HPA reports ScalingActive False and
// leaves the replica count alone.
func TestNoMetrics(t *testing.T) {
	c, ns, ctx, _ := startTest(t, "hpa-nometrics")
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, webDeployment(1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, c, ns, 1)
	if _, err := c.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, cpuHPA("web", 1, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := waitHPA(t, c, ns, "web", "ScalingActive False", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
		return hasCondition(h, autoscalingv2.ScalingActive, v1.ConditionFalse, "FailedGetResourceMetric")
	})
	want := "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
	if c := getCondition(h, autoscalingv2.ScalingActive); c.Message != want {
		t.Errorf("ScalingActive message = %q\nwant %q", c.Message, want)
	}
	if h.Status.CurrentReplicas != 1 {
		t.Errorf("currentReplicas = %d, want 1", h.Status.CurrentReplicas)
	}
	waitEvent(t, c, ns, "FailedComputeMetricsReplicas", v1.EventTypeWarning, "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: ")
}
