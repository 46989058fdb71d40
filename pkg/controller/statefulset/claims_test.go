package statefulset

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func withPolicy(set *apps.StatefulSet, scaled, deleted apps.PersistentVolumeClaimRetentionPolicyType) *apps.StatefulSet {
	set.Spec.PersistentVolumeClaimRetentionPolicy = &apps.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenScaled: scaled, WhenDeleted: deleted}
	return set
}

// ownerNames lists a claim's owners as "Kind/name" (controller refs only).
func ownerNames(claim *v1.PersistentVolumeClaim) string {
	var out []string
	for _, ref := range claim.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			out = append(out, "non-controller:"+ref.Name)
			continue
		}
		out = append(out, ref.Kind+"/"+ref.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func TestClaimOwnersPerPolicy(t *testing.T) {
	for _, tc := range []struct {
		scaled, deleted   apps.PersistentVolumeClaimRetentionPolicyType
		wanted, condemned string
	}{
		{retainPolicy, retainPolicy, "", ""},
		{retainPolicy, deletePolicy, "StatefulSet/web", "StatefulSet/web"},
		{deletePolicy, retainPolicy, "", "Pod/web-2"},
		{deletePolicy, deletePolicy, "StatefulSet/web", "Pod/web-2"},
	} {
		set := withPolicy(newSet("web", 2), tc.scaled, tc.deleted)
		for _, ord := range []int{1, 2} {
			pod := newStatefulSetPod(set, ord)
			pod.UID = types.UID(fmt.Sprintf("pod-uid-%d", ord))
			want := tc.wanted
			if ord == 2 {
				want = tc.condemned
			}
			if want != "" {
				want = strings.ReplaceAll(want, "web-2", pod.Name)
			}
			// Start from the "wrong" owners: both refs present.
			claim := &claimsFor(set, pod)[0]
			claim.OwnerReferences = []metav1.OwnerReference{
				*metav1.NewControllerRef(set, controllerKind),
				*metav1.NewControllerRef(pod, podKind),
				{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm"},
			}
			fixed := claim.DeepCopy()
			setClaimOwners(fixed, set, pod)
			got := ownerNames(fixed)
			wantAll := want
			if wantAll == "" {
				wantAll = "non-controller:other"
			} else {
				wantAll += ",non-controller:other"
			}
			if got != wantAll {
				t.Errorf("%s/%s ordinal %d: owners %q, want %q", tc.scaled, tc.deleted, ord, got, wantAll)
			}
			if !claimOwnerUpToDate(fixed, set, pod) {
				t.Errorf("%s/%s ordinal %d: fixed claim not up to date", tc.scaled, tc.deleted, ord)
			}
			wrong := want != "StatefulSet/web,Pod/"+pod.Name
			if claimOwnerUpToDate(claim, set, pod) == wrong {
				t.Errorf("%s/%s ordinal %d: both refs judged up to date = %v", tc.scaled, tc.deleted, ord, !wrong)
			}
		}
	}
}

func TestClaimOwnerEdgeCases(t *testing.T) {
	set := withPolicy(newSet("web", 1), deletePolicy, deletePolicy)
	pod := newStatefulSetPod(set, 0)
	pod.UID = "pod-uid"
	base := claimsFor(set, pod)[0]

	// A reference to an earlier set of the same name: hands off.
	stale := base.DeepCopy()
	ref := metav1.NewControllerRef(set, controllerKind)
	ref.UID = "old-set"
	stale.OwnerReferences = []metav1.OwnerReference{*ref}
	if !claimOwnerUpToDate(stale, set, pod) || !hasStaleOwnerRef(stale, set, controllerKind) {
		t.Error("stale set reference must leave the claim alone")
	}

	// Another controller: our references go, none are added.
	other := base.DeepCopy()
	other.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: "example.com/v1", Kind: "Operator", Name: "op", UID: "op-uid", Controller: ptr.To(true)},
		*metav1.NewControllerRef(set, controllerKind),
	}
	if claimOwnerUpToDate(other, set, pod) {
		t.Error("our reference next to another controller must be removed")
	}
	setClaimOwners(other, set, pod)
	if len(other.OwnerReferences) != 1 || other.OwnerReferences[0].Name != "op" || !claimOwnerUpToDate(other, set, pod) {
		t.Errorf("refs %+v", other.OwnerReferences)
	}

	// Owned by the set, but not as controller: rewritten.
	plain := base.DeepCopy()
	plain.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: set.UID}}
	if claimOwnerUpToDate(plain, set, pod) {
		t.Error("non-controller reference must be fixed")
	}

	// Retain/Retain tolerates other controllers.
	retain := withPolicy(newSet("web", 1), retainPolicy, retainPolicy)
	if hasUnexpectedController(other, retain, pod) {
		t.Error("Retain policy sees no unexpected controller")
	}
}

// As upstream, a claim is created without owner references. When the
// claim is already in the cache once its pod is created, the references
// are added right then.
func TestWhenDeletedDeleteSetsOwnerAfterCreation(t *testing.T) {
	f := newFixture(t, withPolicy(newSet("web", 2), retainPolicy, deletePolicy))
	f.converge("web")
	for _, name := range []string{"datadir-web-0", "datadir-web-1"} {
		if got := ownerNames(f.claim(name)); got != "StatefulSet/web" {
			t.Errorf("%s owners %q", name, got)
		}
	}
	ops := f.store.opsSnapshot()
	iCreate := slices.Index(ops, "create claim datadir-web-0")
	iPod := slices.Index(ops, "create pod web-0")
	iUpdate := slices.Index(ops, "update claim datadir-web-0")
	if iCreate < 0 || iPod < iCreate || iUpdate < iPod {
		t.Errorf("want create claim, create pod, update claim; ops %v", ops)
	}
	// Scale-down keeps the claims (whenScaled=Retain) and their set owner.
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	f.converge("web")
	if got := ownerNames(f.claim("datadir-web-1")); got != "StatefulSet/web" {
		t.Errorf("condemned claim owners %q", got)
	}
}

