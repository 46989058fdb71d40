package statefulset

import (
	"sync"

	apps "k8s.io/api/apps/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const metricsSubsystem = "statefulset_controller"

// Label names of the per-set gauges, as upstream.
var setLabels = []string{"statefulset_namespace", "statefulset_name", "pod_management_policy"}

var (
	// maxUnavailableGauge is the resolved maxUnavailable of each set
	// (MaxUnavailableStatefulSet feature).
	maxUnavailableGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "statefulset_max_unavailable",
		Help:           "Maximum number of unavailable pods allowed during StatefulSet rolling updates",
		StabilityLevel: metrics.ALPHA,
	}, setLabels)

	// unavailableReplicasGauge counts a set's unavailable wanted pods, as
	// last seen by a rolling update.
	unavailableReplicasGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "statefulset_unavailable_replicas",
		Help:           "Current number of unavailable pods in StatefulSet",
		StabilityLevel: metrics.ALPHA,
	}, setLabels)

	// staleSyncSkips counts syncs postponed because a cache lagged our writes.
	staleSyncSkips = controller.NewStaleSyncSkipsMetric(metricsSubsystem, "StatefulSet")

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(maxUnavailableGauge, unavailableReplicasGauge, staleSyncSkips)
	})
}

// forgetSetMetrics drops the series of a deleted set, whatever pod
// management policy it had.
func forgetSetMetrics(namespace, name string) {
	for _, policy := range []string{string(apps.OrderedReadyPodManagement), string(apps.ParallelPodManagement), ""} {
		maxUnavailableGauge.DeleteLabelValues(namespace, name, policy)
		unavailableReplicasGauge.DeleteLabelValues(namespace, name, policy)
	}
}
