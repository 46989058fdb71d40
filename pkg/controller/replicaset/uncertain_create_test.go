package replicaset

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// A pod create that fails without the API server's verdict (the server
// died mid-request) may have created the pod. The next sync must not
// create it again from a cache that has not seen it: it lists the owner's
// pods live and waits until the cache is as new as the newest.
func TestCreateWithoutAnswerNotRepeatedFromStaleCache(t *testing.T) {
	for _, fc := range testutil.FailedCreates() {
		t.Run(fc.Name, func(t *testing.T) {
			rs := newRS("web", 2)
			f := newFixture(t, BurstReplicas, rs)
			store := &testutil.StaleAfterWrite{}
			f.rsc.consistency = store
			ghost := newPod("ghost", rs)
			ghost.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
			ghost.ResourceVersion = "7"
			if err := f.client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}
			sync := func() error { return f.sync("ns/web") }
			created := func() int { return len(f.pc.Templates) }
			testutil.CheckSyncAfterFailedCreate(t, fc, f.client, store, f.pc, sync, created, 2)
		})
	}
}
