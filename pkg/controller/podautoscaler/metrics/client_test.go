package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// fakeAPI serves canned bodies by path and records the requests it got.
type fakeAPI struct {
	t      *testing.T
	mu     sync.Mutex
	bodies map[string]string // path -> JSON body; missing paths are 404
	got    []*http.Request
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.got = append(f.got, r)
	body, ok := f.bodies[r.URL.Path]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"the server could not find the requested resource"}`))
		return
	}
	_, _ = w.Write([]byte(body))
}

func (f *fakeAPI) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		f.t.Fatal("no request received")
	}
	return f.got[len(f.got)-1]
}

func newTestClient(t *testing.T, bodies map[string]string, mapper apimeta.RESTMapper) (MetricsClient, *fakeAPI) {
	t.Helper()
	api := &fakeAPI{t: t, bodies: bodies}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	// A protobuf-preferring main config must not leak into the metrics
	// clients, which only decode JSON.
	c, err := NewRESTMetricsClient(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}}, mapper)
	if err != nil {
		t.Fatal(err)
	}
	return c, api
}

const podMetricsBody = `{
  "kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {},
  "items": [
    {"metadata": {"name": "web-1", "namespace": "ns"}, "timestamp": "2025-01-02T03:04:05Z", "window": "30s",
     "containers": [{"name": "app", "usage": {"cpu": "250m", "memory": "10Mi"}}, {"name": "sidecar", "usage": {"cpu": "50m", "memory": "1Mi"}}]},
    {"metadata": {"name": "web-2", "namespace": "ns"}, "timestamp": "2025-01-02T03:04:10Z", "window": "15s",
     "containers": [{"name": "app", "usage": {"cpu": "1"}}, {"name": "sidecar", "usage": {"cpu": "100m"}}]},
    {"metadata": {"name": "web-3", "namespace": "ns"}, "timestamp": "2025-01-02T03:04:10Z", "window": "15s",
     "containers": [{"name": "sidecar", "usage": {"cpu": "100m"}}]},
    {"metadata": {"name": "web-4", "namespace": "ns"}, "timestamp": "2025-01-02T03:04:10Z", "window": "15s", "containers": []}
  ]}`

func TestGetResourceMetric(t *testing.T) {
	ts1 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ts2 := ts1.Add(5 * time.Second)
	c, api := newTestClient(t, map[string]string{"/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods": podMetricsBody}, nil)
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})

	cases := []struct {
		name      string
		resource  v1.ResourceName
		container string
		want      PodMetricsInfo
	}{{
		// Pods lacking a container's sample, or with no containers, are
		// left out of the sums.
		name:     "pod sums",
		resource: v1.ResourceCPU,
		want: PodMetricsInfo{
			"web-1": {Timestamp: ts1, Window: 30 * time.Second, Value: 300},
			"web-2": {Timestamp: ts2, Window: 15 * time.Second, Value: 1100},
			"web-3": {Timestamp: ts2, Window: 15 * time.Second, Value: 100},
		},
	}, {
		name:     "memory sums skip pods missing the resource",
		resource: v1.ResourceMemory,
		want:     PodMetricsInfo{"web-1": {Timestamp: ts1, Window: 30 * time.Second, Value: 11 * 1024 * 1024 * 1000}},
	}, {
		name:      "one container",
		resource:  v1.ResourceCPU,
		container: "app",
		want: PodMetricsInfo{
			"web-1": {Timestamp: ts1, Window: 30 * time.Second, Value: 250},
			"web-2": {Timestamp: ts2, Window: 15 * time.Second, Value: 1000},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ts, err := c.GetResourceMetric(context.Background(), tc.resource, "ns", sel, tc.container)
			if err != nil {
				t.Fatal(err)
			}
			if !ts.Equal(ts1) {
				t.Errorf("timestamp = %v, want the first item's %v", ts, ts1)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for name, w := range tc.want {
				g := got[name]
				if g.Value != w.Value || g.Window != w.Window || !g.Timestamp.Equal(w.Timestamp) {
					t.Errorf("%s = %+v, want %+v", name, g, w)
				}
			}
			r := api.last()
			if r.URL.Query().Get("labelSelector") != "app=web" {
				t.Errorf("labelSelector = %q", r.URL.Query().Get("labelSelector"))
			}
			if accept := r.Header.Get("Accept"); !strings.HasPrefix(accept, "application/json") {
				t.Errorf("Accept = %q, want JSON", accept)
			}
		})
	}
}

func TestGetResourceMetricErrors(t *testing.T) {
	empty := `{"kind":"PodMetricsList","apiVersion":"metrics.k8s.io/v1beta1","items":[]}`
	c, api := newTestClient(t, map[string]string{"/apis/metrics.k8s.io/v1beta1/namespaces/empty/pods": empty}, nil)

	_, _, err := c.GetResourceMetric(context.Background(), v1.ResourceCPU, "empty", labels.Everything(), "")
	if err == nil || err.Error() != "no metrics returned from resource metrics API" {
		t.Errorf("empty list: err = %v", err)
	}
	if q := api.last().URL.RawQuery; q != "" {
		t.Errorf("an empty selector must not be sent, query = %q", q)
	}
	_, _, err = c.GetResourceMetric(context.Background(), v1.ResourceCPU, "missing", labels.Everything(), "")
	if err == nil || !strings.HasPrefix(err.Error(), "unable to fetch metrics from resource metrics API: ") || !strings.Contains(err.Error(), "could not find the requested resource") {
		t.Errorf("404: err = %v", err)
	}
}

func TestGetRawMetric(t *testing.T) {
	body := `{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":[
	  {"describedObject":{"kind":"Pod","namespace":"ns","name":"web-1","apiVersion":"/v1"},"metric":{"name":"qps","selector":null},"timestamp":"2025-01-02T03:04:05Z","windowSeconds":30,"value":"1500m"},
	  {"describedObject":{"kind":"Pod","namespace":"ns","name":"web-2","apiVersion":"/v1"},"metric":{"name":"qps","selector":null},"timestamp":"2025-01-02T03:04:06Z","value":"2"}]}`
	c, api := newTestClient(t, map[string]string{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps": body}, nil)
	got, ts, err := c.GetRawMetric(context.Background(), "qps", "ns", labels.SelectorFromSet(labels.Set{"app": "web"}), labels.SelectorFromSet(labels.Set{"verb": "GET"}))
	if err != nil {
		t.Fatal(err)
	}
	if !ts.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("timestamp = %v", ts)
	}
	if got["web-1"].Value != 1500 || got["web-1"].Window != 30*time.Second {
		t.Errorf("web-1 = %+v", got["web-1"])
	}
	// Without windowSeconds the default one-minute window applies.
	if got["web-2"].Value != 2000 || got["web-2"].Window != time.Minute {
		t.Errorf("web-2 = %+v", got["web-2"])
	}
	q := api.last().URL.Query()
	if q.Get("labelSelector") != "app=web" || q.Get("metricLabelSelector") != "verb=GET" {
		t.Errorf("query = %v", q)
	}

	_, _, err = c.GetRawMetric(context.Background(), "other", "ns", labels.Everything(), labels.Everything())
	if err == nil || !strings.HasPrefix(err.Error(), "unable to fetch metrics from custom metrics API: ") {
		t.Errorf("404: err = %v", err)
	}
}

func TestGetRawMetricEmpty(t *testing.T) {
	c, _ := newTestClient(t, map[string]string{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps": `{"items":[]}`}, nil)
	_, _, err := c.GetRawMetric(context.Background(), "qps", "ns", labels.Everything(), labels.Everything())
	if err == nil || err.Error() != "no metrics returned from custom metrics API" {
		t.Errorf("err = %v", err)
	}
}

func testMapper() apimeta.RESTMapper {
	m := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "networking.k8s.io", Version: "v1"}, {Group: "apps", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, apimeta.RESTScopeNamespace)
	m.AddSpecific(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployment"}, apimeta.RESTScopeNamespace)
	return m
}

func TestGetObjectMetric(t *testing.T) {
	one := `{"items":[{"describedObject":{"kind":"Ingress","name":"front"},"metric":{"name":"hits"},"timestamp":"2025-01-02T03:04:05Z","value":"42"}]}`
	two := `{"items":[{"value":"1"},{"value":"2"}]}`
	c, api := newTestClient(t, map[string]string{
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/ingresses.networking.k8s.io/front/hits": one,
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/metrics/queue":                          one,
		"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/web/hits":              two,
	}, testMapper())
	ctx := context.Background()

	v, ts, err := c.GetObjectMetric(ctx, "hits", "ns", &autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "front"}, labels.SelectorFromSet(labels.Set{"path": "a"}))
	if err != nil || v != 42000 || !ts.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("ingress: %v %v %v", v, ts, err)
	}
	if q := api.last().URL.Query(); q.Get("metricLabelSelector") != "path=a" || q.Has("labelSelector") {
		t.Errorf("query = %v", q)
	}

	// The namespace's own metric lives under .../namespaces/<ns>/metrics;
	// the name in the reference is ignored.
	v, _, err = c.GetObjectMetric(ctx, "queue", "ns", &autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Namespace", Name: "elsewhere"}, labels.Everything())
	if err != nil || v != 42000 {
		t.Errorf("namespace: %v %v", v, err)
	}

	_, _, err = c.GetObjectMetric(ctx, "hits", "ns", &autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}, labels.Everything())
	if err == nil || err.Error() != "unable to fetch metrics from custom metrics API: the custom metrics API server returned 2 results when we asked for exactly one" {
		t.Errorf("two results: err = %v", err)
	}

	_, _, err = c.GetObjectMetric(ctx, "hits", "ns", &autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}, labels.Everything())
	if err == nil || !strings.HasPrefix(err.Error(), "unable to fetch metrics from custom metrics API: unable to map kind Widget.example.com to resource: ") {
		t.Errorf("unknown kind: err = %v", err)
	}
}

func TestGetObjectMetricGuessesResourceWithoutMapper(t *testing.T) {
	one := `{"items":[{"value":"7"}]}`
	c, _ := newTestClient(t, map[string]string{"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/ingresses.networking.k8s.io/front/hits": one}, nil)
	v, _, err := c.GetObjectMetric(context.Background(), "hits", "ns", &autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "front"}, labels.Everything())
	if err != nil || v != 7000 {
		t.Errorf("got %v, %v", v, err)
	}
}

func TestGetExternalMetric(t *testing.T) {
	body := `{"kind":"ExternalMetricValueList","apiVersion":"external.metrics.k8s.io/v1beta1","metadata":{},"items":[
	  {"metricName":"queue_length","metricLabels":{"queue":"a"},"timestamp":"2025-01-02T03:04:05Z","window":60,"value":"10"},
	  {"metricName":"queue_length","metricLabels":{"queue":"a"},"timestamp":"2025-01-02T03:04:06Z","value":"500m"}]}`
	c, api := newTestClient(t, map[string]string{
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue_length": body,
		"/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/nothing":      `{"items":[]}`,
	}, nil)
	got, ts, err := c.GetExternalMetric(context.Background(), "queue_length", "ns", labels.SelectorFromSet(labels.Set{"queue": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 10000 || got[1] != 500 {
		t.Errorf("values = %v", got)
	}
	if !ts.Equal(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("timestamp = %v", ts)
	}
	if q := api.last().URL.Query(); q.Get("labelSelector") != "queue=a" {
		t.Errorf("query = %v", q)
	}

	_, _, err = c.GetExternalMetric(context.Background(), "nothing", "ns", labels.Everything())
	if err == nil || err.Error() != "no metrics returned from external metrics API" {
		t.Errorf("empty: err = %v", err)
	}
	_, _, err = c.GetExternalMetric(context.Background(), "missing", "ns", labels.Everything())
	if err == nil || !strings.HasPrefix(err.Error(), "unable to fetch metrics from external metrics API: ") {
		t.Errorf("404: err = %v", err)
	}
}
