package daemon

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apps "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestRevisionCreated(t *testing.T) {
	ds := newDS("ds")
	ds.Annotations["note"] = "x"
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	f.mustSync(ds)

	h := hashOf(ds)
	revs := f.revisions()
	r, ok := revs["ds-"+h]
	if !ok || len(revs) != 1 {
		t.Fatalf("revisions = %v, want only ds-%s", keys(revs), h)
	}
	if r.Revision != 1 {
		t.Errorf("revision = %d, want 1", r.Revision)
	}
	if want := map[string]string{"app": "ds", "controller-revision-hash": h}; !reflect.DeepEqual(r.Labels, want) {
		t.Errorf("labels = %v, want %v", r.Labels, want)
	}
	if !reflect.DeepEqual(r.Annotations, ds.Annotations) {
		t.Errorf("annotations = %v, want the DaemonSet's %v", r.Annotations, ds.Annotations)
	}
	if ref := metav1.GetControllerOf(r); ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" {
		t.Errorf("owner = %+v", ref)
	}
	data := string(r.Data.Raw)
	if !strings.HasPrefix(data, `{"spec":{"template":{"$patch":"replace","metadata":{`) ||
		!strings.Contains(data, `"labels":{"app":"ds"}`) ||
		!strings.Contains(data, `"spec":{"containers":[{"image":"img:1","name":"c","resources":{}}]}`) {
		t.Errorf("data = %s", data)
	}
	// Pods are labelled with the revision's hash.
	if f.pc.Templates[0].Labels["controller-revision-hash"] != h {
		t.Errorf("pod hash label = %q, want %q", f.pc.Templates[0].Labels["controller-revision-hash"], h)
	}
}

func TestRevisionsFollowTemplateChanges(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addDS(ds)
	f.mustSync(ds)
	f.syncRevisionsToCache()
	h1 := hashOf(ds)

	ds2 := ds.DeepCopy()
	ds2.Spec.Template.Spec.Containers[0].Image = "img:2"
	ds2.Generation = 2
	f.updateDS(ds2)
	f.mustSync(ds2)
	f.syncRevisionsToCache()
	h2 := hashOf(ds2)
	revs := f.revisions()
	if len(revs) != 2 || revs["ds-"+h1].Revision != 1 || revs["ds-"+h2].Revision != 2 {
		t.Fatalf("revisions = %v", revNumbers(revs))
	}

	// Rolling back to the first template renumbers its revision instead of
	// creating another.
	ds3 := ds2.DeepCopy()
	ds3.Spec.Template.Spec.Containers[0].Image = "img:1"
	ds3.Generation = 3
	f.updateDS(ds3)
	f.mustSync(ds3)
	revs = f.revisions()
	if len(revs) != 2 || revs["ds-"+h1].Revision != 3 || revs["ds-"+h2].Revision != 2 {
		t.Errorf("revisions after rollback = %v, want ds-%s at 3", revNumbers(revs), h1)
	}
}

func TestHistoryCleanup(t *testing.T) {
	ds := newDS("ds")
	ds.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	f := newFixture(t, newNode("n", nil))
	f.addDS(ds)
	// Five old revisions; the pod still runs revision 1's template.
	for i := 1; i <= 5; i++ {
		r := oldRevision(ds, "old"+strconv.Itoa(i), int64(i))
		f.addRevision(r)
	}
	f.addToCache(newPod("p", ds, "n", "old1", ready(time.Hour)))
	f.mustSync(ds)

	revs := f.revisions()
	var left []string
	for name := range revs {
		left = append(left, name)
	}
	sort.Strings(left)
	// 5 old revisions, limit 2: the 3 oldest not in use go; the one in
	// use counts towards the limit.
	want := []string{"ds-" + hashOf(ds), "ds-old1", "ds-old5"}
	sort.Strings(want)
	if !reflect.DeepEqual(left, want) {
		t.Errorf("revisions left = %v, want %v", left, want)
	}
	if revs["ds-"+hashOf(ds)].Revision != 6 {
		t.Errorf("current revision = %d, want 6", revs["ds-"+hashOf(ds)].Revision)
	}
}

func TestDuplicateCurrentRevisionsCollapsed(t *testing.T) {
	ds := newDS("ds")
	ds.Spec.UpdateStrategy = apps.DaemonSetUpdateStrategy{Type: apps.OnDeleteDaemonSetStrategyType}
	f := newFixture(t, newNode("n", nil))
	f.useRealPodControl()
	f.addDS(ds)
	data, err := getPatch(ds)
	if err != nil {
		t.Fatal(err)
	}
	a := oldRevision(ds, "aaa", 1)
	a.Data.Raw = data
	b := oldRevision(ds, "bbb", 2)
	b.Data.Raw = data
	f.addRevision(a)
	f.addRevision(b)
	pod := newPod("p", ds, "n", "aaa", ready(time.Hour))
	f.addToCache(pod)
	if err := f.client.Tracker().Add(pod); err != nil {
		t.Fatal(err)
	}
	f.mustSync(ds)

	revs := f.revisions()
	if _, ok := revs["ds-aaa"]; ok || len(revs) != 1 {
		t.Errorf("revisions = %v, want only ds-bbb", keys(revs))
	}
	got, err := f.client.CoreV1().Pods(testNS).Get(f.ctx, "p", metav1.GetOptions{})
	if err != nil || got.Labels["controller-revision-hash"] != "bbb" {
		t.Errorf("pod relabelled to %q (%v), want bbb", got.Labels["controller-revision-hash"], err)
	}
}

