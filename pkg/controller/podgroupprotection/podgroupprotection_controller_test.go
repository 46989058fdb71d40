package podgroupprotection

import (
	"context"
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const ns = "default"

type fixture struct {
	c       *Controller
	client  *fake.Clientset
	pgStore cache.Store
	pods    cache.Store
}

func newFixture(t *testing.T, objs ...interface{}) *fixture {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pgInf, podInf := factory.Scheduling().V1beta1().PodGroups(), factory.Core().V1().Pods()
	c, err := NewController(logger, pgInf, podInf, client)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{c: c, client: client, pgStore: pgInf.Informer().GetStore(), pods: podInf.Informer().GetStore()}
	for _, o := range objs {
		switch o := o.(type) {
		case *schedulingv1beta1.PodGroup:
			if err := f.pgStore.Add(o); err != nil {
				t.Fatal(err)
			}
			if err := client.Tracker().Add(o); err != nil {
				t.Fatal(err)
			}
		case *v1.Pod:
			if err := f.pods.Add(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

func podGroup(name string, deleting bool) *schedulingv1beta1.PodGroup {
	pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{"other/finalizer", Finalizer}}}
	if deleting {
		pg.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return pg
}

func pod(name, group string, phase v1.PodPhase) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")}, Status: v1.PodStatus{Phase: phase}}
	if group != "" {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	return p
}

func (f *fixture) updates() []*schedulingv1beta1.PodGroup {
	var out []*schedulingv1beta1.PodGroup
	for _, a := range f.client.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && a.GetResource().Resource == "podgroups" {
			out = append(out, u.GetObject().(*schedulingv1beta1.PodGroup))
		}
	}
	return out
}

func TestSync(t *testing.T) {
	tests := []struct {
		name       string
		deleting   bool
		pods       []*v1.Pod
		wantRemove bool
	}{
		{name: "not being deleted", pods: nil},
		{name: "deleted and unused", deleting: true, wantRemove: true},
		{name: "deleted with a running pod", deleting: true, pods: []*v1.Pod{pod("p", "pg", v1.PodRunning)}},
		{name: "deleted with a pending pod", deleting: true, pods: []*v1.Pod{pod("p", "pg", v1.PodPending)}},
		{name: "deleted with only finished pods", deleting: true, wantRemove: true,
			pods: []*v1.Pod{pod("a", "pg", v1.PodSucceeded), pod("b", "pg", v1.PodFailed)}},
		{name: "pods of another group or none", deleting: true, wantRemove: true,
			pods: []*v1.Pod{pod("a", "other", v1.PodRunning), pod("b", "", v1.PodRunning)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []interface{}{podGroup("pg", tc.deleting)}
			for _, p := range tc.pods {
				objs = append(objs, p)
			}
			f := newFixture(t, objs...)
			if err := f.c.syncPodGroup(context.Background(), ns+"/pg"); err != nil {
				t.Fatal(err)
			}
			ups := f.updates()
			if !tc.wantRemove {
				if len(ups) != 0 {
					t.Fatalf("unexpected updates %v", ups)
				}
				return
			}
			if len(ups) != 1 {
				t.Fatalf("got %d updates, want 1", len(ups))
			}
			if got := ups[0].Finalizers; !slices.Equal(got, []string{"other/finalizer"}) {
				t.Fatalf("finalizers after update = %v", got)
			}
		})
	}
}

// A pod in another namespace with the same group name does not keep the group.
func TestSyncIgnoresOtherNamespaces(t *testing.T) {
	other := pod("p", "pg", v1.PodRunning)
	other.Namespace = "elsewhere"
	f := newFixture(t, podGroup("pg", true), other)
	if err := f.c.syncPodGroup(context.Background(), ns+"/pg"); err != nil {
		t.Fatal(err)
	}
	if len(f.updates()) != 1 {
		t.Fatal("finalizer not removed")
	}
}

func TestSyncMissingGroup(t *testing.T) {
	f := newFixture(t)
	if err := f.c.syncPodGroup(context.Background(), ns+"/gone"); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != 0 {
		t.Fatalf("actions: %v", f.client.Actions())
	}
}

func TestSyncUpdateErrorRequeues(t *testing.T) {
	f := newFixture(t, podGroup("pg", true))
	f.client.PrependReactor("update", "podgroups", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errConflict
	})
	if err := f.c.syncPodGroup(context.Background(), ns+"/pg"); err == nil {
		t.Fatal("want an error so the key is retried")
	}
}

func TestEventHandlers(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	running, finished := pod("p", "pg", v1.PodRunning), pod("p", "pg", v1.PodSucceeded)
	recreated := pod("p", "new", v1.PodRunning)
	recreated.UID = "other-uid"
	tests := []struct {
		name string
		fire func(c *Controller)
		want []string
	}{
		{name: "group not being deleted", fire: func(c *Controller) { c.podGroupChanged(logger, podGroup("pg", false)) }},
		{name: "group being deleted", fire: func(c *Controller) { c.podGroupChanged(logger, podGroup("pg", true)) }, want: []string{ns + "/pg"}},
		{name: "group deleted without our finalizer", fire: func(c *Controller) {
			pg := podGroup("pg", true)
			pg.Finalizers = []string{"other/finalizer"}
			c.podGroupChanged(logger, pg)
		}},
		{name: "running pod added", fire: func(c *Controller) { c.podChanged(logger, nil, running) }},
		{name: "running pod updated", fire: func(c *Controller) { c.podChanged(logger, running, running) }},
		{name: "pod finished", fire: func(c *Controller) { c.podChanged(logger, running, finished) }, want: []string{ns + "/pg"}},
		{name: "pod deleted", fire: func(c *Controller) { c.podChanged(logger, running, nil) }, want: []string{ns + "/pg"}},
		{name: "pod tombstone", fire: func(c *Controller) {
			c.podChanged(logger, cache.DeletedFinalStateUnknown{Key: ns + "/p", Obj: running}, nil)
		}, want: []string{ns + "/pg"}},
		{name: "pod re-created under the same name", fire: func(c *Controller) { c.podChanged(logger, running, recreated) }, want: []string{ns + "/pg"}},
		{name: "pod without group deleted", fire: func(c *Controller) { c.podChanged(logger, pod("p", "", v1.PodRunning), nil) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.fire(f.c)
			var got []string
			for f.c.queue.Len() > 0 {
				k, _ := f.c.queue.Get()
				got = append(got, k)
				f.c.queue.Done(k)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("queued %v, want %v", got, tc.want)
			}
		})
	}
}

// The index lists only active pods of a group.
func TestActivePodIndex(t *testing.T) {
	f := newFixture(t, pod("a", "pg", v1.PodRunning), pod("b", "pg", v1.PodSucceeded), pod("c", "", v1.PodRunning))
	objs, err := f.c.podIndexer.ByIndex(activePodIndex, ns+"/pg")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].(*v1.Pod).Name != "a" {
		t.Fatalf("index = %v", objs)
	}
}

var errConflict = apierrors.NewConflict(schedulingv1beta1.Resource("podgroups"), "pg", errors.New("changed"))
