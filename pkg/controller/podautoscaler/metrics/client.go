package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// The API versions the autoscaler reads, as upstream's clients do.
var (
	ResourceMetricsGroupVersion = schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"}
	CustomMetricsGroupVersion   = schema.GroupVersion{Group: "custom.metrics.k8s.io", Version: "v1beta2"}
	ExternalMetricsGroupVersion = schema.GroupVersion{Group: "external.metrics.k8s.io", Version: "v1beta1"}
)

const (
	// defaultMetricWindow is assumed for custom metrics that give none
	// (metrics-server's default resolution).
	defaultMetricWindow = time.Minute

	// allObjects names every object matching the label selector in a
	// custom metrics path.
	allObjects = "*"
)

// NewRESTMetricsClient returns a MetricsClient talking to the three metrics
// APIs at cfg (normally the apiserver, which proxies to the registered
// adapters). mapper turns the kinds of Object metrics into the resource
// names the custom metrics API expects; when nil, names are guessed from
// the kind (Deployment -> deployments).
func NewRESTMetricsClient(cfg *rest.Config, mapper apimeta.RESTMapper) (MetricsClient, error) {
	resourceClient, err := restClientFor(cfg, ResourceMetricsGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("resource metrics client: %w", err)
	}
	customClient, err := restClientFor(cfg, CustomMetricsGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("custom metrics client: %w", err)
	}
	externalClient, err := restClientFor(cfg, ExternalMetricsGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("external metrics client: %w", err)
	}
	return NewMetricsClientFor(resourceClient, customClient, externalClient, mapper), nil
}

// NewMetricsClientFor builds the client from one REST client per API (each
// configured for its group-version under /apis).
func NewMetricsClientFor(resourceClient, customClient, externalClient rest.Interface, mapper apimeta.RESTMapper) MetricsClient {
	return &restMetricsClient{resource: resourceClient, custom: customClient, external: externalClient, mapper: mapper}
}

