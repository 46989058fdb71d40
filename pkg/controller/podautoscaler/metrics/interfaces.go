// Package metrics reads the values the horizontal pod autoscaler scales on:
// pod resource usage from metrics.k8s.io, pod and object metrics from
// custom.metrics.k8s.io and external metrics from external.metrics.k8s.io.
package metrics

import (
	"context"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PodMetric is one pod's sample. Value is a milli-value (millicores for
// CPU, milli-bytes for memory, milli-units for custom metrics).
type PodMetric struct {
	Timestamp time.Time
	Window    time.Duration
	Value     int64
}

// PodMetricsInfo maps pod names to their sample.
type PodMetricsInfo map[string]PodMetric

// MetricsClient fetches the metrics an HPA can refer to. The returned
// timestamp is that of the first sample.
type MetricsClient interface {
	// GetResourceMetric returns the usage of resource of the pods selected
	// in namespace: of the named container only, or summed over all
	// containers when container is "". Pods without a usable sample are
	// left out rather than reported as an error; callers compare with the
	// pods they know.
	GetResourceMetric(ctx context.Context, resource v1.ResourceName, namespace string, selector labels.Selector, container string) (PodMetricsInfo, time.Time, error)
	// GetRawMetric returns a custom metric of the pods selected in namespace.
	GetRawMetric(ctx context.Context, metricName string, namespace string, selector labels.Selector, metricSelector labels.Selector) (PodMetricsInfo, time.Time, error)
	// GetObjectMetric returns a custom metric describing one object.
	GetObjectMetric(ctx context.Context, metricName string, namespace string, objectRef *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error)
	// GetExternalMetric returns every value of an external metric matching
	// selector.
	GetExternalMetric(ctx context.Context, metricName string, namespace string, selector labels.Selector) ([]int64, time.Time, error)
}