// When the cache has not seen the new claim yet, the references are added
// on a later sync, through a pod update with its SuccessfulUpdate event,
// as upstream does.
func TestNewClaimOwnersFixedOnLaterSync(t *testing.T) {
	f := newFixture(t, withPolicy(newSet("web", 1), retainPolicy, deletePolicy))
	f.store.claimLag = true
	f.mustSync("web")
	if got := ownerNames(f.claim("datadir-web-0")); got != "" {
		t.Fatalf("claim created with owners %q, want none", got)
	}
	if got := f.opsMatching("update claim"); len(got) != 0 {
		t.Fatalf("claim updated before the cache saw it: %v", got)
	}
	f.markRunningReady("web-0")
	f.takeEvents()
	f.mustSync("web")
	if got := ownerNames(f.claim("datadir-web-0")); got != "StatefulSet/web" {
		t.Errorf("claim owners %q after the next sync", got)
	}
	if got := f.opsMatching("update pod web-0"); len(got) != 1 {
		t.Errorf("pod updates %v, want one", got)
	}
	want := "Normal SuccessfulUpdate Update Pod web-0 in StatefulSet web successful"
	if events := f.takeEvents(); !slices.Contains(events, want) {
		t.Errorf("events %v lack %q", events, want)
	}
}

func TestWhenScaledDeleteOwnsCondemnedClaimsByPod(t *testing.T) {
	f := newFixture(t, withPolicy(newSet("web", 3), deletePolicy, deletePolicy))
	f.converge("web")
	f.store.gracefulDelete = true
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	f.mustSync("web")
	// Before web-2 is deleted, the claims of both condemned pods point at
	// their pod, so the garbage collector removes them with it.
	ops := f.store.opsSnapshot()
	iUpdate := slices.Index(ops, "update claim datadir-web-2")
	iDelete := slices.Index(ops, "delete pod web-2")
	if iUpdate < 0 || iDelete < 0 || iUpdate > iDelete {
		t.Fatalf("ops %v", ops)
	}
	for _, ord := range []int{1, 2} {
		claim := f.claim(fmt.Sprintf("datadir-web-%d", ord))
		pod := f.pod(fmt.Sprintf("web-%d", ord))
		if got := ownerNames(claim); got != "Pod/"+pod.Name || claim.OwnerReferences[0].UID != pod.UID {
			t.Errorf("claim %s owners %q", claim.Name, got)
		}
	}
	if got := ownerNames(f.claim("datadir-web-0")); got != "StatefulSet/web" {
		t.Errorf("kept claim owners %q", got)
	}
}

func TestPolicyChangeUpdatesExistingClaims(t *testing.T) {
	f := newFixture(t, newSet("web", 2))
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) {
		withPolicy(s, retainPolicy, deletePolicy)
	})
	f.converge("web")
	for _, name := range []string{"datadir-web-0", "datadir-web-1"} {
		if got := ownerNames(f.claim(name)); got != "StatefulSet/web" {
			t.Errorf("%s owners %q", name, got)
		}
	}
	// Back to Retain: the references are removed.
	f.setSpec("web", func(s *apps.StatefulSet) { withPolicy(s, retainPolicy, retainPolicy) })
	f.converge("web")
	if got := ownerNames(f.claim("datadir-web-0")); got != "" {
		t.Errorf("owners after Retain %q", got)
	}
}

func TestStaleClaimBlocksScaleUp(t *testing.T) {
	f := newFixture(t, withPolicy(newSet("web", 1), deletePolicy, retainPolicy))
	// A claim left by an earlier web-1 still waits for garbage collection.
	claim := claimsFor(f.getSet("web"), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}})[0]
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-1", UID: "gone", Controller: ptr.To(true)}}
	if err := f.store.claims.Add(&claim); err != nil {
		t.Fatal(err)
	}
	f.converge("web")
	f.setSpec("web", func(s *apps.StatefulSet) { s.Spec.Replicas = ptr.To[int32](2) })
	for i := 0; i < 5; i++ {
		f.mustSync("web")
	}
	if got := f.podNames("web"); got != "web-0" {
		t.Fatalf("pods %q while web-1's old claim exists", got)
	}
	if err := f.store.claims.Delete(&claim); err != nil {
		t.Fatal(err)
	}
	f.converge("web")
	if got := f.podNames("web"); got != "web-0,web-1" {
		t.Errorf("pods %q once the stale claim is gone", got)
	}
}

func TestConflictingControllerEvent(t *testing.T) {
	f := newFixture(t, withPolicy(newSet("web", 1), retainPolicy, deletePolicy))
	claim := claimsFor(f.getSet("web"), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}})[0]
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Operator", Name: "op", UID: "op", Controller: ptr.To(true)}}
	if err := f.store.claims.Add(&claim); err != nil {
		t.Fatal(err)
	}
	f.converge("web")
	want := "Warning ConflictingController PersistentVolumeClaim datadir-web-0 has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"
	if !slices.Contains(f.takeEvents(), want) {
		t.Error("no ConflictingController event")
	}
	if got := ownerNames(f.claim("datadir-web-0")); got != "Operator/op" && got != "non-controller:op" {
		t.Errorf("owners %q", got)
	}
	if f.podNames("web") != "web-0" {
		t.Error("pod not created")
	}
}
