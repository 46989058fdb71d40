package history

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var stsKind = apps.SchemeGroupVersion.WithKind("StatefulSet")

// Revision data written by upstream StatefulSet controllers for a set named
// "test" (upstream's pkg/controller/statefulset/testdata), with the names
// they gave them at collisionCount 0.
const (
	upstream134Data = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	upstream134Name = "test-776999688b"
	upstream133Data = `{"spec":{"template":{"$patch":"replace","metadata":{"annotations":{"test":"value"},"creationTimestamp":null,"labels":{"app":"foo"}},"spec":{"containers":[{"image":"test","imagePullPolicy":"Always","name":"test","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}}}`
	upstream133Name = "test-c77f6d978"
)

func newParent(name string, uid types.UID) *apps.StatefulSet {
	return &apps.StatefulSet{
		TypeMeta:   metav1.TypeMeta{Kind: "StatefulSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec: apps.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
		},
	}
}

func rawRevision(t *testing.T, parent metav1.Object, data string, revision int64, collisionCount *int32) *apps.ControllerRevision {
	t.Helper()
	cr, err := NewControllerRevision(parent, stsKind, map[string]string{"app": "foo"}, runtime.RawExtension{Raw: []byte(data)}, revision, collisionCount)
	if err != nil {
		t.Fatal(err)
	}
	cr.Namespace = parent.GetNamespace()
	return cr
}

func TestHashMatchesUpstream(t *testing.T) {
	parent := newParent("test", "uid-1")
	for _, tc := range []struct{ data, name string }{
		{upstream134Data, upstream134Name},
		{upstream133Data, upstream133Name},
	} {
		cr := rawRevision(t, parent, tc.data, 1, ptr.To[int32](0))
		if cr.Name != tc.name {
			t.Errorf("name = %s, want upstream's %s", cr.Name, tc.name)
		}
		if got, want := cr.Labels[ControllerRevisionHashLabel], strings.TrimPrefix(tc.name, "test-"); got != want {
			t.Errorf("hash label = %s, want %s", got, want)
		}
	}
}

func TestHashProbe(t *testing.T) {
	cr := &apps.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(upstream134Data)}}
	noProbe := HashControllerRevision(cr, nil)
	zero := HashControllerRevision(cr, ptr.To[int32](0))
	one := HashControllerRevision(cr, ptr.To[int32](1))
	if zero != "776999688b" {
		t.Fatalf("probe 0 hash = %s", zero)
	}
	if noProbe == zero || zero == one || noProbe == one {
		t.Errorf("probe must change the hash: nil=%s 0=%s 1=%s", noProbe, zero, one)
	}
	// The probe is written in decimal after the data: hashing data+"1" with
	// no probe is the same as hashing data with probe 1.
	appended := &apps.ControllerRevision{Data: runtime.RawExtension{Raw: []byte(upstream134Data + "1")}}
	if got := HashControllerRevision(appended, nil); got != one {
		t.Errorf("data+\"1\" hash = %s, want %s", got, one)
	}
}

