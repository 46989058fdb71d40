package selinuxwarning

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// conflictDesc is one series per conflict (value always 1), so the labels
// say which pods and values conflict. Name, help and labels are upstream's.
var conflictDesc = metrics.NewDesc(
	metrics.BuildFQName("", "selinux_warning_controller", "selinux_volume_conflict"),
	"Conflict between two Pods using the same volume",
	[]string{"property", "pod1_namespace", "pod1_name", "pod1_value", "pod2_namespace", "pod2_name", "pod2_value"}, nil,
	metrics.ALPHA, "")

var registerOnce sync.Once

// registerMetrics serves the first controller's conflicts (there is one
// controller per process).
func registerMetrics(c *volumeCache) {
	registerOnce.Do(func() {
		legacyregistry.CustomMustRegister(newCollector(c))
	})
}

// collector reads the conflicts at scrape time.
type collector struct {
	metrics.BaseStableCollector
	cache *volumeCache
}

var _ metrics.StableCollector = &collector{}

func newCollector(c *volumeCache) *collector { return &collector{cache: c} }

func (c *collector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- conflictDesc
}

func (c *collector) CollectWithStability(ch chan<- metrics.Metric) {
	for _, conflict := range c.cache.getConflicts() {
		ch <- metrics.NewLazyConstMetric(conflictDesc, metrics.GaugeValue, 1,
			conflict.PropertyName,
			conflict.Pod.Namespace, conflict.Pod.Name, conflict.PropertyValue,
			conflict.OtherPod.Namespace, conflict.OtherPod.Name, conflict.OtherPropertyValue)
	}
}
