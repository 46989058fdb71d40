package resourceclaim

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
)

func TestCreateClaimFromTemplate(t *testing.T) {
	pod := podWithTemplate("web")
	f := newFixture(t, allFeatures(), pod, template())
	before, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "false", "", "Pod"))

	f.mustSync("pod:ns/web")

	claims := f.claims()
	if len(claims) != 1 {
		t.Fatalf("want one claim, got %d", len(claims))
	}
	claim := claims[0]
	if claim.GenerateName != "web-gpu-" || !strings.HasPrefix(claim.Name, "web-gpu-") {
		t.Errorf("generateName %q name %q, want web-gpu-", claim.GenerateName, claim.Name)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: pod.UID, Controller: ptr.To(true)}}
	if !reflect.DeepEqual(claim.OwnerReferences, wantOwner) {
		t.Errorf("owner references %+v, want %+v", claim.OwnerReferences, wantOwner)
	}
	wantAnnotations := map[string]string{"note": "from-template", resourceapi.PodResourceClaimAnnotation: podClaimName}
	if !reflect.DeepEqual(claim.Annotations, wantAnnotations) {
		t.Errorf("annotations %v, want %v", claim.Annotations, wantAnnotations)
	}
	if !reflect.DeepEqual(claim.Labels, map[string]string{"app": "train"}) {
		t.Errorf("labels %v", claim.Labels)
	}
	if !reflect.DeepEqual(claim.Spec, claimSpec()) {
		t.Errorf("spec %+v", claim.Spec)
	}
	// The template is shared with the informer and must stay as it is.
	if tmpl, _ := f.ec.templateLister.ResourceClaimTemplates(ns).Get(templateName); !reflect.DeepEqual(tmpl, template()) {
		t.Errorf("template modified: %+v", tmpl)
	}

	got := f.pod("web").Status.ResourceClaimStatuses
	want := []v1.PodResourceClaimStatus{{Name: podClaimName, ResourceClaimName: ptr.To(claim.Name)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pod status %+v, want %+v", got, want)
	}
	if got := f.writes(); !reflect.DeepEqual(got, []string{"create resourceclaims", "patch pods/status"}) {
		t.Errorf("writes %v", got)
	}
	for _, a := range f.client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetPatchType() != "application/apply-patch+yaml" {
			t.Errorf("pod status written with %s, want server-side apply", p.GetPatchType())
		}
	}
	after, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "false", "", "Pod"))
	if after != before+1 {
		t.Errorf("resourceclaim_creates_total{success} went from %v to %v", before, after)
	}
}

func TestStatusKeepsOtherEntriesSorted(t *testing.T) {
	pod := podWithTemplate("web")
	pod.Spec.ResourceClaims = append([]v1.PodResourceClaim{{Name: "zz", ResourceClaimName: ptr.To("shared")}},
		v1.PodResourceClaim{Name: "aa", ResourceClaimTemplateName: ptr.To(templateName)},
		pod.Spec.ResourceClaims[0])
	f := newFixture(t, allFeatures(), pod, template(), userClaim("shared"))
	f.mustSync("pod:ns/web")
	got := f.pod("web").Status.ResourceClaimStatuses
	if len(got) != 2 || got[0].Name != "aa" || got[1].Name != podClaimName {
		t.Fatalf("statuses %+v, want aa and gpu in that order", got)
	}
	if len(f.claims()) != 3 {
		t.Errorf("want two generated claims next to the shared one, got %d", len(f.claims()))
	}
}

