package operationmetrics

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// Both volume controllers call Register; the second call must not panic
// and the metrics must be gathered once.
func TestRegisterTwice(t *testing.T) {
	Register()
	Register()
	StorageOperationDuration.WithLabelValues("kubernetes.io/csi", "volume_attach", "success", "false").Observe(1)
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "storage_operation_duration_seconds") {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("storage_operation_duration_seconds gathered %d times", seen)
	}
}
