package replicaset

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// A pod create that fails without the API server's verdict (the server
// died mid-request) may have created the pod. The next sync must not
// create it again from a cache that has not seen it: it lists the owner's
// pods live and waits until the cache is as new as the newest.
func TestCreateWithoutAnswerNotRepeatedFromStaleCache(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createErr error
		uncertain bool
	}{
		{"connection lost", errors.New("http2: client connection lost"), true},
		{"server timeout", apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "create", 1), true},
		// Positive control: a refusal says the pod does not exist.
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS("web", 2)
			f := newFixture(t, BurstReplicas, rs)
			store := &testutil.StaleAfterWrite{}
			f.rsc.consistency = store
			// What the lost create made: in the API server, not in the cache.
			ghost := newPod("ghost", rs)
			ghost.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
			ghost.ResourceVersion = "7"
			if err := f.client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}

			f.pc.Err = tc.createErr
			if err := f.sync("ns/web"); err == nil {
				t.Fatal("the failed create was not reported")
			}
			f.pc.Err = nil
			f.pc.Templates = nil
			f.client.ClearActions()

			err := f.sync("ns/web")
			listed := false
			for _, a := range f.client.Actions() {
				listed = listed || (a.GetVerb() == "list" && a.GetResource().Resource == "pods")
			}
			if !tc.uncertain {
				if listed || err != nil || len(f.pc.Templates) != 2 {
					t.Fatalf("after a refusal: listed %v, err %v, created %d; want no list, no error, 2 created", listed, err, len(f.pc.Templates))
				}
				return
			}
			if !listed || store.Wrote() != "7" || !errors.Is(err, testutil.ErrCacheBehind) {
				t.Fatalf("listed %v, waiting for %q, err %v; want a live list and a wait for version 7", listed, store.Wrote(), err)
			}
			if len(f.pc.Templates) != 0 {
				t.Fatalf("created %d pods from a cache that has not seen the lost create's pod", len(f.pc.Templates))
			}
		})
	}
}
