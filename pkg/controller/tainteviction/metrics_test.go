package tainteviction

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

func TestMetricsRegistered(t *testing.T) {
	Register()
	podDeletionsTotal.Add(0)
	podDeletionsLatency.Observe(0)
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, name := range []string{"taint_eviction_controller_pod_deletions_total", "taint_eviction_controller_pod_deletion_duration_seconds"} {
		if !got[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}
