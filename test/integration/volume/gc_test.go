package volume

import (
	"testing"
	"time"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// runGC runs the garbage collector until the test ends.
func runGC(t *testing.T) {
	t.Helper()
	_, stop := framework.Shared(t).StartGarbageCollector(t, 30*time.Second)
	t.Cleanup(stop)
}
