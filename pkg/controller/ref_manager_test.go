package controller

import (
	"context"
	"errors"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var rsKind = apps.SchemeGroupVersion.WithKind("ReplicaSet")

func testRS(name string, uid types.UID) *apps.ReplicaSet {
	return &apps.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid}}
}

func testPod(name string, lbls map[string]string, owner *metav1.OwnerReference) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: lbls}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func TestClaimPods(t *testing.T) {
	rs := testRS("rs", "rs-uid")
	other := testRS("other", "other-uid")
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	match := map[string]string{"app": "a"}
	nomatch := map[string]string{"app": "b"}
	ours := metav1.NewControllerRef(rs, rsKind)
	theirs := metav1.NewControllerRef(other, rsKind)
	deleting := metav1.Now()

	tests := []struct {
		name        string
		owner       *apps.ReplicaSet
		pod         *v1.Pod
		canAdoptErr error
		patchErr    error
		wantClaimed bool
		wantPatches int
		wantErr     bool
	}{
		{name: "orphan matching is adopted", owner: rs, pod: testPod("p", match, nil), wantClaimed: true, wantPatches: 1},
		{name: "orphan not matching is ignored", owner: rs, pod: testPod("p", nomatch, nil)},
		{name: "owned matching needs no patch", owner: rs, pod: testPod("p", match, ours), wantClaimed: true},
		{name: "owned not matching is released", owner: rs, pod: testPod("p", nomatch, ours), wantPatches: 1},
		{name: "owned by another controller is never touched", owner: rs, pod: testPod("p", match, theirs)},
		{name: "no adoption while owner deleted", owner: deletedRS(rs, deleting), pod: testPod("p", match, nil)},
		{name: "no release while owner deleted", owner: deletedRS(rs, deleting), pod: testPod("p", nomatch, ours)},
		{name: "owned matching kept while owner deleted", owner: deletedRS(rs, deleting), pod: testPod("p", match, ours), wantClaimed: true},
		{name: "deleted orphan is not adopted", owner: rs, pod: func() *v1.Pod { p := testPod("p", match, nil); p.DeletionTimestamp = &deleting; return p }()},
		{name: "orphan in other namespace is not adopted", owner: rs, pod: func() *v1.Pod { p := testPod("p", match, nil); p.Namespace = "x"; return p }()},
		{name: "canAdopt failure fails adoption", owner: rs, pod: testPod("p", match, nil), canAdoptErr: errors.New("gone"), wantErr: true},
		{name: "adopt NotFound is ignored", owner: rs, pod: testPod("p", match, nil), patchErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), wantPatches: 1},
		{name: "release Invalid is ignored", owner: rs, pod: testPod("p", nomatch, ours), patchErr: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), wantPatches: 1},
		{name: "adopt conflict is an error", owner: rs, pod: testPod("p", match, nil), patchErr: errors.New("conflict"), wantPatches: 1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc := &testutil.FakePodControl{Err: tc.patchErr}
			m := NewPodControllerRefManager(pc, tc.owner, sel, rsKind, func(context.Context) error { return tc.canAdoptErr })
			claimed, err := m.ClaimPods(context.Background(), []*v1.Pod{tc.pod})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if (len(claimed) == 1) != tc.wantClaimed {
				t.Fatalf("claimed = %v", claimed)
			}
			if len(pc.Patches) != tc.wantPatches {
				t.Fatalf("patches = %d, want %d", len(pc.Patches), tc.wantPatches)
			}
		})
	}
}

func deletedRS(rs *apps.ReplicaSet, at metav1.Time) *apps.ReplicaSet {
	c := rs.DeepCopy()
	c.DeletionTimestamp = &at
	return c
}

func TestCanAdoptRunsOnce(t *testing.T) {
	rs := testRS("rs", "rs-uid")
	calls := 0
	m := NewPodControllerRefManager(&testutil.FakePodControl{}, rs, labels.Everything(), rsKind, func(context.Context) error { calls++; return nil })
	pods := []*v1.Pod{testPod("a", nil, nil), testPod("b", nil, nil), testPod("c", nil, nil)}
	claimed, err := m.ClaimPods(context.Background(), pods)
	if err != nil || len(claimed) != 3 || calls != 1 {
		t.Fatalf("claimed=%d err=%v canAdopt calls=%d", len(claimed), err, calls)
	}
	// No adoption needed: canAdopt isn't called at all.
	calls = 0
	m = NewPodControllerRefManager(&testutil.FakePodControl{}, rs, labels.Everything(), rsKind, func(context.Context) error { calls++; return nil })
	_, _ = m.ClaimPods(context.Background(), []*v1.Pod{testPod("d", nil, metav1.NewControllerRef(rs, rsKind))})
	if calls != 0 {
		t.Fatalf("canAdopt called without adoption")
	}
}

