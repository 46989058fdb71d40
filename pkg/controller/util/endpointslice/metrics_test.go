package util

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

func TestSharedMetricNames(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	changes := ChangesCounter("endpoint_slice_controller")
	desired := Gauge("endpoint_slice_controller", "endpoints_desired", "Number of endpoints desired", metrics.BETA)
	reg.MustRegister(changes, desired)
	changes.WithLabelValues("create").Inc()
	desired.WithLabelValues().Set(3)
	want := `
# HELP endpoint_slice_controller_changes [ALPHA] Number of EndpointSlice changes
# TYPE endpoint_slice_controller_changes counter
endpoint_slice_controller_changes{operation="create"} 1
# HELP endpoint_slice_controller_endpoints_desired [BETA] Number of endpoints desired
# TYPE endpoint_slice_controller_endpoints_desired gauge
endpoint_slice_controller_endpoints_desired 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"endpoint_slice_controller_changes", "endpoint_slice_controller_endpoints_desired"); err != nil {
		t.Fatal(err)
	}
}
