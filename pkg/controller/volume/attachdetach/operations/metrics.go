package operations

import (
	"strconv"
	"time"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/operationmetrics"
)

// RegisterMetrics registers the volume operation metrics, shared with the
// other volume controllers.
func RegisterMetrics() { operationmetrics.Register() }

// Operation names, the operation_name label.
const (
	AttachOperationName = "volume_attach"
	DetachOperationName = "volume_detach"
	VerifyOperationName = "verify_volumes_are_attached_per_node"
)

// observe records one operation, timed from start; migrated is whether
// the volume is an in-tree source translated to CSI.
func observe(plugin, operation string, start time.Time, err error, migrated bool) {
	status := "success"
	if err != nil {
		status = "fail-unknown"
	}
	operationmetrics.StorageOperationDuration.WithLabelValues(plugin, operation, status, strconv.FormatBool(migrated)).Observe(time.Since(start).Seconds())
}
