package endpointslice

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestSyncMetrics(t *testing.T) {
	f := newFixture(t, 100)
	f.addNode("node-1", "zone-a")
	f.addService(newService("web"))
	for i := 0; i < 3; i++ {
		f.addPod(newPod("web", i, true))
	}
	success, _ := testutil.GetCounterMetricValue(endpointSliceSyncs.WithLabelValues("success"))
	stale, _ := testutil.GetCounterMetricValue(endpointSliceSyncs.WithLabelValues("stale"))
	creates, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("create"))

	if err := f.c.syncServiceTracked(f.ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncServiceTracked(f.ctx, "ns/web"); !IsStaleInformerCacheErr(err) {
		t.Fatalf("want stale, got %v", err)
	}
	if v, _ := testutil.GetCounterMetricValue(endpointSliceSyncs.WithLabelValues("success")); v != success+1 {
		t.Errorf("success syncs %v -> %v", success, v)
	}
	if v, _ := testutil.GetCounterMetricValue(endpointSliceSyncs.WithLabelValues("stale")); v != stale+1 {
		t.Errorf("stale syncs %v -> %v", stale, v)
	}
	if v, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("create")); v != creates+1 {
		t.Errorf("creates %v -> %v", creates, v)
	}
	if v, _ := testutil.GetGaugeMetricValue(endpointsDesired.WithLabelValues()); v < 3 {
		t.Errorf("endpoints_desired %v", v)
	}

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), "endpoint_slice_controller_") {
			names[mf.GetName()] = true
		}
	}
	for _, want := range []string{
		"endpoint_slice_controller_changes", "endpoint_slice_controller_desired_endpoint_slices",
		"endpoint_slice_controller_endpoints_added_per_sync", "endpoint_slice_controller_endpoints_desired",
		"endpoint_slice_controller_endpoints_removed_per_sync", "endpoint_slice_controller_endpointslices_changed_per_sync",
		"endpoint_slice_controller_num_endpoint_slices", "endpoint_slice_controller_syncs",
	} {
		if !names[want] {
			t.Errorf("metric %s not exposed (have %v)", want, names)
		}
	}
}
