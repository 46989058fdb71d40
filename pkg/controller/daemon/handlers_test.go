package daemon

import (
	"reflect"
	"sort"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// drain returns the keys waiting in q (not the delayed ones), sorted.
func drain(q workqueue.TypedRateLimitingInterface[string]) []string {
	out := testutil.Drain[string](q)
	sort.Strings(out)
	return out
}

func TestShouldIgnoreNodeUpdate(t *testing.T) {
	base := newNode("n", map[string]string{"a": "1"}, v1.Taint{Key: "k", Effect: v1.TaintEffectNoSchedule})
	tests := []struct {
		name   string
		change func(*v1.Node)
		ignore bool
	}{
		{"nothing", func(*v1.Node) {}, true},
		{"status only", func(n *v1.Node) {
			n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
			n.ResourceVersion = "2"
		}, true},
		{"annotations only", func(n *v1.Node) { n.Annotations = map[string]string{"x": "y"} }, true},
		{"unschedulable flag only", func(n *v1.Node) { n.Spec.Unschedulable = true }, true},
		{"label added", func(n *v1.Node) { n.Labels["b"] = "2" }, false},
		{"label changed", func(n *v1.Node) { n.Labels["a"] = "2" }, false},
		{"taint removed", func(n *v1.Node) { n.Spec.Taints = nil }, false},
		{"taint effect changed", func(n *v1.Node) { n.Spec.Taints[0].Effect = v1.TaintEffectNoExecute }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := shouldIgnoreNodeUpdate(base, cur); got != tc.ignore {
				t.Errorf("shouldIgnoreNodeUpdate = %v, want %v", got, tc.ignore)
			}
			f := newFixture(t)
			f.dsc.updateNode(klog.Background(), base, cur)
			if queued := f.dsc.nodeUpdateQueue.Len() == 1; queued == tc.ignore {
				t.Errorf("node queued = %v, want %v", queued, !tc.ignore)
			}
		})
	}
}

func TestAddNodeQueuesIt(t *testing.T) {
	f := newFixture(t)
	f.dsc.addNode(klog.Background(), newNode("n", nil))
	if got := drain(f.dsc.nodeUpdateQueue); !reflect.DeepEqual(got, []string{"n"}) {
		t.Errorf("node queue = %v", got)
	}
}

func TestSyncNodeUpdateEnqueuesAffectedSets(t *testing.T) {
	node := newNode("n", map[string]string{"role": "db"}, v1.Taint{Key: "evict", Effect: v1.TaintEffectNoExecute})

	wantsPod := newDS("wants-pod") // tolerates, matches, no pod yet
	wantsPod.Spec.Template.Spec.Tolerations = []v1.Toleration{{Key: "evict", Operator: v1.TolerationOpExists}}

	notForNode := newDS("not-for-node") // selector does not match, no pod
	notForNode.Spec.Template.Spec.NodeSelector = map[string]string{"role": "web"}

	evicted := newDS("evicted") // has a pod, does not tolerate NoExecute

	settled := newDS("settled") // tolerates, has its pod
	settled.Spec.Template.Spec.Tolerations = wantsPod.Spec.Template.Spec.Tolerations

	recovering := newDS("recovering") // has its pod, reports misscheduled pods
	recovering.Spec.Template.Spec.Tolerations = wantsPod.Spec.Template.Spec.Tolerations
	recovering.Status.NumberMisscheduled = 1

	f := newFixture(t, node)
	for _, ds := range []*apps.DaemonSet{wantsPod, notForNode, evicted, settled, recovering} {
		f.addToCache(ds)
	}
	f.addToCache(
		newPod("e", evicted, "n", ""),
		newPod("s", settled, "n", ""),
		newPod("r", recovering, "n", ""),
	)
	if err := f.dsc.syncNodeUpdate(f.ctx, "n"); err != nil {
		t.Fatal(err)
	}
	want := []string{"ns/evicted", "ns/recovering", "ns/wants-pod"}
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}

	if err := f.dsc.syncNodeUpdate(f.ctx, "missing"); err != nil {
		t.Errorf("missing node: %v", err)
	}
}