func TestHashObjectResetsRaw(t *testing.T) {
	obj := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	objOnly := HashControllerRevision(&apps.ControllerRevision{Data: runtime.RawExtension{Object: obj}}, nil)
	both := HashControllerRevision(&apps.ControllerRevision{Data: runtime.RawExtension{Raw: []byte("ignored"), Object: obj}}, nil)
	if objOnly != both {
		t.Errorf("with an Object, Raw must not count (upstream resets the hash): %s vs %s", objOnly, both)
	}
	other := HashControllerRevision(&apps.ControllerRevision{Data: runtime.RawExtension{Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q"}}}}, nil)
	if other == objOnly {
		t.Error("different objects hashed the same")
	}
}

func TestControllerRevisionName(t *testing.T) {
	if got := ControllerRevisionName("web", "abc"); got != "web-abc" {
		t.Errorf("got %s", got)
	}
	long := strings.Repeat("a", 300)
	got := ControllerRevisionName(long, "1234567890")
	if want := strings.Repeat("a", 223) + "-1234567890"; got != want {
		t.Errorf("long prefix: got %d chars, want %d", len(got), len(want))
	}
	if len(got) > 253 {
		t.Errorf("name longer than a DNS subdomain: %d", len(got))
	}
	exact := strings.Repeat("b", 223)
	if got := ControllerRevisionName(exact, "x"); got != exact+"-x" {
		t.Error("a 223-byte prefix must be kept whole")
	}
}

func TestNewControllerRevision(t *testing.T) {
	parent := newParent("web", "uid-1")
	tmplLabels := map[string]string{"app": "foo"}
	cr, err := NewControllerRevision(parent, stsKind, tmplLabels, runtime.RawExtension{Raw: []byte(`{}`)}, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tmplLabels[ControllerRevisionHashLabel]; ok {
		t.Error("template labels were modified")
	}
	h := cr.Labels[ControllerRevisionHashLabel]
	if h == "" || cr.Labels["app"] != "foo" {
		t.Errorf("labels = %v", cr.Labels)
	}
	if cr.Name != "web-"+h || cr.Revision != 7 {
		t.Errorf("name %s revision %d", cr.Name, cr.Revision)
	}
	ref := metav1.GetControllerOf(cr)
	if ref == nil || ref.UID != "uid-1" || ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref = %+v", ref)
	}
}

func TestSortControllerRevisions(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	mk := func(name string, rev int64, ts metav1.Time) *apps.ControllerRevision {
		return &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ts}, Revision: rev}
	}
	revs := []*apps.ControllerRevision{
		mk("c", 2, t0), mk("b", 1, t1), mk("z", 1, t0), mk("a", 1, t0), mk("d", 3, t0),
	}
	SortControllerRevisions(revs)
	var got []string
	for _, r := range revs {
		got = append(got, r.Name)
	}
	if want := "a z b c d"; strings.Join(got, " ") != want {
		t.Errorf("order = %v, want %s", got, want)
	}
}

func TestEqualAndFindEqualRevisions(t *testing.T) {
	a := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: runtime.RawExtension{Raw: []byte(`{"x":1}`)}}
	b := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: runtime.RawExtension{Raw: []byte(`{"x":2}`)}}
	a2 := &apps.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "a2"}, Data: runtime.RawExtension{Raw: []byte(`{"x":1}`)}}
	if !EqualRevision(nil, nil) || EqualRevision(a, nil) || EqualRevision(nil, a) {
		t.Error("nil handling")
	}
	if !EqualRevision(a, a2) || EqualRevision(a, b) {
		t.Error("raw comparison")
	}
	withObj := &apps.ControllerRevision{Data: runtime.RawExtension{Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}}}
	withObj2 := &apps.ControllerRevision{Data: runtime.RawExtension{Object: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}}}
	if !EqualRevision(withObj, withObj2) {
		t.Error("semantically equal objects")
	}
	found := FindEqualRevisions([]*apps.ControllerRevision{a, b, a2}, a)
	if len(found) != 2 || found[0] != a || found[1] != a2 {
		t.Errorf("found %v", found)
	}
	if FindEqualRevisions([]*apps.ControllerRevision{b}, a) != nil {
		t.Error("expected none")
	}
}

