package daemon

import (
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const metricsSubsystem = "daemonset_controller"

var (
	// staleSyncSkips counts syncs postponed because a cache lagged our writes.
	staleSyncSkips = controller.NewStaleSyncSkipsMetric(metricsSubsystem, "DaemonSet")

	registerOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(staleSyncSkips)
	})
}
