package deployment

import (
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/deployment/util"
)

// The golden case: `kubectl create deployment web --image=nginx --replicas=3`.
func TestNewReplicaSetGolden(t *testing.T) {
	d := newDeployment(3)
	f := newFixture(t, d)
	acts := f.mustSync(d)

	created := rsCreates(acts)
	if len(created) != 1 {
		t.Fatalf("want one ReplicaSet created, got actions %s", describe(acts))
	}
	rs := created[0]
	if rs.Name != "web-5fc9f4bf66" {
		t.Errorf("name %q, want web-5fc9f4bf66", rs.Name)
	}
	if rs.Labels["pod-template-hash"] != "5fc9f4bf66" || rs.Labels["app"] != "web" ||
		rs.Spec.Template.Labels["pod-template-hash"] != "5fc9f4bf66" ||
		rs.Spec.Selector.MatchLabels["pod-template-hash"] != "5fc9f4bf66" || rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("labels/selector wrong: %v %v %v", rs.Labels, rs.Spec.Template.Labels, rs.Spec.Selector)
	}
	if _, ok := d.Spec.Template.Labels["pod-template-hash"]; ok {
		t.Error("deployment template was mutated")
	}
	want := map[string]string{util.RevisionAnnotation: "1", util.DesiredReplicasAnnotation: "3", util.MaxReplicasAnnotation: "4"}
	if len(rs.Annotations) != len(want) {
		t.Errorf("annotations %v, want %v", rs.Annotations, want)
	}
	for k, v := range want {
		if rs.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, rs.Annotations[k], v)
		}
	}
	if *rs.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *rs.Spec.Replicas)
	}
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller ref %+v", ref)
	}

	// One status write (upstream sends two, the second one conflicting).
	st := statusUpdates(acts)
	if len(st) != 1 {
		t.Fatalf("status writes: %s", describe(acts))
	}
	got := st[0]
	if got.Annotations[util.RevisionAnnotation] != "1" || got.Status.ObservedGeneration != 1 {
		t.Errorf("deployment revision %q, observedGeneration %d", got.Annotations[util.RevisionAnnotation], got.Status.ObservedGeneration)
	}
	expectCondition(t, got.Status, apps.DeploymentProgressing, v1.ConditionTrue, util.NewReplicaSetReason, `Created new replica set "web-5fc9f4bf66"`)
	expectCondition(t, got.Status, apps.DeploymentAvailable, v1.ConditionFalse, util.MinimumReplicasUnavailable, "Deployment does not have minimum availability.")
	if got.Status.TerminatingReplicas == nil || *got.Status.TerminatingReplicas != 0 {
		t.Errorf("terminatingReplicas %v, want 0", got.Status.TerminatingReplicas)
	}

	ev := f.events()
	if len(ev) != 1 || ev[0] != "Normal ScalingReplicaSet Scaled up replica set web-5fc9f4bf66 from 0 to 3" {
		t.Errorf("events %q", ev)
	}
}

func TestLongNameIsTruncated(t *testing.T) {
	name := strings.Repeat("a", 260)
	got := generateReplicaSetName(name, "5fc9f4bf66")
	if len(got) != 253 || !strings.HasSuffix(got, "-5fc9f4bf66") {
		t.Errorf("got %d chars: %q", len(got), got)
	}
}