func TestHashCollisionBumpsCollisionCount(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addDS(ds)
	// Someone else's revision already has our name.
	squatter := oldRevision(ds, hashOf(ds), 1)
	squatter.OwnerReferences = nil
	squatter.Labels = map[string]string{"other": "x"}
	if err := f.client.Tracker().Add(squatter); err != nil {
		t.Fatal(err)
	}
	if err := f.sync(ds); err == nil {
		t.Fatal("sync succeeded despite a name collision")
	}
	live, _ := f.client.AppsV1().DaemonSets(testNS).Get(f.ctx, "ds", metav1.GetOptions{})
	if live.Status.CollisionCount == nil || *live.Status.CollisionCount != 1 {
		t.Fatalf("collisionCount = %v, want 1", live.Status.CollisionCount)
	}
	f.addToCache(live)
	f.mustSync(live)
	h := hashOf(live)
	if h == hashOf(ds) {
		t.Fatal("collisionCount did not change the hash")
	}
	if _, ok := f.revisions()["ds-"+h]; !ok {
		t.Errorf("revisions = %v, want ds-%s", keys(f.revisions()), h)
	}
}

func TestSnapshotAlreadyCreatedByUs(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addDS(ds)
	f.mustSync(ds)
	// The cache has not seen the revision yet: the next sync finds it
	// through the API instead of bumping collisionCount.
	f.mustSync(ds)
	live, _ := f.client.AppsV1().DaemonSets(testNS).Get(f.ctx, "ds", metav1.GetOptions{})
	if live.Status.CollisionCount != nil {
		t.Errorf("collisionCount = %d, want unset", *live.Status.CollisionCount)
	}
}

func TestRevisionWithoutHashLabelGetsOne(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addDS(ds)
	r := oldRevision(ds, "legacy", 1)
	delete(r.Labels, apps.DefaultDaemonSetUniqueLabelKey)
	f.addRevision(r)
	f.mustSync(ds)
	if got := f.revisions()["ds-legacy"].Labels[apps.DefaultDaemonSetUniqueLabelKey]; got != "ds-legacy" {
		t.Errorf("hash label = %q, want the revision name", got)
	}
}

func TestOrphanRevisionAdopted(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	f.addDS(ds)
	r := oldRevision(ds, "orphan", 1)
	r.OwnerReferences = nil
	f.addRevision(r)
	f.mustSync(ds)
	adopted := false
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "controllerrevisions" && p.GetName() == "ds-orphan" &&
			strings.Contains(string(p.GetPatch()), `"uid":"ds-uid"`) {
			adopted = true
		}
	}
	if !adopted {
		t.Error("orphan revision not adopted")
	}
}

func TestMatchAndGetPatch(t *testing.T) {
	ds := newDS("ds")
	p, err := getPatch(ds)
	if err != nil {
		t.Fatal(err)
	}
	r := &apps.ControllerRevision{Data: runtime.RawExtension{Raw: p}}
	if ok, _ := Match(ds, r); !ok {
		t.Error("revision of the current template does not match")
	}
	ds2 := ds.DeepCopy()
	ds2.Spec.Template.Labels["x"] = "y"
	if ok, _ := Match(ds2, r); ok {
		t.Error("revision matches a different template")
	}
	// Fields outside the template do not matter.
	ds3 := ds.DeepCopy()
	ds3.Spec.MinReadySeconds = 9
	ds3.Annotations["a"] = "b"
	if ok, _ := Match(ds3, r); !ok {
		t.Error("revision depends on fields outside spec.template")
	}
}

func oldRevision(ds *apps.DaemonSet, hash string, revision int64) *apps.ControllerRevision {
	return &apps.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: ds.Name + "-" + hash, Namespace: testNS, UID: types.UID("rev-" + hash),
			Labels:          map[string]string{"app": ds.Name, apps.DefaultDaemonSetUniqueLabelKey: hash},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)},
		},
		Data:     runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"image":"` + hash + `"}]}}}}`)},
		Revision: revision,
	}
}

func (f *fixture) addRevision(r *apps.ControllerRevision) {
	f.t.Helper()
	if err := f.client.Tracker().Add(r); err != nil {
		f.t.Fatal(err)
	}
	f.addToCache(r)
}

func keys(m map[string]*apps.ControllerRevision) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func revNumbers(m map[string]*apps.ControllerRevision) map[string]int64 {
	out := map[string]int64{}
	for k, r := range m {
		out[k] = r.Revision
	}
	return out
}

func TestHashCollisionWithStaleCountRetries(t *testing.T) {
	ds := newDS("ds")
	f := newFixture(t)
	live := ds.DeepCopy()
	live.Status.CollisionCount = ptr.To[int32](1)
	if err := f.client.Tracker().Add(live); err != nil {
		t.Fatal(err)
	}
	f.addToCache(ds) // the cache still has no collisionCount
	squatter := oldRevision(ds, hashOf(ds), 1)
	squatter.OwnerReferences = nil
	squatter.Labels = map[string]string{"other": "x"}
	if err := f.client.Tracker().Add(squatter); err != nil {
		t.Fatal(err)
	}
	if err := f.sync(ds); err == nil || !strings.Contains(err.Error(), "stale collision count (<nil>, expected 1)") {
		t.Fatalf("sync error = %v, want a stale collision count", err)
	}
	got, _ := f.client.AppsV1().DaemonSets(testNS).Get(f.ctx, "ds", metav1.GetOptions{})
	if *got.Status.CollisionCount != 1 {
		t.Errorf("collisionCount bumped to %d from a stale cache", *got.Status.CollisionCount)
	}
}