// restClientFor configures a JSON REST client for gv: the local wire types
// only understand JSON, whatever content type the main client negotiates.
func restClientFor(cfg *rest.Config, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &gv
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

type restMetricsClient struct {
	resource rest.Interface
	custom   rest.Interface
	external rest.Interface
	mapper   apimeta.RESTMapper
}

var _ MetricsClient = &restMetricsClient{}

// getJSON sends req and decodes the body into out.
func getJSON(ctx context.Context, req *rest.Request, out interface{}) error {
	body, err := req.Do(ctx).Raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

// withParam sets a query parameter unless it is empty (empty selectors are
// left out, as the generated clients do).
func withParam(req *rest.Request, name, value string) *rest.Request {
	if value == "" {
		return req
	}
	return req.Param(name, value)
}

func (c *restMetricsClient) GetResourceMetric(ctx context.Context, resource v1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error) {
	var list podMetricsList
	req := withParam(c.resource.Get().Namespace(namespace).Resource("pods"), "labelSelector", selector.String())
	if err := getJSON(ctx, req, &list); err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from resource metrics API")
	}
	var res PodMetricsInfo
	if container != "" {
		res = containerUsage(ctx, list.Items, resource, container)
	} else {
		res = podUsage(ctx, list.Items, resource)
	}
	return res, list.Items[0].Timestamp.Time, nil
}

// containerUsage takes the named container's usage of each pod; pods
// without that container or without a sample for resource are left out.
func containerUsage(ctx context.Context, items []podMetrics, resource v1.ResourceName, container string) PodMetricsInfo {
	res := make(PodMetricsInfo, len(items))
	for _, m := range items {
		found := false
		for _, c := range m.Containers {
			if c.Name != container {
				continue
			}
			found = true
			if q, ok := c.Usage[resource]; ok {
				res[m.Metadata.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: q.MilliValue()}
			}
			break
		}
		if !found {
			klog.FromContext(ctx).V(2).Info("Missing container metric", "container", container, "pod", klog.KRef(m.Metadata.Namespace, m.Metadata.Name))
		}
	}
	return res
}

// podUsage sums the containers' usage of each pod. A pod is left out when
// any container lacks a sample: a partial sum would understate it.
func podUsage(ctx context.Context, items []podMetrics, resource v1.ResourceName) PodMetricsInfo {
	res := make(PodMetricsInfo, len(items))
	for _, m := range items {
		if len(m.Containers) == 0 {
			continue
		}
		var sum int64
		complete := true
		for _, c := range m.Containers {
			q, ok := c.Usage[resource]
			if !ok {
				complete = false
				klog.FromContext(ctx).V(2).Info("Missing resource metric", "resourceMetric", resource, "pod", klog.KRef(m.Metadata.Namespace, m.Metadata.Name))
				break
			}
			sum += q.MilliValue()
		}
		if complete {
			res[m.Metadata.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: m.Window.Duration, Value: sum}
		}
	}
	return res
}

// qualifiedResource is the resource[.group] the custom metrics API uses in
// paths for kinds of gk.
func (c *restMetricsClient) qualifiedResource(gk schema.GroupKind) (string, error) {
	if c.mapper == nil {
		plural, _ := apimeta.UnsafeGuessKindToResource(gk.WithVersion(""))
		return plural.GroupResource().String(), nil
	}
	mapping, err := c.mapper.RESTMapping(gk)
	if err != nil {
		return "", fmt.Errorf("unable to map kind %s to resource: %v", gk.String(), err)
	}
	return mapping.Resource.GroupResource().String(), nil
}

// customList fetches a custom metric for object name (or allObjects) of
// the resource behind gk in namespace.
func (c *restMetricsClient) customList(ctx context.Context, gk schema.GroupKind, namespace, name, metricName string, selector, metricSelector labels.Selector) (*metricValueList, error) {
	resource, err := c.qualifiedResource(gk)
	if err != nil {
		return nil, err
	}
	req := c.custom.Get().Namespace(namespace).Resource(resource).Name(name).SubResource(metricName)
	if selector != nil {
		req = withParam(req, "labelSelector", selector.String())
	}
	req = withParam(req, "metricLabelSelector", metricSelector.String())
	var list metricValueList
	if err := getJSON(ctx, req, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// namespaceMetric fetches a custom metric describing the namespace itself.
func (c *restMetricsClient) namespaceMetric(ctx context.Context, namespace, metricName string, metricSelector labels.Selector) (*metricValueList, error) {
	req := withParam(c.custom.Get().Namespace(namespace).Resource("metrics").Name(metricName), "metricLabelSelector", metricSelector.String())
	var list metricValueList
	if err := getJSON(ctx, req, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

func (c *restMetricsClient) GetRawMetric(ctx context.Context, metricName string, namespace string, selector labels.Selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error) {
	list, err := c.customList(ctx, schema.GroupKind{Kind: "Pod"}, namespace, allObjects, metricName, selector, metricSelector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from custom metrics API")
	}
	res := make(PodMetricsInfo, len(list.Items))
	for _, m := range list.Items {
		window := defaultMetricWindow
		if m.WindowSeconds != nil {
			window = time.Duration(*m.WindowSeconds) * time.Second
		}
		res[m.DescribedObject.Name] = PodMetric{Timestamp: m.Timestamp.Time, Window: window, Value: m.Value.MilliValue()}
	}
	return res, list.Items[0].Timestamp.Time, nil
}

func (c *restMetricsClient) GetObjectMetric(ctx context.Context, metricName string, namespace string, objectRef *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gvk := schema.FromAPIVersionAndKind(objectRef.APIVersion, objectRef.Kind)
	var list *metricValueList
	var err error
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		// A reference cannot leave the HPA's namespace, so the name in it
		// is ignored: the metric is the HPA namespace's.
		list, err = c.namespaceMetric(ctx, namespace, metricName, metricSelector)
	} else {
		list, err = c.customList(ctx, gvk.GroupKind(), namespace, objectRef.Name, metricName, nil, metricSelector)
	}
	if err == nil && len(list.Items) != 1 {
		err = fmt.Errorf("the custom metrics API server returned %v results when we asked for exactly one", len(list.Items))
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	return list.Items[0].Value.MilliValue(), list.Items[0].Timestamp.Time, nil
}

func (c *restMetricsClient) GetExternalMetric(ctx context.Context, metricName, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	req := withParam(c.external.Get().Namespace(namespace).Resource(metricName), "labelSelector", selector.String())
	var list externalMetricValueList
	if err := getJSON(ctx, req, &list); err != nil {
		return []int64{}, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, fmt.Errorf("no metrics returned from external metrics API")
	}
	res := make([]int64, 0, len(list.Items))
	for _, m := range list.Items {
		res = append(res, m.Value.MilliValue())
	}
	return res, list.Items[0].Timestamp.Time, nil
}
