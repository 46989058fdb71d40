package daemon

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// A daemon pod create that fails without the API server's verdict may have
// created the pod. The next sync must not create the node's pod again from
// a cache that has not seen it: it lists the DaemonSet's pods live and
// waits until the cache is as new as the newest.
func TestCreateWithoutAnswerNotRepeatedFromStaleCache(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createErr error
		uncertain bool
	}{
		{"connection lost", errors.New("http2: client connection lost"), true},
		{"internal error", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		// Positive control: a refusal says the pod does not exist.
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nodes(1)...)
			store := &testutil.StaleAfterWrite{}
			f.dsc.consistency = store
			ds := newDS("ds")
			f.addDS(ds)
			// What the lost create made: in the API server, not in the cache.
			ghost := newPod("ghost", ds, "node-0", hashOf(ds))
			ghost.ResourceVersion = "7"
			if err := f.client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}

			f.pc.Err = tc.createErr
			if err := f.sync(ds); err == nil {
				t.Fatal("the failed create was not reported")
			}
			f.pc.Err = nil
			f.pc.Clear()
			f.client.ClearActions()

			err := f.sync(ds)
			listed := false
			for _, a := range f.client.Actions() {
				listed = listed || (a.GetVerb() == "list" && a.GetResource().Resource == "pods")
			}
			if !tc.uncertain {
				if listed || err != nil || len(f.createdNodes()) != 1 {
					t.Fatalf("after a refusal: listed %v, err %v, created on %v; want no list, no error, node-0's pod created", listed, err, f.createdNodes())
				}
				return
			}
			if !listed || store.Wrote() != "7" || !errors.Is(err, testutil.ErrCacheBehind) {
				t.Fatalf("listed %v, waiting for %q, err %v; want a live list and a wait for version 7", listed, store.Wrote(), err)
			}
			if got := f.createdNodes(); len(got) != 0 {
				t.Fatalf("created pods on %v from a cache that has not seen the lost create's pod", got)
			}
		})
	}
}
