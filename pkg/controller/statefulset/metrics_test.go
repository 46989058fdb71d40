package statefulset

import (
	"fmt"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func gaugeValue(t *testing.T, vec *metrics.GaugeVec, lvs ...string) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(vec.WithLabelValues(lvs...))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The families carry upstream's names and labels.
func TestMetricNames(t *testing.T) {
	registerMetrics()
	maxUnavailableGauge.WithLabelValues("ns", "n", "Parallel").Set(1)
	unavailableReplicasGauge.WithLabelValues("ns", "n", "Parallel").Set(0)
	staleSyncSkips.WithLabelValues("", "pods").Add(0)
	defer forgetSetMetrics("ns", "n")
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := map[string][]string{}
	for _, mf := range families {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		var names []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			names = append(names, l.GetName())
		}
		labelsOf[mf.GetName()] = names
	}
	for name, want := range map[string]string{
		"statefulset_controller_statefulset_max_unavailable":      "[pod_management_policy statefulset_name statefulset_namespace]",
		"statefulset_controller_statefulset_unavailable_replicas": "[pod_management_policy statefulset_name statefulset_namespace]",
		"statefulset_controller_stale_sync_skips_total":           "[group resource]",
	} {
		got, ok := labelsOf[name]
		if !ok {
			t.Errorf("%s not exposed", name)
			continue
		}
		if fmt.Sprint(got) != want {
			t.Errorf("%s labels %v, want %s", name, got, want)
		}
	}
}
