package nodelifecycle

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metric names, labels, help texts and buckets are upstream's, so
// dashboards built for kube-controller-manager keep working.
const nodeCollectorSubsystem = "node_collector"

var (
	zoneHealth = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "zone_health",
		Help:           "Gauge measuring percentage of healthy nodes per zone.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"zone"})

	zoneSize = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "zone_size",
		Help:           "Gauge measuring number of registered Nodes per zones.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"zone"})

	unhealthyNodes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "unhealthy_nodes_in_zone",
		Help:           "Gauge measuring number of not Ready Nodes per zones.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"zone"})

	evictionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "evictions_total",
		Help:           "Number of Node evictions that happened since current instance of NodeController started.",
		StabilityLevel: metrics.STABLE,
	}, []string{"zone"})

	updateNodeHealthDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "update_node_health_duration_seconds",
		Help:           "Duration in seconds for NodeController to update the health of a single node.",
		Buckets:        metrics.ExponentialBuckets(0.001, 4, 8),
		StabilityLevel: metrics.ALPHA,
	})

	updateAllNodesHealthDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      nodeCollectorSubsystem,
		Name:           "update_all_nodes_health_duration_seconds",
		Help:           "Duration in seconds for NodeController to update the health of all nodes.",
		Buckets:        metrics.ExponentialBuckets(0.01, 4, 8),
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// Register adds the node_collector_* metrics to the legacy registry. It is
// idempotent; NewController calls it.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(zoneHealth, zoneSize, unhealthyNodes, evictionsTotal,
			updateNodeHealthDuration, updateAllNodesHealthDuration)
	})
}
