package pvcprotection

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Unused conditions as describeUnused prints them.
const (
	unusedTrue  = `Unused=True/NoPodsUsingPVC/"No pods are currently referencing this PVC"@123`
	unusedFalse = `Unused=False/PodUsingPVC/"A pod is currently referencing this PVC"@123`
)

// podEvent is one pod informer event to simulate.
type podEvent struct {
	old, cur interface{}
	deleted  bool
}

func TestSync(t *testing.T) {
	tests := []struct {
		name        string
		trackUnused bool
		// objects are in the apiserver and, unless cacheIsLate, in the informers.
		objects     []runtime.Object
		cacheIsLate bool
		// pvcEvents are added to objects and delivered as PVC add events.
		pvcEvents []*v1.PersistentVolumeClaim
		podEvent  *podEvent
		// podGone keeps the pod of podEvent out of the apiserver and cache.
		podGone  bool
		failList int
		failPVC  int
		want     []string
	}{
		// Adding the finalizer.
		{
			name:      "PVCs without finalizer get it, in every namespace",
			pvcEvents: []*v1.PersistentVolumeClaim{newPVC(ns, "a"), newPVC(ns2, "b")},
			want:      []string{"update default/a [kubernetes.io/pvc-protection]", "update other/b [kubernetes.io/pvc-protection]"},
		},
		{
			name:      "other finalizers are kept when adding",
			pvcEvents: []*v1.PersistentVolumeClaim{func() *v1.PersistentVolumeClaim { p := newPVC(ns, "a"); p.Finalizers = []string{"x/y"}; return p }()},
			want:      []string{"update default/a [x/y,kubernetes.io/pvc-protection]"},
		},
		{
			name:      "PVC with finalizer is not touched",
			pvcEvents: []*v1.PersistentVolumeClaim{protected(newPVC(ns, "a"))},
		},
		{
			name:      "failed finalizer add is retried",
			pvcEvents: []*v1.PersistentVolumeClaim{newPVC(ns, "a")},
			failPVC:   2,
			want: []string{
				"update default/a [kubernetes.io/pvc-protection]",
				"update default/a [kubernetes.io/pvc-protection]",
				"update default/a [kubernetes.io/pvc-protection]",
			},
		},
		{
			name: "deleted PVC without our finalizer is not queued",
			pvcEvents: []*v1.PersistentVolumeClaim{func() *v1.PersistentVolumeClaim {
				p := deleting(newPVC(ns, "a"))
				p.Finalizers = []string{"x/y"}
				return p
			}()},
		},

		// Removing the finalizer.
		{
			name:      "unused deleted PVCs lose the finalizer, one live list per namespace",
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a"))), deleting(protected(newPVC(ns2, "b")))},
			want:      []string{"list pods default", "update default/a []", "list pods other", "update other/b []"},
		},
		{
			name: "PVCs of one namespace share one live list",
			pvcEvents: []*v1.PersistentVolumeClaim{
				deleting(protected(newPVC(ns, "a"))), deleting(protected(newPVC(ns, "b"))), deleting(protected(newPVC(ns, "c"))),
			},
			want: []string{"list pods default", "update default/a []", "update default/b []", "update default/c []"},
		},
		{
			name:      "failed finalizer removal is retried with a fresh live list",
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
			failPVC:   2,
			want: []string{
				"list pods default", "update default/a []",
				"list pods default", "update default/a []",
				"list pods default", "update default/a []",
			},
		},
		{
			name:      "a failed live list requeues that PVC only; the next PVC lists again",
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a"))), deleting(protected(newPVC(ns, "b")))},
			failList:  1,
			want: []string{
				"list pods default",
				"list pods default", "update default/b []",
				"list pods default", "update default/a []",
			},
		},
		{
			name:      "scheduled pod using the PVC keeps it, without a live list",
			objects:   []runtime.Object{usingClaim("a", newPod(ns, "p"))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
		},
		{
			name:      "pod using other volumes does not keep it",
			objects:   []runtime.Object{withEmptyDir(usingClaim("other", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
			want:      []string{"list pods default", "update default/a []"},
		},
		{
			name:      "pod of another namespace naming the PVC does not keep it",
			objects:   []runtime.Object{usingClaim("a", newPod(ns2, "p"))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
			want:      []string{"list pods default", "update default/a []"},
		},
		{
			name:      "finished pod still naming the PVC keeps it",
			objects:   []runtime.Object{inPhase(v1.PodSucceeded, usingClaim("a", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
		},
		{
			name:      "unscheduled pod does not keep it",
			objects:   []runtime.Object{unscheduled(usingClaim("a", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
			want:      []string{"list pods default", "update default/a []"},
		},
		{
			name:        "pod missing from the cache but found live keeps it",
			objects:     []runtime.Object{usingClaim("a", newPod(ns, "p"))},
			cacheIsLate: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
			want:        []string{"list pods default"},
		},
		{
			name:        "live list decides PVC by PVC within a batch",
			objects:     []runtime.Object{usingClaim("a", newPod(ns, "p")), usingClaim("c", newPod(ns2, "q"))},
			cacheIsLate: true,
			pvcEvents: []*v1.PersistentVolumeClaim{
				deleting(protected(newPVC(ns, "a"))), deleting(protected(newPVC(ns, "b"))), deleting(protected(newPVC(ns2, "c"))),
			},
			want: []string{"list pods default", "update default/b []", "list pods other"},
		},
		{
			name:      "pod's own ephemeral claim is kept",
			objects:   []runtime.Object{withEphemeral("data", newPod(ns, "p"))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(ownedBy(newPod(ns, "p"), newPVC(ns, "p-data"))))},
		},
		{
			name:      "claim with the ephemeral name but not owned by the pod is not kept",
			objects:   []runtime.Object{withEphemeral("data", newPod(ns, "p"))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "p-data")))},
			want:      []string{"list pods default", "update default/p-data []"},
		},
		{
			name:      "ephemeral claim of a pod shut down (grace 0) is not kept",
			objects:   []runtime.Object{podDeleting(0, withEphemeral("data", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(ownedBy(newPod(ns, "p"), newPVC(ns, "p-data"))))},
			want:      []string{"list pods default", "update default/p-data []"},
		},
		{
			name:      "ephemeral claim of a pod still terminating gracefully is kept",
			objects:   []runtime.Object{podDeleting(30, withEphemeral("data", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(ownedBy(newPod(ns, "p"), newPVC(ns, "p-data"))))},
		},
		{
			name:      "a pod shut down still keeps a claim it names directly",
			objects:   []runtime.Object{podDeleting(0, usingClaim("a", newPod(ns, "p")))},
			pvcEvents: []*v1.PersistentVolumeClaim{deleting(protected(newPVC(ns, "a")))},
		},

		// The Unused condition.
		{
			name:        "unused bound PVC gets Unused=True",
			trackUnused: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:        []string{"list pods default", "status default/a " + unusedTrue},
		},
		{
			name:        "pending PVC gets no condition",
			trackUnused: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{protected(newPVC(ns, "a"))},
		},
		{
			name:        "gate off: no condition",
			trackUnused: false,
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
		},
		{
			name:        "PVC with a condition is not queued by its own events",
			trackUnused: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(withUnused(v1.ConditionTrue, protected(newPVC(ns, "a"))))},
		},
		{
			name:        "bound PVC used by a running pod gets Unused=False without a live list",
			trackUnused: true,
			objects:     []runtime.Object{inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))},
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:        []string{"status default/a " + unusedFalse},
		},
		{
			name:        "an unscheduled pod counts for Unused",
			trackUnused: true,
			objects:     []runtime.Object{unscheduled(usingClaim("a", newPod(ns, "p")))},
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:        []string{"status default/a " + unusedFalse},
		},
		{
			name:        "a succeeded pod does not count for Unused",
			trackUnused: true,
			objects:     []runtime.Object{inPhase(v1.PodSucceeded, usingClaim("a", newPod(ns, "p")))},
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:        []string{"list pods default", "status default/a " + unusedTrue},
		},
		{
			name:        "a deleting pod whose containers all stopped does not count for Unused",
			trackUnused: true,
			objects: []runtime.Object{withContainer(v1.ContainerState{Terminated: &v1.ContainerStateTerminated{}},
				podDeleting(30, inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))))},
			pvcEvents: []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:      []string{"list pods default", "status default/a " + unusedTrue},
		},
		{
			name:        "a deleting pod with a running container counts for Unused",
			trackUnused: true,
			objects: []runtime.Object{withContainer(v1.ContainerState{Running: &v1.ContainerStateRunning{}},
				podDeleting(30, inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))))},
			pvcEvents: []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:      []string{"status default/a " + unusedFalse},
		},
		{
			name:        "pod found only live counts for Unused",
			trackUnused: true,
			objects:     []runtime.Object{usingClaim("a", newPod(ns, "p"))},
			cacheIsLate: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			want:        []string{"list pods default", "status default/a " + unusedFalse},
		},
		{
			name:        "failed status update is retried",
			trackUnused: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(protected(newPVC(ns, "a")))},
			failPVC:     2,
			want: []string{
				"list pods default", "status default/a " + unusedTrue,
				"list pods default", "status default/a " + unusedTrue,
				"list pods default", "status default/a " + unusedTrue,
			},
		},
		{
			name:        "deleted PVC: condition untouched, finalizer removed",
			trackUnused: true,
			pvcEvents:   []*v1.PersistentVolumeClaim{deleting(bound(withUnused(v1.ConditionTrue, protected(newPVC(ns, "a")))))},
			want:        []string{"list pods default", "update default/a []"},
		},
		{
			name:        "used bound PVC without finalizer: condition, then finalizer",
			trackUnused: true,
			objects:     []runtime.Object{usingClaim("a", newPod(ns, "p"))},
			pvcEvents:   []*v1.PersistentVolumeClaim{bound(newPVC(ns, "a"))},
			want:        []string{"status default/a " + unusedFalse, "update default/a [kubernetes.io/pvc-protection]"},
		},
		{
			name:        "pod event flips Unused=True to False, replacing the condition",
			trackUnused: true,
			objects:     []runtime.Object{bound(withUnused(v1.ConditionTrue, protected(newPVC(ns, "a"))))},
			podEvent:    &podEvent{cur: inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))},
			want:        []string{"status default/a " + unusedFalse},
		},
		{
			name:        "an Unknown condition is left alone while the PVC is used",
			trackUnused: true,
			objects:     []runtime.Object{bound(withUnused(v1.ConditionUnknown, protected(newPVC(ns, "a"))))},
			podEvent:    &podEvent{cur: inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))},
		},
		{
			name:        "deleted pod leaves the bound PVC unused",
			trackUnused: true,
			objects:     []runtime.Object{bound(withUnused(v1.ConditionFalse, protected(newPVC(ns, "a"))))},
			podEvent:    &podEvent{cur: usingClaim("a", newPod(ns, "p")), deleted: true},
			want:        []string{"list pods default", "status default/a " + unusedTrue},
		},
		{
			name:        "Unused=True already right: no write",
			trackUnused: true,
			objects:     []runtime.Object{bound(withUnused(v1.ConditionTrue, protected(newPVC(ns, "a"))))},
			podEvent:    &podEvent{cur: usingClaim("a", newPod(ns, "p")), deleted: true},
			want:        []string{"list pods default"},
		},

		// Pod events.
		{
			name:     "update of a running scheduled pod is ignored",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{cur: inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))},
			podGone:  true,
		},
		{
			name:        "with Unused tracking every pod event queues its PVCs",
			trackUnused: true,
			objects:     []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent:    &podEvent{cur: inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p")))},
			podGone:     true,
			want:        []string{"list pods default", "update default/a []"},
		},
		{
			name:     "update of a finished pod queues the PVC, which it still keeps",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{cur: inPhase(v1.PodSucceeded, usingClaim("a", newPod(ns, "p")))},
		},
		{
			name:     "update of an unscheduled pod frees the PVC",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{cur: unscheduled(usingClaim("a", newPod(ns, "p")))},
			want:     []string{"list pods default", "update default/a []"},
		},
		{
			name:     "deleted running pod frees the PVC",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{cur: inPhase(v1.PodRunning, usingClaim("a", newPod(ns, "p"))), deleted: true},
			want:     []string{"list pods default", "update default/a []"},
		},
		{
			name:     "deleted pod in a tombstone frees the PVC",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{cur: cache.DeletedFinalStateUnknown{Key: ns + "/p", Obj: usingClaim("a", newPod(ns, "p"))}, deleted: true},
			want:     []string{"list pods default", "update default/a []"},
		},
		{
			name:     "deleted pod queues its ephemeral claims",
			objects:  []runtime.Object{deleting(protected(ownedBy(newPod(ns, "p"), newPVC(ns, "p-data"))))},
			podEvent: &podEvent{cur: withEphemeral("data", newPod(ns, "p")), deleted: true},
			want:     []string{"list pods default", "update default/p-data []"},
		},
		{
			name:     "re-created pod seen as an update: the old pod's deleted PVC is freed",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{old: usingClaim("a", newPod(ns, "p")), cur: withUID("new", newPod(ns, "p"))},
			want:     []string{"list pods default", "update default/a []"},
		},
		{
			name:     "re-created pod seen as an update: the old pod's live PVC is left alone",
			objects:  []runtime.Object{protected(newPVC(ns, "a"))},
			podEvent: &podEvent{old: usingClaim("a", newPod(ns, "p")), cur: withUID("new", newPod(ns, "p"))},
		},
		{
			name:     "re-created pod seen as an update: a PVC both use is kept",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{old: usingClaim("a", newPod(ns, "p")), cur: withUID("new", usingClaim("a", newPod(ns, "p")))},
		},
		{
			name:     "pod becoming scheduled keeps the PVC",
			objects:  []runtime.Object{deleting(protected(newPVC(ns, "a")))},
			podEvent: &podEvent{old: unscheduled(usingClaim("a", newPod(ns, "p"))), cur: usingClaim("a", newPod(ns, "p"))},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			apiObjs := append([]runtime.Object{}, tc.objects...)
			var cacheObjs []runtime.Object
			if !tc.cacheIsLate {
				cacheObjs = append(cacheObjs, tc.objects...)
			}
			for _, pvc := range tc.pvcEvents {
				apiObjs = append(apiObjs, pvc)
				cacheObjs = append(cacheObjs, pvc)
			}
			if ev := tc.podEvent; ev != nil && !ev.deleted && !tc.podGone {
				apiObjs = append(apiObjs, ev.cur.(runtime.Object))
				cacheObjs = append(cacheObjs, ev.cur.(runtime.Object))
			}
			f := newFixture(t, tc.trackUnused, apiObjs, cacheObjs)
			f.failN("list", "pods", tc.failList)
			f.failN("update", "persistentvolumeclaims", tc.failPVC)

			for _, pvc := range tc.pvcEvents {
				f.c.pvcAddedUpdated(f.logger, pvc)
			}
			if ev := tc.podEvent; ev != nil {
				f.c.podAddedDeletedUpdated(f.logger, ev.old, ev.cur, ev.deleted)
			}
			f.drain()
			f.expect(tc.want...)
		})
	}
}

