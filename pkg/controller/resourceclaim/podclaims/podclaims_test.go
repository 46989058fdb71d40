package podclaims

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func pod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p-uid"},
		Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{
			{Name: "direct", ResourceClaimName: ptr.To("shared")},
			{Name: "tmpl", ResourceClaimTemplateName: ptr.To("t")},
			{Name: "skipped", ResourceClaimTemplateName: ptr.To("t")},
		}},
		Status: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{
			{Name: "tmpl", ResourceClaimName: ptr.To("p-tmpl-x")},
			{Name: "skipped"},
		}},
	}
}

func TestName(t *testing.T) {
	p := pod()
	for i, want := range []struct {
		name       *string
		checkOwner bool
	}{{ptr.To("shared"), false}, {ptr.To("p-tmpl-x"), true}, {nil, true}} {
		name, check, err := Name(p, &p.Spec.ResourceClaims[i])
		if err != nil || !ptr.Equal(name, want.name) || check != want.checkOwner {
			t.Errorf("entry %d: %v %v %v", i, name, check, err)
		}
	}
	if _, _, err := Name(p, &v1.PodResourceClaim{Name: "new", ResourceClaimTemplateName: ptr.To("t")}); !errors.Is(err, ErrNotCreated) {
		t.Errorf("not created: %v", err)
	}
	if _, _, err := Name(p, &v1.PodResourceClaim{Name: "odd"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unsupported: %v", err)
	}
}

func TestAll(t *testing.T) {
	p := pod()
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "new", ResourceClaimTemplateName: ptr.To("t")})
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-ext"}
	var names []string
	for name := range All(p) {
		names = append(names, name)
	}
	if want := []string{"shared", "p-tmpl-x", "p-ext"}; !slices.Equal(names, want) {
		t.Errorf("All = %v, want %v", names, want)
	}
}

func TestOwnershipAndReservation(t *testing.T) {
	p := pod()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p-uid", Controller: ptr.To(true)}}}}
	if err := IsForPod(p, claim, false); err != nil {
		t.Error(err)
	}
	other := claim.DeepCopy()
	other.OwnerReferences[0].UID = "other"
	if err := IsForPod(p, other, true); err == nil {
		t.Error("claim of another pod accepted")
	}

	grouped := p.DeepCopy()
	grouped.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
	groupOwned := claim.DeepCopy()
	groupOwned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1", Kind: "PodGroup", Name: "g", UID: "g-uid", Controller: ptr.To(true)}}
	if err := IsForPod(grouped, groupOwned, true); err != nil {
		t.Errorf("group claim with feature: %v", err)
	}
	if err := IsForPod(grouped, groupOwned, false); err == nil {
		t.Error("group claim accepted without feature")
	}

	groupOwned.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "g", UID: "g-uid"}}
	if !IsReservedForPod(grouped, groupOwned, true) || IsReservedForPod(grouped, groupOwned, false) {
		t.Error("reservation through the PodGroup must count only with the feature")
	}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "p-uid"}}
	if !IsReservedForPod(p, claim, false) {
		t.Error("pod reservation not seen")
	}
}

func TestBindTo(t *testing.T) {
	p := pod()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("g")}
	group := &schedulingapi.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g-uid"},
		Spec:       schedulingapi.PodGroupSpec{ResourceClaims: []schedulingapi.PodGroupResourceClaim{{Name: "tmpl", ResourceClaimTemplateName: ptr.To("t")}}},
	}
	got, err := BindTo(p, group, &p.Spec.ResourceClaims[1])
	if err != nil || !IsPodGroupConsumer(got) || got.UID != "g-uid" {
		t.Errorf("shared entry: %+v %v", got, err)
	}
	got, err = BindTo(p, group, &p.Spec.ResourceClaims[0])
	if err != nil || !IsPodConsumer(got) || got.UID != "p-uid" {
		t.Errorf("own entry: %+v %v", got, err)
	}
	got, err = BindTo(p, nil, &p.Spec.ResourceClaims[1])
	if err != nil || !IsPodConsumer(got) {
		t.Errorf("without group: %+v %v", got, err)
	}
	group.Name = "other"
	if _, err := BindTo(p, group, &p.Spec.ResourceClaims[1]); err == nil {
		t.Error("foreign PodGroup accepted")
	}
}

func TestStatusEqual(t *testing.T) {
	a := pod().Status.ResourceClaimStatuses
	b := pod().Status.ResourceClaimStatuses
	if !StatusEqual(a, b) {
		t.Error("equal lists differ")
	}
	b[0].ResourceClaimName = ptr.To("changed")
	if StatusEqual(a, b) {
		t.Error("changed name not seen")
	}
	x := &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "x"}
	if !ExtendedStatusEqual(nil, nil) || ExtendedStatusEqual(x, nil) || !ExtendedStatusEqual(x, x.DeepCopy()) {
		t.Error("ExtendedStatusEqual")
	}
}