func TestNoSecondClaim(t *testing.T) {
	pod := podWithTemplate("web")
	existing := generatedClaim("web-gpu-abcde", pod)

	t.Run("status-names-existing-claim", func(t *testing.T) {
		f := newFixture(t, allFeatures(), withStatus(pod, existing.Name), template(), existing)
		f.mustSync("pod:ns/web")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("unexpected writes %v", w)
		}
	})

	t.Run("claim-created-but-status-lost", func(t *testing.T) {
		// The pod status update failed after the claim was made: the
		// claim is found by owner and pod claim name, not made again.
		f := newFixture(t, allFeatures(), pod, template(), existing)
		f.mustSync("pod:ns/web")
		if w := f.writes(); !reflect.DeepEqual(w, []string{"patch pods/status"}) {
			t.Errorf("writes %v, want only the status", w)
		}
		if got := f.pod("web").Status.ResourceClaimStatuses; len(got) != 1 || *got[0].ResourceClaimName != existing.Name {
			t.Errorf("status %+v", got)
		}
	})

	t.Run("claim-only-in-mutation-cache", func(t *testing.T) {
		// The first sync created the claim but the status update failed;
		// the informer has not seen the claim when the retry comes.
		f := newFixture(t, allFeatures(), pod, template())
		f.client.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtimeObject, error) {
			return true, nil, errors.New("injected")
		})
		if err := f.sync("pod:ns/web"); err == nil {
			t.Fatal("want status update error")
		}
		f.client.ReactionChain = f.client.ReactionChain[1:]
		f.mustSync("pod:ns/web")
		if n := len(f.claims()); n != 1 {
			t.Fatalf("want exactly one claim after retry, got %d", n)
		}
	})

	t.Run("claim-only-in-apiserver", func(t *testing.T) {
		// The status names a claim the informer does not have yet.
		f := newFixture(t, allFeatures(), withStatus(pod, existing.Name), template())
		if _, err := f.client.ResourceV1().ResourceClaims(ns).Create(f.ctx, existing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.client.ClearActions()
		f.mustSync("pod:ns/web")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("unexpected writes %v", w)
		}
	})
}

func TestRecreateClaim(t *testing.T) {
	pod := podWithTemplate("web")

	t.Run("deleted", func(t *testing.T) {
		f := newFixture(t, allFeatures(), withStatus(pod, "web-gpu-gone1"), template())
		f.mustSync("pod:ns/web")
		claims := f.claims()
		if len(claims) != 1 {
			t.Fatalf("want a new claim, got %d", len(claims))
		}
		if got := f.pod("web").Status.ResourceClaimStatuses; *got[0].ResourceClaimName != claims[0].Name {
			t.Errorf("status %+v does not name %s", got, claims[0].Name)
		}
	})

	// The claim this controller just created is deleted: the delete event
	// must drop it from the mutation cache so the next sync replaces it.
	t.Run("deleted-after-create", func(t *testing.T) {
		f := newFixture(t, allFeatures(), pod, template())
		f.mustSync("pod:ns/web")
		first := f.claims()
		if len(first) != 1 {
			t.Fatalf("want one claim, got %d", len(first))
		}
		if err := f.client.ResourceV1().ResourceClaims(ns).Delete(f.ctx, first[0].Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.ec.enqueueClaim(f.logger(), &first[0], nil)
		f.addToStore(f.pod("web"))
		f.mustSync("pod:ns/web")
		claims := f.claims()
		if len(claims) != 1 || claims[0].Name == first[0].Name {
			t.Fatalf("want a replacement for %s, got %+v", first[0].Name, claims)
		}
	})

	t.Run("wrong-owner", func(t *testing.T) {
		other := generatedClaim("web-gpu-other", podWithTemplate("other"))
		f := newFixture(t, allFeatures(), withStatus(pod, other.Name), template(), other)
		f.mustSync("pod:ns/web")
		if n := len(f.claims()); n != 2 {
			t.Fatalf("want a new claim next to the foreign one, got %d", n)
		}
	})
}

func TestCreateFailures(t *testing.T) {
	pod := podWithTemplate("web")

	t.Run("missing-template", func(t *testing.T) {
		f := newFixture(t, allFeatures(), pod)
		err := f.sync("pod:ns/web")
		if err == nil {
			t.Fatal("want error")
		}
		events := f.events()
		want := `Warning FailedResourceClaimCreation PodResourceClaim gpu: resource claim template "tmpl": resourceclaimtemplate.resource.k8s.io "tmpl" not found`
		if len(events) != 1 || events[0] != want {
			t.Errorf("events %q, want %q", events, want)
		}
	})

	t.Run("create-conflict-counts-failure", func(t *testing.T) {
		f := newFixture(t, allFeatures(), pod, template())
		f.client.PrependReactor("create", "resourceclaims", func(clienttesting.Action) (bool, runtimeObject, error) {
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "x")
		})
		before, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("failure", "false", "", "Pod"))
		if err := f.sync("pod:ns/web"); err == nil {
			t.Fatal("want error")
		}
		after, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("failure", "false", "", "Pod"))
		if after != before+1 {
			t.Errorf("failures went from %v to %v", before, after)
		}
	})

	t.Run("admin-access-disabled", func(t *testing.T) {
		tmpl := template()
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		f := newFixture(t, Features{PrioritizedList: true}, pod, tmpl)
		if err := f.sync("pod:ns/web"); err == nil || !strings.Contains(err.Error(), "admin access is requested, but the feature is disabled") {
			t.Fatalf("got %v", err)
		}
		if n := len(f.claims()); n != 0 {
			t.Errorf("created %d claims", n)
		}
	})

	t.Run("admin-access-enabled", func(t *testing.T) {
		tmpl := template()
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(true)
		f := newFixture(t, allFeatures(), pod, tmpl)
		before, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "true", "", "Pod"))
		f.mustSync("pod:ns/web")
		after, _ := testutil.GetCounterMetricValue(claimCreates.WithLabelValues("success", "true", "", "Pod"))
		if after != before+1 {
			t.Errorf("admin_access=true creates went from %v to %v", before, after)
		}
	})

	t.Run("prioritized-list-disabled", func(t *testing.T) {
		tmpl := template()
		tmpl.Spec.Spec.Devices.Requests[0] = resourceapi.DeviceRequest{Name: "req", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: testClassName}}}
		f := newFixture(t, Features{AdminAccess: true}, pod, tmpl)
		if err := f.sync("pod:ns/web"); err == nil || !strings.Contains(err.Error(), "template includes a prioritized list of subrequests, but the feature is disabled") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestClaimGenerateName(t *testing.T) {
	for _, tc := range []struct{ pod, claim, want string }{
		{"web", "gpu", "web-gpu-"},
		{strings.Repeat("p", 40), strings.Repeat("c", 20), strings.Repeat("p", 36) + "-" + strings.Repeat("c", 18)},
		{strings.Repeat("p", 63), "gpu", strings.Repeat("p", 52) + "-" + "gp"},
	} {
		if got := claimGenerateName(tc.pod, tc.claim); got != tc.want {
			t.Errorf("claimGenerateName(%d chars, %d chars) = %q, want %q", len(tc.pod), len(tc.claim), got, tc.want)
		}
	}
}