func TestPodHandlersAndExpectations(t *testing.T) {
	ds := newDS("ds")
	ds.Spec.MinReadySeconds = 10
	f := newFixture(t)
	f.addToCache(ds)
	logger := klog.Background()
	key := testNS + "/ds"
	_ = f.dsc.expectations.SetExpectations(logger, key, 2, 1)

	pod := newPod("p", ds, "n", "")
	f.dsc.addPod(logger, pod)
	if add, del := f.expectations(ds); add != 1 || del != 1 {
		t.Errorf("after add: expectations %d/%d, want 1/1", add, del)
	}
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{key}) {
		t.Errorf("queue = %v", got)
	}

	// Resync (same resource version): nothing.
	f.dsc.updatePod(logger, pod, pod.DeepCopy())
	if f.dsc.queue.Len() != 0 {
		t.Error("resync enqueued the DaemonSet")
	}

	// Became ready: sync now and again once available.
	readyPod := pod.DeepCopy()
	readyPod.ResourceVersion = "2"
	ready(0)(readyPod)
	f.dsc.updatePod(logger, pod, readyPod)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{key}) {
		t.Errorf("queue = %v", got)
	}
	if d := f.queue.delaysFor(key); !reflect.DeepEqual(d, []time.Duration{11 * time.Second}) {
		t.Errorf("delayed adds = %v, want [11s]", d)
	}

	// Graceful deletion counts as the deletion.
	dying := readyPod.DeepCopy()
	dying.ResourceVersion = "3"
	deleting()(dying)
	f.dsc.updatePod(logger, readyPod, dying)
	if add, del := f.expectations(ds); add != 1 || del != 0 {
		t.Errorf("after graceful delete: expectations %d/%d, want 1/0", add, del)
	}

	// Tombstones are understood.
	f.dsc.deletePod(logger, cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod})
	if _, del := f.expectations(ds); del != -1 {
		t.Errorf("tombstone deletion not observed: del = %d", del)
	}

	// A pod of another incarnation of the set is ignored.
	stranger := newPod("s", ds, "n", "")
	stranger.OwnerReferences[0].UID = types.UID("other")
	drain(f.dsc.queue)
	f.dsc.addPod(logger, stranger)
	if f.dsc.queue.Len() != 0 {
		t.Error("pod of a different DaemonSet incarnation enqueued it")
	}
}

func TestOrphanPodHandlers(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addToCache(ds)
	logger := klog.Background()
	_ = f.dsc.expectations.SetExpectations(logger, testNS+"/ds", 1, 0)

	o := newPod("o", ds, "n", "", orphan())
	f.dsc.addPod(logger, o)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("queue = %v, want the matching DaemonSet", got)
	}
	if add, _ := f.expectations(ds); add != 1 {
		t.Errorf("orphan counted as a creation")
	}

	// Orphan updated without label change: no sync.
	o2 := o.DeepCopy()
	o2.ResourceVersion = "2"
	o2.Status.Phase = v1.PodSucceeded
	f.dsc.updatePod(logger, o, o2)
	if f.dsc.queue.Len() != 0 {
		t.Error("orphan status change enqueued")
	}
	// Released by its controller: the old owner and matching sets sync.
	owned := newPod("o", ds, "n", "")
	f.dsc.updatePod(logger, owned, o2)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("queue = %v", got)
	}
}

func TestDaemonSetHandlers(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	logger := klog.Background()
	_ = f.dsc.expectations.SetExpectations(logger, "ns/ds", 1, 0)

	recreated := ds.DeepCopy()
	recreated.UID = "new"
	f.dsc.updateDaemonSet(logger, ds, recreated)
	if _, ok, _ := f.dsc.expectations.GetExpectations("ns/ds"); ok {
		t.Error("expectations of the deleted incarnation kept")
	}
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("queue = %v", got)
	}
	f.dsc.deleteDaemonSet(logger, cache.DeletedFinalStateUnknown{Key: "ns/ds", Obj: ds})
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("queue after delete = %v", got)
	}
}

func TestHistoryHandlers(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addToCache(ds)
	logger := klog.Background()

	owned := oldRevision(ds, "a", 1)
	f.dsc.addHistory(logger, owned)
	if f.dsc.queue.Len() != 0 {
		t.Error("own revision creation enqueued the DaemonSet")
	}
	orphanRev := oldRevision(ds, "b", 1)
	orphanRev.OwnerReferences = nil
	f.dsc.addHistory(logger, orphanRev)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("orphan revision: queue = %v", got)
	}
	f.dsc.deleteHistory(logger, cache.DeletedFinalStateUnknown{Obj: owned})
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("deleted revision: queue = %v", got)
	}
	upd := owned.DeepCopy()
	upd.ResourceVersion = "9"
	f.dsc.updateHistory(logger, owned, upd)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("updated revision: queue = %v", got)
	}
	dying := owned.DeepCopy()
	dying.DeletionTimestamp = &metav1.Time{Time: testStart}
	f.dsc.addHistory(logger, dying)
	if got := drain(f.dsc.queue); !reflect.DeepEqual(got, []string{"ns/ds"}) {
		t.Errorf("revision seen while being deleted: queue = %v", got)
	}
}
