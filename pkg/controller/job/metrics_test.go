package job

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"
)

// The families upstream exposes once a Job has been synced, created pods
// and finished.
func TestMetricsExposed(t *testing.T) {
	f := newFixture(t)
	j := newJob("m", ptr.To[int32](1), ptr.To[int32](1), 6)
	f.addJob(j)
	f.sync(j)
	f2 := newFixture(t)
	f2.addJob(j)
	p := newPod(j, v1.PodSucceeded, -1, f2.clock.Now())
	f2.addPods(p)
	recordTrackingFinalizerChange(nil, p)
	f2.sync(j)

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range families {
		got[mf.GetName()] = true
	}
	for _, name := range []string{
		"job_controller_job_pods_creation_total",
		"job_controller_job_pods_finished_total",
		"job_controller_job_sync_duration_seconds",
		"job_controller_job_syncs_total",
		"job_controller_jobs_finished_total",
		"job_controller_terminated_pods_tracking_finalizer_total",
	} {
		if !got[name] {
			t.Errorf("metric %s not exposed", name)
		}
	}
}