// The swap test: a ReplicaSet made by upstream for the same template is the
// new ReplicaSet; nothing is created and no ReplicaSet is touched.
func TestTakesOverUpstreamReplicaSet(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{util.RevisionAnnotation: "1"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	if rs.Name != "web-5fc9f4bf66" {
		t.Fatalf("fixture hash %s", rs.Name)
	}
	// Upstream's status for this state.
	d.Status = apps.DeploymentStatus{
		ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		TerminatingReplicas: ptr.To[int32](0),
		Conditions: []apps.DeploymentCondition{
			*util.NewDeploymentCondition(t0, apps.DeploymentAvailable, v1.ConditionTrue, util.MinimumReplicasAvailable, "Deployment has minimum availability."),
			*util.NewDeploymentCondition(t0, apps.DeploymentProgressing, v1.ConditionTrue, util.NewRSAvailableReason, `ReplicaSet "web-5fc9f4bf66" has successfully progressed.`),
		},
	}
	f := newFixture(t, d, rs)
	if acts := f.mustSync(d); len(acts) != 0 {
		t.Fatalf("steady state must not write, got %s", describe(acts))
	}
}

// An orphan ReplicaSet for the template is adopted, not duplicated.
func TestAdoptsOrphanReplicaSet(t *testing.T) {
	d := newDeployment(3)
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.OwnerReferences = nil
	f := newFixture(t, d, rs)
	acts := f.mustSync(d)
	if len(rsCreates(acts)) != 0 {
		t.Fatalf("created a ReplicaSet: %s", describe(acts))
	}
	if len(acts) == 0 || acts[0].GetVerb() != "patch" || acts[0].GetResource().Resource != "replicasets" {
		t.Fatalf("expected an adoption patch first, got %s", describe(acts))
	}
	patched, err := f.client.AppsV1().ReplicaSets("default").Get(f.ctx, rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(patched); ref == nil || ref.UID != d.UID {
		t.Errorf("not adopted: %+v", patched.OwnerReferences)
	}
}

// A Deployment being deleted adopts nothing and creates nothing.
func TestNoAdoptionWhileDeleting(t *testing.T) {
	d := newDeployment(3)
	now := metav1.NewTime(t0)
	d.DeletionTimestamp = &now
	d.Finalizers = []string{"foregroundDeletion"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.OwnerReferences = nil
	f := newFixture(t, d, rs)
	acts := f.mustSync(d)
	for _, a := range acts {
		if a.GetResource().Resource == "replicasets" {
			t.Fatalf("touched ReplicaSets while deleting: %s", describe(acts))
		}
	}
}

// A cached Deployment that the apiserver already marks deleted adopts nothing.
func TestAdoptionRechecksDeletion(t *testing.T) {
	d := newDeployment(3)
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.OwnerReferences = nil
	live := d.DeepCopy()
	now := metav1.NewTime(t0)
	live.DeletionTimestamp = &now
	live.Finalizers = []string{"foregroundDeletion"}
	f := newFixture(t, live, rs)
	// The cache still has the old copy.
	f.addToCache(d)
	if _, err := f.sync(d); err == nil {
		t.Fatal("expected adoption to be refused")
	}
	for _, a := range writes(f.client.Actions()) {
		if a.GetResource().Resource == "replicasets" {
			t.Fatalf("touched ReplicaSets: %s", describe(f.client.Actions()))
		}
	}
}

func TestSelectingAll(t *testing.T) {
	d := newDeployment(3)
	d.Spec.Selector = &metav1.LabelSelector{}
	d.Generation = 2
	f := newFixture(t, d)
	acts := f.mustSync(d)
	st := statusUpdates(acts)
	if len(acts) != 1 || len(st) != 1 || st[0].Status.ObservedGeneration != 2 {
		t.Fatalf("want only an observedGeneration write, got %s", describe(acts))
	}
	if ev := f.events(); len(ev) != 1 || ev[0] != "Warning SelectingAll This deployment is selecting all pods. A non-empty selector is required." {
		t.Errorf("events %q", ev)
	}
}

// A name taken by a ReplicaSet with another template bumps collisionCount,
// and the next pass picks another name.
func TestHashCollision(t *testing.T) {
	d := newDeployment(3)
	squatter := ownedRS(d, webTemplate("httpd"), 0, 1, t0)
	squatter.Name = "web-5fc9f4bf66"
	squatter.UID = types.UID("squatter")
	squatter.OwnerReferences = nil
	squatter.Labels = map[string]string{"other": "x"}
	f := newFixture(t, d, squatter)

	acts, err := f.sync(d)
	if err == nil {
		t.Fatal("expected the AlreadyExists error to requeue")
	}
	st := statusUpdates(acts)
	if len(st) != 1 || st[0].Status.CollisionCount == nil || *st[0].Status.CollisionCount != 1 {
		t.Fatalf("collisionCount not bumped: %s", describe(acts))
	}

	d2, _ := f.client.AppsV1().Deployments("default").Get(f.ctx, "web", metav1.GetOptions{})
	f.addToCache(d2)
	acts = f.mustSync(d2)
	created := rsCreates(acts)
	if len(created) != 1 || created[0].Name == "web-5fc9f4bf66" {
		t.Fatalf("second pass created %v", describe(acts))
	}
	if want := "web-" + util.ComputeHash(&d.Spec.Template, ptr.To[int32](1)); created[0].Name != want {
		t.Errorf("name %s, want %s", created[0].Name, want)
	}
}

// An AlreadyExists for our own ReplicaSet (stale cache) is no collision.
func TestAlreadyExistsOwnReplicaSet(t *testing.T) {
	d := newDeployment(3)
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	f := newFixture(t, d, rs)
	// The pass does not know the ReplicaSet yet (empty rsList) but the
	// apiserver and the lister do.
	p := &syncPass{dc: f.dc, d: d.DeepCopy()}
	got, err := p.getNewReplicaSet(f.ctx, nil, true)
	if err != nil || got == nil || got.Name != rs.Name {
		t.Fatalf("got %v, %v", got, err)
	}
	if p.d.Status.CollisionCount != nil {
		t.Error("collisionCount bumped for our own ReplicaSet")
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %q", ev)
	}
}

func TestReplicaSetHandlers(t *testing.T) {
	d := newDeployment(3)
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	f := newFixture(t, d)
	logger := klogFrom(f)
	f.dc.addReplicaSet(logger, rs)
	if f.dc.queue.Len() != 1 {
		t.Fatalf("owner not enqueued")
	}
	key, _ := f.dc.queue.Get()
	f.dc.queue.Done(key)
	if key != "default/web" {
		t.Errorf("key %q", key)
	}

	orphan := rs.DeepCopy()
	orphan.OwnerReferences = nil
	f.dc.addReplicaSet(logger, orphan)
	if f.dc.queue.Len() != 1 {
		t.Fatalf("matching deployment not enqueued for orphan")
	}
	key, _ = f.dc.queue.Get()
	f.dc.queue.Done(key)

	// Same resourceVersion: a resync, ignored.
	f.dc.updateReplicaSet(logger, rs, rs)
	if f.dc.queue.Len() != 0 {
		t.Error("resync enqueued")
	}

	// A pod deletion matters only to Recreate Deployments.
	rsCached := rs.DeepCopy()
	f.addToCache(rsCached)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, apps.SchemeGroupVersion.WithKind("ReplicaSet"))}}}
	f.dc.deletePod(logger, pod)
	if f.dc.queue.Len() != 0 {
		t.Error("rolling deployment enqueued on pod delete")
	}
	rec := d.DeepCopy()
	rec.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	f.addToCache(rec)
	f.dc.deletePod(logger, pod)
	if f.dc.queue.Len() != 1 {
		t.Error("recreate deployment not enqueued on pod delete")
	}
}

