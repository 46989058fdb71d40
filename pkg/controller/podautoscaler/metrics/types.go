package metrics

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The wire types below mirror only the fields the autoscaler reads from the
// aggregated metrics APIs (k8s.io/metrics is not a dependency of this
// project); JSON ignores the rest.

// podMetricsList is metrics.k8s.io/v1beta1 PodMetricsList.
type podMetricsList struct {
	Items []podMetrics `json:"items"`
}

type podMetrics struct {
	Metadata   objectMeta         `json:"metadata"`
	Timestamp  metav1.Time        `json:"timestamp"`
	Window     metav1.Duration    `json:"window"`
	Containers []containerMetrics `json:"containers"`
}

type objectMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type containerMetrics struct {
	Name  string          `json:"name"`
	Usage v1.ResourceList `json:"usage"`
}

// metricValueList is custom.metrics.k8s.io/v1beta2 MetricValueList.
type metricValueList struct {
	Items []metricValue `json:"items"`
}

type metricValue struct {
	DescribedObject v1.ObjectReference `json:"describedObject"`
	Metric          metricIdentifier   `json:"metric"`
	Timestamp       metav1.Time        `json:"timestamp"`
	WindowSeconds   *int64             `json:"windowSeconds,omitempty"`
	Value           resource.Quantity  `json:"value"`
}

type metricIdentifier struct {
	Name     string                `json:"name"`
	Selector *metav1.LabelSelector `json:"selector"`
}

// externalMetricValueList is external.metrics.k8s.io/v1beta1
// ExternalMetricValueList.
type externalMetricValueList struct {
	Items []externalMetricValue `json:"items"`
}

type externalMetricValue struct {
	MetricName   string            `json:"metricName"`
	MetricLabels map[string]string `json:"metricLabels"`
	Timestamp    metav1.Time       `json:"timestamp"`
	// The field is called window on the wire but counts seconds.
	WindowSeconds *int64            `json:"window,omitempty"`
	Value         resource.Quantity `json:"value"`
}
