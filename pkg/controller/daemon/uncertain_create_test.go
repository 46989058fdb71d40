package daemon

import (
	"testing"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// A daemon pod create that fails without the API server's verdict may have
// created the pod. The next sync must not create the node's pod again from
// a cache that has not seen it: it lists the DaemonSet's pods live and
// waits until the cache is as new as the newest.
func TestCreateWithoutAnswerNotRepeatedFromStaleCache(t *testing.T) {
	for _, fc := range testutil.FailedCreates() {
		t.Run(fc.Name, func(t *testing.T) {
			f := newFixture(t, nodes(1)...)
			store := &testutil.StaleAfterWrite{}
			f.dsc.consistency = store
			ds := newDS("ds")
			f.addDS(ds)
			ghost := newPod("ghost", ds, "node-0", hashOf(ds))
			ghost.ResourceVersion = "7"
			if err := f.client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}
			sync := func() error { return f.sync(ds) }
			created := func() int { return len(f.createdNodes()) }
			testutil.CheckSyncAfterFailedCreate(t, fc, f.client, store, f.pc, sync, created, 1)
		})
	}
}
