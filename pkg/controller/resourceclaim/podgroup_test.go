package resourceclaim

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
)

const groupName = "group"

func workloadFeatures() Features {
	f := allFeatures()
	f.GenericWorkload = true
	f.WorkloadResourceClaims = true
	return f
}

func podGroupWithTemplate() *schedulingapi.PodGroup {
	return &schedulingapi.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: groupName, UID: "group-uid"},
		Spec: schedulingapi.PodGroupSpec{
			ResourceClaims: []schedulingapi.PodGroupResourceClaim{{Name: podClaimName, ResourceClaimTemplateName: ptr.To(templateName)}},
		},
	}
}

func groupMember(name string) *v1.Pod {
	pod := podWithTemplate(name)
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(groupName)}
	return pod
}

func groupClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       ns,
			Name:            name,
			UID:             ktypes.UID(name + "-uid"),
			ResourceVersion: "1",
			Annotations:     map[string]string{resourceapi.PodResourceClaimAnnotation: podClaimName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: groupName, UID: "group-uid", Controller: ptr.To(true)}},
		},
		Spec: claimSpec(),
	}
}

func TestPodGroupClaim(t *testing.T) {
	t.Run("created-for-group", func(t *testing.T) {
		f := newFixture(t, workloadFeatures(), podGroupWithTemplate(), template())
		before, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "false", "scheduling.k8s.io", "PodGroup"))
		f.mustSync("podgroup:ns/group")
		claims := f.claims()
		if len(claims) != 1 {
			t.Fatalf("want one claim, got %d", len(claims))
		}
		if claims[0].GenerateName != "group-gpu-" {
			t.Errorf("generateName %q", claims[0].GenerateName)
		}
		wantOwner := []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: groupName, UID: "group-uid", Controller: ptr.To(true)}}
		if !reflect.DeepEqual(claims[0].OwnerReferences, wantOwner) {
			t.Errorf("owner %+v", claims[0].OwnerReferences)
		}
		pg, err := f.client.SchedulingV1beta1().PodGroups(ns).Get(f.ctx, groupName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s := pg.Status.ResourceClaimStatuses; len(s) != 1 || s[0].Name != podClaimName || *s[0].ResourceClaimName != claims[0].Name {
			t.Errorf("PodGroup status %+v", s)
		}
		after, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "false", "scheduling.k8s.io", "PodGroup"))
		if after != before+1 {
			t.Errorf("PodGroup creates went from %v to %v", before, after)
		}
	})

	t.Run("member-waits-for-group-claim", func(t *testing.T) {
		f := newFixture(t, workloadFeatures(), podGroupWithTemplate(), groupMember("m"), template())
		f.mustSync("pod:ns/m")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("writes %v", w)
		}
	})

	t.Run("member-points-at-group-claim", func(t *testing.T) {
		f := newFixture(t, workloadFeatures(), podGroupWithTemplate(), groupMember("m"), template(), groupClaim("group-gpu-1"))
		f.mustSync("pod:ns/m")
		if n := len(f.claims()); n != 1 {
			t.Errorf("%d claims, want only the group's", n)
		}
		if s := f.pod("m").Status.ResourceClaimStatuses; len(s) != 1 || *s[0].ResourceClaimName != "group-gpu-1" {
			t.Errorf("pod status %+v", s)
		}
	})

	t.Run("reserved-for-group", func(t *testing.T) {
		member := scheduled(withStatus(groupMember("m"), "group-gpu-1"))
		f := newFixture(t, workloadFeatures(), podGroupWithTemplate(), member, template(), allocated(groupClaim("group-gpu-1")))
		f.mustSync("pod:ns/m")
		want := []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: groupName, UID: "group-uid"}}
		if got := f.claim("group-gpu-1").Status.ReservedFor; !reflect.DeepEqual(got, want) {
			t.Errorf("reservedFor %+v, want %+v", got, want)
		}
	})

	t.Run("group-gone-released", func(t *testing.T) {
		claim := allocated(groupClaim("group-gpu-1"))
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: groupName, UID: "group-uid"}}
		f := newFixture(t, workloadFeatures(), claim)
		f.mustSync("claim:ns/group-gpu-1")
		if got := f.claim("group-gpu-1"); len(got.Status.ReservedFor) != 0 || got.Status.Allocation != nil {
			t.Errorf("claim status %+v", got.Status)
		}

		// Without the feature the entry is left alone.
		f = newFixture(t, Features{AdminAccess: true, PrioritizedList: true, GenericWorkload: true}, claim)
		f.mustSync("claim:ns/group-gpu-1")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("writes %v", w)
		}
	})
}

func TestPodGroupFeaturesOff(t *testing.T) {
	var final nonRetryableError

	f := newFixture(t, allFeatures(), groupMember("m"), template())
	err := f.sync("pod:ns/m")
	if !errors.As(err, &final) || !strings.Contains(err.Error(), "GenericWorkload feature is disabled") {
		t.Errorf("without GenericWorkload: %v", err)
	}

	generic := allFeatures()
	generic.GenericWorkload = true
	f = newFixture(t, generic, podGroupWithTemplate(), groupMember("m"), template())
	err = f.sync("pod:ns/m")
	// Wrapped with %v on the way up, as upstream does: retried after all.
	if err == nil || !strings.Contains(err.Error(), "claim gpu is a PodGroup claim but the DRAWorkloadResourceClaims feature is disabled") {
		t.Errorf("without DRAWorkloadResourceClaims: %v", err)
	}

	// A member whose claim is its own still gets one.
	own := &schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: groupName, UID: "group-uid"}}
	f = newFixture(t, generic, own, groupMember("m"), template())
	f.mustSync("pod:ns/m")
	if n := len(f.claims()); n != 1 {
		t.Errorf("%d claims, want the pod's own", n)
	}

	if _, err := NewController(f.logger(), f.client, f.factory.Core().V1().Pods(), f.factory.Scheduling().V1beta1().PodGroups(),
		f.factory.Resource().V1().ResourceClaims(), f.factory.Resource().V1().ResourceClaimTemplates(),
		Features{WorkloadResourceClaims: true}); err == nil {
		t.Error("DRAWorkloadResourceClaims without GenericWorkload must be refused")
	}
}
