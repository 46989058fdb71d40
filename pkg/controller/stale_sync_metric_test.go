package controller

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

func TestNewStaleSyncSkipsMetric(t *testing.T) {
	c := NewStaleSyncSkipsMetric("job_controller", "Job")
	reg := metrics.NewKubeRegistry()
	reg.MustRegister(c)
	c.WithLabelValues("", "pods").Inc()
	want := `
# HELP job_controller_stale_sync_skips_total [ALPHA] Total number of Job syncs skipped due to a stale watch cache.
# TYPE job_controller_stale_sync_skips_total counter
job_controller_stale_sync_skips_total{group="",resource="pods"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "job_controller_stale_sync_skips_total"); err != nil {
		t.Fatal(err)
	}
}