func TestDeletedDeploymentIsNoop(t *testing.T) {
	f := newFixture(t)
	if acts, err := f.sync(newDeployment(1)); err != nil || len(acts) != 0 {
		t.Fatalf("got %s, %v", describe(acts), err)
	}
}

func TestReplicaSetOwnerChangeWakesBoth(t *testing.T) {
	d1 := newDeployment(1)
	d2 := newDeployment(1)
	d2.Name, d2.UID = "other", "other-uid"
	f := newFixture(t, d1, d2)
	logger := klogFrom(f)
	rs := ownedRS(d1, d1.Spec.Template, 1, 1, t0)
	rs.ResourceVersion = "1"
	moved := rs.DeepCopy()
	moved.ResourceVersion = "2"
	moved.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(d2, controllerKind)}
	f.dc.updateReplicaSet(logger, rs, moved)
	seen := map[string]bool{}
	for f.dc.queue.Len() > 0 {
		k, _ := f.dc.queue.Get()
		seen[k] = true
		f.dc.queue.Done(k)
	}
	if !seen["default/web"] || !seen["default/other"] {
		t.Errorf("enqueued %v", seen)
	}

	f.dc.deleteReplicaSet(logger, cache.DeletedFinalStateUnknown{Key: "default/x", Obj: moved})
	if k, _ := f.dc.queue.Get(); k != "default/other" {
		t.Errorf("tombstone delete enqueued %q", k)
	}
}

// A new ReplicaSet whose annotations are current is returned as cached,
// not copied; one that needs an annotation is updated from a copy, and the
// cached object is left as it was.
func TestNewReplicaSetCopiedOnlyWhenChanged(t *testing.T) {
	d := newDeployment(3)
	d.Annotations = map[string]string{"team": "a"}
	rs := ownedRS(d, d.Spec.Template, 3, 1, t0)
	rs.Annotations["team"] = "a"
	f := newFixture(t, d, rs)
	cached, err := f.dc.rsLister.ReplicaSets(rs.Namespace).Get(rs.Name)
	if err != nil {
		t.Fatal(err)
	}
	p := &syncPass{dc: f.dc, d: d.DeepCopy(), rsList: []*apps.ReplicaSet{cached}}
	got, err := p.getNewReplicaSet(f.ctx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != cached {
		t.Errorf("unchanged new ReplicaSet was copied")
	}

	// Positive control: a new user annotation on the Deployment is written,
	// and the cache's copy keeps its old annotations.
	p.d.Annotations["team"] = "b"
	f.client.ClearActions()
	got, err = p.getNewReplicaSet(f.ctx, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got == cached || got.Annotations["team"] != "b" {
		t.Errorf("got %v, want an updated copy with team=b", got.Annotations)
	}
	if cached.Annotations["team"] != "a" {
		t.Errorf("cached ReplicaSet changed: %v", cached.Annotations)
	}
	var updates int
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "replicasets" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("actions %v, want one ReplicaSet update", f.client.Actions())
	}
}
