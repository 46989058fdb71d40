// Package operationmetrics holds the volume operation metrics that every
// volume controller of kube-controller-manager records into (upstream
// defines them once, in pkg/volume/util). Defining them in more than one
// package would make the second registration panic.
package operationmetrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var buckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}

var (
	// StorageOperationDuration times each volume operation.
	StorageOperationDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "storage_operation_duration_seconds",
		Help:           "Storage operation duration",
		Buckets:        buckets,
		StabilityLevel: metrics.BETA,
	}, []string{"volume_plugin", "operation_name", "status", "migrated"})
	// VolumeOperationTotalSeconds times an operation from its first
	// attempt to its success.
	VolumeOperationTotalSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "volume_operation_total_seconds",
		Help:           "Storage operation end to end duration in seconds",
		Buckets:        buckets,
		StabilityLevel: metrics.BETA,
	}, []string{"plugin_name", "operation_name"})
	// CSIOperationsSeconds is registered, as upstream does, though no
	// controller here calls a CSI driver.
	CSIOperationsSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "csi",
		Name:           "operations_seconds",
		Help:           "Container Storage Interface operation duration with gRPC error code status total",
		Buckets:        buckets,
		StabilityLevel: metrics.ALPHA,
	}, []string{"driver_name", "method_name", "grpc_status_code", "migrated"})
)

var registerOnce sync.Once

// Register registers the metrics with the legacy registry once per process.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(StorageOperationDuration)
		legacyregistry.MustRegister(VolumeOperationTotalSeconds)
		legacyregistry.MustRegister(CSIOperationsSeconds)
	})
}
