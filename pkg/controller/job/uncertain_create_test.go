package job

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// A Job's pod create that fails without the API server's verdict may have
// created the pod. The next sync must not create it (its index) again from
// a cache that has not seen it: it lists the Job's pods live and waits
// until the cache is as new as the newest.
func TestCreateWithoutAnswerNotRepeatedFromStaleCache(t *testing.T) {
	for _, tc := range []struct {
		name      string
		createErr error
		uncertain bool
	}{
		{"connection lost", errors.New("http2: client connection lost"), true},
		{"timeout", apierrors.NewTimeoutError("request did not complete within the allowed duration", 0), true},
		// Positive control: a refusal says the pod does not exist.
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("quota")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			client := f.jm.kubeClient.(*fake.Clientset)
			store := &testutil.StaleAfterWrite{}
			f.jm.consistency = store
			j := indexed(newJob("pi", ptr.To[int32](1), ptr.To[int32](1), 6))
			f.addJob(j)
			// What the lost create made: in the API server, not in the cache.
			ghost := newPod(j, v1.PodPending, 0, f.clock.Now())
			ghost.ResourceVersion = "7"
			if err := client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}
			_, ctx := ktesting.NewTestContext(t)
			key := j.Namespace + "/" + j.Name

			f.pc.Err = tc.createErr
			if err := f.jm.syncJob(ctx, key); err == nil {
				t.Fatal("the failed create was not reported")
			}
			f.pc.Err = nil
			f.pc.Clear()
			client.ClearActions()

			err := f.jm.syncJob(ctx, key)
			listed := false
			for _, a := range client.Actions() {
				listed = listed || (a.GetVerb() == "list" && a.GetResource().Resource == "pods")
			}
			if !tc.uncertain {
				if listed || err != nil || len(f.pc.Templates) != 1 {
					t.Fatalf("after a refusal: listed %v, err %v, created %d; want no list, no error, index 0 created", listed, err, len(f.pc.Templates))
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