type fixture struct {
	client  *fake.Clientset
	factory informers.SharedInformerFactory
	real    Interface
	fake    Interface
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Apps().V1().ControllerRevisions()
	for _, o := range objs {
		if cr, ok := o.(*apps.ControllerRevision); ok {
			if err := inf.Informer().GetIndexer().Add(cr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return &fixture{client: client, factory: factory, real: NewHistory(client, inf.Lister()), fake: NewFakeHistory(inf)}
}

func names(revs []*apps.ControllerRevision) string {
	var out []string
	for _, r := range revs {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestListControllerRevisions(t *testing.T) {
	parent := newParent("web", "uid-1")
	other := newParent("other", "uid-2")
	owned := rawRevision(t, parent, `{"a":1}`, 1, nil)
	orphan := rawRevision(t, parent, `{"a":2}`, 2, nil)
	orphan.Name = "orphan"
	orphan.OwnerReferences = nil
	foreign := rawRevision(t, other, `{"a":3}`, 1, nil)
	unmatched := rawRevision(t, parent, `{"a":4}`, 3, nil)
	unmatched.Name = "unmatched"
	unmatched.Labels = map[string]string{"app": "bar"}
	otherNS := rawRevision(t, parent, `{"a":5}`, 4, nil)
	otherNS.Name = "elsewhere"
	otherNS.Namespace = "kube-system"
	f := newFixture(t, owned, orphan, foreign, unmatched, otherNS)
	sel := labels.SelectorFromSet(labels.Set{"app": "foo"})
	for name, h := range map[string]Interface{"real": f.real, "fake": f.fake} {
		got, err := h.ListControllerRevisions(parent, sel)
		if err != nil {
			t.Fatal(err)
		}
		if want := names([]*apps.ControllerRevision{owned, orphan}); names(got) != want {
			t.Errorf("%s: listed %s, want %s", name, names(got), want)
		}
	}
}

func TestRealCreateControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("test", "uid-1")
	cr := rawRevision(t, parent, upstream134Data, 1, ptr.To[int32](0))

	t.Run("new", func(t *testing.T) {
		f := newFixture(t)
		cc := int32(0)
		created, err := f.real.CreateControllerRevision(ctx, parent, cr, &cc)
		if err != nil {
			t.Fatal(err)
		}
		if created.Name != upstream134Name || cc != 0 || created.Namespace != "default" {
			t.Errorf("created %s/%s with collisionCount %d", created.Namespace, created.Name, cc)
		}
		if _, err := f.client.AppsV1().ControllerRevisions("default").Get(ctx, upstream134Name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		}
	})

	t.Run("same data already there", func(t *testing.T) {
		existing := cr.DeepCopy()
		existing.Revision = 5
		f := newFixture(t, existing)
		cc := int32(0)
		got, err := f.real.CreateControllerRevision(ctx, parent, cr, &cc)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != upstream134Name || got.Revision != 5 || cc != 0 {
			t.Errorf("got %s rev %d, collisionCount %d; want the existing one untouched", got.Name, got.Revision, cc)
		}
	})

	t.Run("hash collision", func(t *testing.T) {
		squatter := cr.DeepCopy()
		squatter.Data.Raw = []byte(`{"different":true}`)
		f := newFixture(t, squatter)
		cc := int32(0)
		got, err := f.real.CreateControllerRevision(ctx, parent, cr, &cc)
		if err != nil {
			t.Fatal(err)
		}
		if cc != 1 {
			t.Errorf("collisionCount = %d, want 1", cc)
		}
		want := ControllerRevisionName("test", HashControllerRevision(cr, ptr.To[int32](1)))
		if got.Name != want || got.Name == upstream134Name {
			t.Errorf("created %s, want %s", got.Name, want)
		}
	})

	t.Run("nil collisionCount", func(t *testing.T) {
		f := newFixture(t)
		if _, err := f.real.CreateControllerRevision(ctx, parent, cr, nil); err == nil {
			t.Error("expected an error")
		}
	})
}

func TestFakeCreateControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("test", "uid-1")
	cr := rawRevision(t, parent, upstream134Data, 1, ptr.To[int32](0))
	squatter := cr.DeepCopy()
	squatter.Data.Raw = []byte(`{"different":true}`)
	f := newFixture(t, squatter)
	cc := int32(0)
	got, err := f.fake.CreateControllerRevision(ctx, parent, cr, &cc)
	if err != nil {
		t.Fatal(err)
	}
	if cc != 1 || got.Name == upstream134Name {
		t.Errorf("got %s with collisionCount %d", got.Name, cc)
	}
	again, err := f.fake.CreateControllerRevision(ctx, parent, cr, &cc)
	if err != nil || again.Name != got.Name || cc != 1 {
		t.Errorf("re-create of the same data: %v %v cc=%d", again, err, cc)
	}
	listed, _ := f.fake.ListControllerRevisions(parent, labels.Everything())
	if len(listed) != 2 {
		t.Errorf("listed %d revisions", len(listed))
	}
}

func TestRealUpdateControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("web", "uid-1")
	cr := rawRevision(t, parent, `{"a":1}`, 1, nil)
	f := newFixture(t, cr)
	conflicts := 1
	f.client.PrependReactor("update", "controllerrevisions", func(action core.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(revisionsResource, cr.Name, nil)
		}
		return false, nil, nil
	})
	got, err := f.real.UpdateControllerRevision(ctx, cr, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != 4 || cr.Revision != 1 {
		t.Errorf("returned revision %d, input now %d", got.Revision, cr.Revision)
	}
	stored, _ := f.client.AppsV1().ControllerRevisions("default").Get(ctx, cr.Name, metav1.GetOptions{})
	if stored.Revision != 4 {
		t.Errorf("stored revision %d", stored.Revision)
	}
	// Already at the wanted revision: no write.
	before := len(f.client.Actions())
	if _, err := f.real.UpdateControllerRevision(ctx, stored, 4); err != nil {
		t.Fatal(err)
	}
	if len(f.client.Actions()) != before {
		t.Error("no-op update wrote")
	}
}

func TestDeleteControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("web", "uid-1")
	cr := rawRevision(t, parent, `{"a":1}`, 1, nil)
	f := newFixture(t, cr)
	if err := f.real.DeleteControllerRevision(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.AppsV1().ControllerRevisions("default").Get(ctx, cr.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("still there: %v", err)
	}
	if err := f.fake.DeleteControllerRevision(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if err := f.fake.DeleteControllerRevision(ctx, cr); !apierrors.IsNotFound(err) {
		t.Errorf("fake delete of a missing revision: %v", err)
	}
}

func TestAdoptControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("web", "uid-1")
	orphan := rawRevision(t, parent, `{"a":1}`, 1, nil)
	orphan.OwnerReferences = nil
	orphan.UID = "rev-uid"
	owned := rawRevision(t, parent, `{"a":2}`, 2, nil)

	for name, pick := range map[string]func(*fixture) Interface{
		"real": func(f *fixture) Interface { return f.real },
		"fake": func(f *fixture) Interface { return f.fake },
	} {
		f := newFixture(t, orphan, owned)
		h := pick(f)
		adopted, err := h.AdoptControllerRevision(ctx, parent, stsKind, orphan)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ref := metav1.GetControllerOf(adopted)
		if ref == nil || ref.UID != parent.UID || ref.Kind != "StatefulSet" {
			t.Errorf("%s: controller ref %+v", name, ref)
		}
		if len(orphan.OwnerReferences) != 0 {
			t.Errorf("%s: input modified", name)
		}
		if _, err := h.AdoptControllerRevision(ctx, parent, stsKind, owned); err == nil {
			t.Errorf("%s: adopting an owned revision must fail", name)
		}
	}

	// The real patch carries the revision's UID as a precondition.
	f := newFixture(t, orphan)
	if _, err := f.real.AdoptControllerRevision(ctx, parent, stsKind, orphan); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.client.Actions() {
		if p, ok := a.(core.PatchAction); ok {
			var body map[string]map[string]interface{}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			if body["metadata"]["uid"] != "rev-uid" {
				t.Errorf("patch %s lacks the uid precondition", p.GetPatch())
			}
		}
	}
}

func TestReleaseControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("web", "uid-1")
	owned := rawRevision(t, parent, `{"a":1}`, 1, nil)
	owned.OwnerReferences = append(owned.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "uid-keep"})

	for name, pick := range map[string]func(*fixture) Interface{
		"real": func(f *fixture) Interface { return f.real },
		"fake": func(f *fixture) Interface { return f.fake },
	} {
		f := newFixture(t, owned)
		h := pick(f)
		released, err := h.ReleaseControllerRevision(ctx, parent, owned)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(released.OwnerReferences) != 1 || released.OwnerReferences[0].UID != "uid-keep" {
			t.Errorf("%s: owner refs after release %+v", name, released.OwnerReferences)
		}
		gone := owned.DeepCopy()
		gone.Name = "gone"
		if r, err := h.ReleaseControllerRevision(ctx, parent, gone); r != nil || err != nil {
			t.Errorf("%s: releasing a missing revision = %v, %v; want nil, nil", name, r, err)
		}
	}

	// An Invalid answer (nothing left to release) is not an error either.
	f := newFixture(t, owned)
	f.client.PrependReactor("patch", "controllerrevisions", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}, owned.Name, nil)
	})
	if r, err := f.real.ReleaseControllerRevision(ctx, parent, owned); r != nil || err != nil {
		t.Errorf("invalid: %v, %v", r, err)
	}
}

func TestFakeUpdateControllerRevision(t *testing.T) {
	ctx := context.Background()
	parent := newParent("web", "uid-1")
	cr := rawRevision(t, parent, `{"a":1}`, 1, nil)
	f := newFixture(t, cr)
	got, err := f.fake.UpdateControllerRevision(ctx, cr, 9)
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := f.fake.ListControllerRevisions(parent, labels.Everything())
	if got.Revision != 9 || cr.Revision != 1 || len(listed) != 1 || listed[0].Revision != 9 {
		t.Errorf("returned %d, input %d, stored %v", got.Revision, cr.Revision, listed)
	}
}