// A PVC removed from the cache before its turn is skipped.
func TestSyncPVCGone(t *testing.T) {
	f := newFixture(t, true, nil, nil)
	f.c.queue.Add(ns + "/gone")
	f.drain()
	f.expect()
}

// The status write returns the PVC's new version; the finalizer update
// must build on it, or a real apiserver would answer with a conflict.
func TestFinalizerAddedOnTopOfStatusWrite(t *testing.T) {
	pvc := bound(newPVC(ns, "a"))
	pvc.ResourceVersion = "1"
	f := newFixture(t, true, []runtime.Object{pvc}, []runtime.Object{pvc})
	// Answer status writes as the apiserver does: with a new resourceVersion.
	f.client.PrependReactor("update", "persistentvolumeclaims", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		written := action.(clienttesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim).DeepCopy()
		written.ResourceVersion = "2"
		return true, written, nil
	})
	f.c.pvcAddedUpdated(f.logger, pvc)
	f.drain()
	f.expect("list pods default", "status default/a "+unusedTrue, "update default/a [kubernetes.io/pvc-protection]")
	upd := f.client.Actions()[2].(clienttesting.UpdateAction).GetObject().(*v1.PersistentVolumeClaim)
	if upd.ResourceVersion != "2" {
		t.Errorf("finalizer update sent resourceVersion %q, want the status write's 2", upd.ResourceVersion)
	}
	if describeUnused(upd) != unusedTrue {
		t.Errorf("finalizer update lost the condition: %q", describeUnused(upd))
	}
}