func TestClaimPodsFilters(t *testing.T) {
	rs := testRS("rs", "rs-uid")
	m := NewPodControllerRefManager(&testutil.FakePodControl{}, rs, labels.Everything(), rsKind, nil)
	claimed, _ := m.ClaimPods(context.Background(), []*v1.Pod{testPod("a", nil, nil), testPod("b", nil, nil)},
		func(p *v1.Pod) bool { return p.Name == "a" })
	if len(claimed) != 1 || claimed[0].Name != "a" {
		t.Fatalf("claimed = %v", claimed)
	}
}

func TestPatchBodies(t *testing.T) {
	rs := testRS("rs", "rs-uid")
	adopt, err := ownerRefControllerPatch(rs, rsKind, "pod-uid")
	if err != nil {
		t.Fatal(err)
	}
	wantAdopt := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"pod-uid"}}`
	if string(adopt) != wantAdopt {
		t.Fatalf("adopt patch\n got %s\nwant %s", adopt, wantAdopt)
	}
	adoptFin, _ := ownerRefControllerPatch(rs, rsKind, "pod-uid", "f1")
	if want := `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"pod-uid","finalizers":["f1"]}}`; string(adoptFin) != want {
		t.Fatalf("adopt patch with finalizer\n got %s\nwant %s", adoptFin, want)
	}
	release, _ := GenerateDeleteOwnerRefStrategicMergeBytes("pod-uid", []types.UID{"o1", "o2"})
	if want := `{"metadata":{"uid":"pod-uid","ownerReferences":[{"$patch":"delete","uid":"o1"},{"$patch":"delete","uid":"o2"}]}}`; string(release) != want {
		t.Fatalf("release patch\n got %s\nwant %s", release, want)
	}
	releaseFin, _ := GenerateDeleteOwnerRefStrategicMergeBytes("pod-uid", []types.UID{"o1"}, "f1")
	if want := `{"metadata":{"uid":"pod-uid","ownerReferences":[{"$patch":"delete","uid":"o1"}],"$deleteFromPrimitiveList/finalizers":["f1"]}}`; string(releaseFin) != want {
		t.Fatalf("release patch with finalizer\n got %s\nwant %s", releaseFin, want)
	}
}

type fakeRSControl struct{ patches map[string][]byte }

func (f *fakeRSControl) PatchReplicaSet(_ context.Context, ns, name string, data []byte) error {
	f.patches[ns+"/"+name] = data
	return nil
}

func TestClaimReplicaSets(t *testing.T) {
	d := &apps.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "d-uid"}}
	dKind := apps.SchemeGroupVersion.WithKind("Deployment")
	ours := metav1.NewControllerRef(d, dKind)
	mk := func(name string, lbls map[string]string, ref *metav1.OwnerReference) *apps.ReplicaSet {
		rs := testRS(name, types.UID(name+"-uid"))
		rs.Labels = lbls
		if ref != nil {
			rs.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		return rs
	}
	ctl := &fakeRSControl{patches: map[string][]byte{}}
	m := NewReplicaSetControllerRefManager(ctl, d, labels.SelectorFromSet(labels.Set{"app": "a"}), dKind, nil)
	claimed, err := m.ClaimReplicaSets(context.Background(), []*apps.ReplicaSet{
		mk("orphan", map[string]string{"app": "a"}, nil),
		mk("owned", map[string]string{"app": "a"}, ours),
		mk("stale", map[string]string{"app": "b"}, ours),
	})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed=%d err=%v", len(claimed), err)
	}
	if _, ok := ctl.patches["ns/orphan"]; !ok {
		t.Fatal("orphan not adopted")
	}
	if got, want := string(ctl.patches["ns/stale"]), `{"metadata":{"uid":"stale-uid","ownerReferences":[{"$patch":"delete","uid":"d-uid"}]}}`; got != want {
		t.Fatalf("release patch %s", got)
	}
}

func TestRecheckDeletionTimestamp(t *testing.T) {
	now := metav1.Now()
	ok := RecheckDeletionTimestamp(func(context.Context) (metav1.Object, error) { return testRS("a", "u"), nil })
	if err := ok(context.Background()); err != nil {
		t.Fatal(err)
	}
	gone := RecheckDeletionTimestamp(func(context.Context) (metav1.Object, error) { return deletedRS(testRS("a", "u"), now), nil })
	if err := gone(context.Background()); err == nil {
		t.Fatal("deleted controller must not adopt")
	}
	failing := RecheckDeletionTimestamp(func(context.Context) (metav1.Object, error) { return nil, errors.New("x") })
	if err := failing(context.Background()); err == nil {
		t.Fatal("failed GET must not adopt")
	}
}
