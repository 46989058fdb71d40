package operations

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The volume operation metrics every user of the volume operation
// executor registers (kubelet, and here the attach/detach controller).
// Only storage_operation_duration_seconds is observed by this controller;
// the other two are registered because upstream registers them alongside.
var (
	// StorageOperationMetric times attach, detach and verify operations.
	StorageOperationMetric = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Name:           "storage_operation_duration_seconds",
			Help:           "Storage operation duration",
			Buckets:        []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
			StabilityLevel: metrics.BETA,
		},
		[]string{"volume_plugin", "operation_name", "status", "migrated"},
	)
	operationEndToEndLatencyMetric = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Name:           "volume_operation_total_seconds",
			Help:           "Storage operation end to end duration in seconds",
			Buckets:        []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
			StabilityLevel: metrics.BETA,
		},
		[]string{"plugin_name", "operation_name"},
	)
	csiOperationsLatencyMetric = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Subsystem:      "csi",
			Name:           "operations_seconds",
			Help:           "Container Storage Interface operation duration with gRPC error code status total",
			Buckets:        []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600},
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"driver_name", "method_name", "grpc_status_code", "migrated"},
	)
)

var registerOnce sync.Once

// RegisterMetrics registers the volume operation metrics once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(StorageOperationMetric)
		legacyregistry.MustRegister(operationEndToEndLatencyMetric)
		legacyregistry.MustRegister(csiOperationsLatencyMetric)
	})
}

// Operation names, the operation_name label.
const (
	AttachOperationName = "volume_attach"
	DetachOperationName = "volume_detach"
	VerifyOperationName = "verify_volumes_are_attached_per_node"
)

// observe records one operation, timed from start. Nothing here is ever
// migrated: in-tree volumes are not translated to CSI.
func observe(plugin, operation string, start time.Time, err error) {
	status := "success"
	if err != nil {
		status = "fail-unknown"
	}
	StorageOperationMetric.WithLabelValues(plugin, operation, status, strconv.FormatBool(false)).Observe(time.Since(start).Seconds())
}