func TestNothingForDeletedOrUnneeded(t *testing.T) {
	pod := podWithTemplate("web")
	gone := pod.DeepCopy()
	deleting(gone)
	f := newFixture(t, allFeatures(), gone, template())
	f.mustSync("pod:ns/web")
	f.mustSync("pod:ns/missing")
	if n := len(f.claims()); n != 0 {
		t.Errorf("created %d claims", n)
	}

	notNeeded := podWithTemplate("skip")
	notNeeded.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: podClaimName}}
	f = newFixture(t, allFeatures(), notNeeded, template())
	f.mustSync("pod:ns/skip")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %v for a claim that is not needed", w)
	}
}

func TestReserveForScheduledPod(t *testing.T) {
	pod := scheduled(podWithClaimName("web", "shared"))
	other := podWithClaimName("other", "shared")
	claim := reservedFor(allocated(userClaim("shared")), other)
	f := newFixture(t, allFeatures(), pod, other, claim)
	f.mustSync("pod:ns/web")
	got := f.claim("shared").Status.ReservedFor
	want := []resourceapi.ResourceClaimConsumerReference{
		{Resource: "pods", Name: "other", UID: other.UID},
		{Resource: "pods", Name: "web", UID: pod.UID},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reservedFor %+v, want %+v", got, want)
	}

	// Not scheduled, not allocated or already reserved: nothing to write.
	for name, objs := range map[string][]runtimeObject{
		"unscheduled":   {podWithClaimName("web", "shared"), allocated(userClaim("shared"))},
		"unallocated":   {pod, userClaim("shared")},
		"reserved":      {pod, reservedFor(allocated(userClaim("shared")), pod)},
		"foreign-claim": {scheduled(withStatus(podWithTemplate("web"), "foreign")), allocated(generatedClaim("foreign", other))},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, allFeatures(), objs...)
			_ = f.sync("pod:ns/web")
			if w := f.writes(); len(w) != 0 {
				t.Errorf("writes %v", w)
			}
		})
	}
}
