package job

import (
	"testing"

	v1 "k8s.io/api/core/v1"
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
	for _, fc := range testutil.FailedCreates() {
		t.Run(fc.Name, func(t *testing.T) {
			f := newFixture(t)
			client := f.jm.kubeClient.(*fake.Clientset)
			store := &testutil.StaleAfterWrite{}
			f.jm.consistency = store
			j := indexed(newJob("pi", ptr.To[int32](1), ptr.To[int32](1), 6))
			f.addJob(j)
			ghost := newPod(j, v1.PodPending, 0, f.clock.Now())
			ghost.ResourceVersion = "7"
			if err := client.Tracker().Add(ghost); err != nil {
				t.Fatal(err)
			}
			_, ctx := ktesting.NewTestContext(t)
			sync := func() error { return f.jm.syncJob(ctx, j.Namespace+"/"+j.Name) }
			created := func() int { return len(f.pc.Templates) }
			testutil.CheckSyncAfterFailedCreate(t, fc, client, store, f.pc, sync, created, 1)
		})
	}
}
