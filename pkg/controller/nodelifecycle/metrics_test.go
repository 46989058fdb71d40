package nodelifecycle

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

func TestMetricsRegistered(t *testing.T) {
	Register()
	Register() // idempotent
	zoneSize.WithLabelValues("z").Set(1)
	zoneHealth.WithLabelValues("z").Set(100)
	unhealthyNodes.WithLabelValues("z").Set(0)
	evictionsTotal.WithLabelValues("z").Add(0)
	updateNodeHealthDuration.Observe(0.01)
	updateAllNodesHealthDuration.Observe(0.01)
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{
		"node_collector_zone_health", "node_collector_zone_size", "node_collector_unhealthy_nodes_in_zone",
		"node_collector_evictions_total", "node_collector_update_node_health_duration_seconds",
		"node_collector_update_all_nodes_health_duration_seconds",
	} {
		if !got[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}
