package endpointslicemirroring

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	esutil "github.com/kcmclone/kube-controller-manager/pkg/controller/util/endpointslice"
)

func TestMetricsCacheTotals(t *testing.T) {
	c := newMetricsCache(100)
	k80 := portMapKey{addressType: "IPv4", portsHash: "80"}
	k443 := portMapKey{addressType: "IPv4", portsHash: "443"}
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}

	c.update(a, map[portMapKey]esutil.PortMapEfficiency{k80: {Endpoints: 150, Slices: 3}, k443: {Endpoints: 0, Slices: 0}})
	c.update(b, map[portMapKey]esutil.PortMapEfficiency{k80: {Endpoints: 10, Slices: 1}})
	if want := (cacheTotals{endpoints: 160, actualSlices: 4, desiredSlices: 3}); c.totals != want {
		t.Errorf("totals %+v, want %+v", c.totals, want)
	}
	c.update(a, map[portMapKey]esutil.PortMapEfficiency{k80: {Endpoints: 20, Slices: 1}})
	if want := (cacheTotals{endpoints: 30, actualSlices: 2, desiredSlices: 2}); c.totals != want {
		t.Errorf("after replace: totals %+v, want %+v", c.totals, want)
	}
	c.delete(a)
	c.delete(a)
	if want := (cacheTotals{endpoints: 10, actualSlices: 1, desiredSlices: 1}); c.totals != want {
		t.Errorf("after delete: totals %+v, want %+v", c.totals, want)
	}
	if v, _ := testutil.GetGaugeMetricValue(numEndpointSlices.WithLabelValues()); v != 1 {
		t.Errorf("num_endpoint_slices = %v", v)
	}
}

func TestSyncMetrics(t *testing.T) {
	f := newFixture(t, 1000)
	creates, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("create"))
	updates, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("update"))
	f.mirror(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1", "10.0.0.2")}))
	if v, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("create")); v != creates+1 {
		t.Errorf("creates %v -> %v", creates, v)
	}
	if v, _ := testutil.GetGaugeMetricValue(endpointsDesired.WithLabelValues()); v != 2 {
		t.Errorf("endpoints_desired = %v", v)
	}
	f.add(newEndpoints("web", endpointSubset{Ports: httpPort(80), Addresses: addrs("10.0.0.1")}))
	f.mustSync("web")
	if v, _ := testutil.GetCounterMetricValue(endpointSliceChanges.WithLabelValues("update")); v != updates+1 {
		t.Errorf("updates %v -> %v", updates, v)
	}

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range families {
		if strings.HasPrefix(mf.GetName(), metricsSubsystem+"_") {
			names[mf.GetName()] = true
		}
	}
	for _, want := range []string{
		"addresses_skipped_per_sync", "changes", "desired_endpoint_slices", "endpoints_added_per_sync",
		"endpoints_desired", "endpoints_removed_per_sync", "endpoints_sync_duration", "endpoints_updated_per_sync",
		"num_endpoint_slices",
	} {
		if !names[metricsSubsystem+"_"+want] {
			t.Errorf("metric %s_%s not exposed (have %v)", metricsSubsystem, want, names)
		}
	}
}
