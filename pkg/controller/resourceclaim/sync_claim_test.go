package resourceclaim

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReleaseDonePod(t *testing.T) {
	pod := scheduled(podWithTemplate("web"))
	claim := reservedFor(allocated(generatedClaim("web-gpu-1", pod)), pod)

	for _, phase := range []v1.PodPhase{v1.PodSucceeded, v1.PodFailed} {
		t.Run(string(phase), func(t *testing.T) {
			f := newFixture(t, allFeatures(), withPhase(withStatus(pod, claim.Name), phase), claim)
			f.mustSync("claim:ns/web-gpu-1")
			// Reservation dropped and deallocated, finalizer lifted, then
			// the generated claim of the finished pod deleted.
			want := []string{"update resourceclaims/status", "update resourceclaims", "delete resourceclaims"}
			if got := f.writes(); !reflect.DeepEqual(got, want) {
				t.Fatalf("writes %v, want %v", got, want)
			}
			for _, a := range f.client.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					c := a.(interface{ GetObject() runtimeObject }).GetObject().(*resourceapi.ResourceClaim)
					if len(c.Status.ReservedFor) != 0 || c.Status.Allocation != nil {
						t.Errorf("status update %+v, want no reservation and no allocation", c.Status)
					}
				}
			}
			if _, err := f.client.ResourceV1().ResourceClaims(ns).Get(f.ctx, claim.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("claim still there: %v", err)
			}
		})
	}
}

func TestReservedForCleanup(t *testing.T) {
	running := scheduled(podWithClaimName("running", "shared"))
	done := withPhase(scheduled(podWithClaimName("done", "shared")), v1.PodSucceeded)
	gone := scheduled(podWithClaimName("gone", "shared"))
	replaced := scheduled(podWithClaimName("replaced", "shared"))
	newInstance := replaced.DeepCopy()
	newInstance.UID = "new-uid"
	unscheduledDeleted := podWithClaimName("deleted", "shared")
	deleting(unscheduledDeleted)

	t.Run("keeps-running-drops-others", func(t *testing.T) {
		claim := reservedFor(allocated(userClaim("shared")), running, done, gone, replaced, unscheduledDeleted)
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "things", Name: "t", UID: "t-uid"})
		f := newFixture(t, allFeatures(), running, done, newInstance, unscheduledDeleted, claim)
		f.mustSync("claim:ns/shared")
		got := f.claim("shared")
		want := []resourceapi.ResourceClaimConsumerReference{
			{Resource: "pods", Name: "running", UID: running.UID},
			{APIGroup: "example.com", Resource: "things", Name: "t", UID: "t-uid"},
		}
		if !reflect.DeepEqual(got.Status.ReservedFor, want) {
			t.Errorf("reservedFor %+v, want %+v", got.Status.ReservedFor, want)
		}
		if got.Status.Allocation == nil || len(got.Finalizers) != 1 {
			t.Errorf("claim still in use must stay allocated and protected: %+v", got)
		}
	})

	t.Run("pod-not-in-informer-but-in-apiserver-stays", func(t *testing.T) {
		claim := reservedFor(allocated(userClaim("shared")), running)
		f := newFixture(t, allFeatures(), claim)
		if _, err := f.client.CoreV1().Pods(ns).Create(f.ctx, running, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.client.ClearActions()
		f.mustSync("claim:ns/shared")
		if w := f.writes(); len(w) != 0 {
			t.Errorf("writes %v", w)
		}
	})

	t.Run("deleted-pod-remembered", func(t *testing.T) {
		claim := reservedFor(allocated(userClaim("shared")), running)
		f := newFixture(t, allFeatures(), running, claim)
		f.ec.enqueuePod(f.logger(), running, true)
		f.mustSync("claim:ns/shared")
		got := f.claim("shared")
		if len(got.Status.ReservedFor) != 0 || got.Status.Allocation != nil || len(got.Finalizers) != 0 {
			t.Errorf("claim %+v, want released, deallocated and unprotected", got)
		}
		// A claim the user created stays.
		if w := f.writes(); contains(w, "delete") {
			t.Errorf("writes %v", w)
		}
	})

	t.Run("no-finalizer-keeps-allocation", func(t *testing.T) {
		claim := reservedFor(allocated(userClaim("shared")), done)
		claim.Finalizers = nil
		f := newFixture(t, allFeatures(), done, claim)
		f.mustSync("claim:ns/shared")
		got := f.claim("shared")
		if len(got.Status.ReservedFor) != 0 || got.Status.Allocation == nil {
			t.Errorf("claim status %+v, want unreserved but still allocated", got.Status)
		}
	})
}

func TestDeletedClaimUnprotected(t *testing.T) {
	claim := allocated(userClaim("shared"))
	deleting(claim)
	f := newFixture(t, allFeatures(), claim)
	f.mustSync("claim:ns/shared")
	want := []string{"update resourceclaims/status", "update resourceclaims"}
	if got := f.writes(); !reflect.DeepEqual(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	got := f.claim("shared")
	if got.Status.Allocation != nil || len(got.Finalizers) != 0 {
		t.Errorf("claim %+v, want deallocated without finalizer", got)
	}

	// In use: nothing happens until the last user is gone.
	running := scheduled(podWithClaimName("running", "shared"))
	inUse := reservedFor(claim, running)
	f = newFixture(t, allFeatures(), running, inUse)
	f.mustSync("claim:ns/shared")
	if w := f.writes(); len(w) != 0 {
		t.Errorf("writes %v", w)
	}
}

func TestDeleteGeneratedClaimWhenPodDone(t *testing.T) {
	pod := podWithTemplate("web")
	claim := generatedClaim("web-gpu-1", pod)

	for name, tc := range map[string]struct {
		pod        *v1.Pod
		wantDelete bool
	}{
		"running":               {scheduled(withStatus(pod, claim.Name)), false},
		"succeeded":             {withPhase(withStatus(pod, claim.Name), v1.PodSucceeded), true},
		"failed":                {withPhase(withStatus(pod, claim.Name), v1.PodFailed), true},
		"deleted-not-scheduled": {deletedCopy(withStatus(pod, claim.Name)), true},
		"deleted-scheduled":     {deletedCopy(scheduled(withStatus(pod, claim.Name))), false},
		"replaced":              {replacedCopy(withStatus(pod, claim.Name)), true},
		"pod-not-known":         {nil, false},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []runtimeObject{claim}
			if tc.pod != nil {
				objs = append(objs, tc.pod)
			}
			f := newFixture(t, allFeatures(), objs...)
			f.mustSync("claim:ns/web-gpu-1")
			if got := contains(f.writes(), "delete resourceclaims"); got != tc.wantDelete {
				t.Errorf("deleted %v, want %v (writes %v)", got, tc.wantDelete, f.writes())
			}
		})
	}

	// The scheduler's claim for extended resources is also the pod's.
	ext := generatedClaim("web-extended-resources-1", pod)
	ext.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	done := withPhase(pod, v1.PodSucceeded)
	done.Spec.ResourceClaims = nil
	done.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: ext.Name}
	f := newFixture(t, allFeatures(), done, ext)
	f.ec.enqueuePod(f.logger(), done, false)
	for _, key := range f.queued() {
		f.mustSync(key)
	}
	if !contains(f.writes(), "delete resourceclaims") {
		t.Errorf("extended resource claim not deleted: %v", f.writes())
	}
}

func deletedCopy(pod *v1.Pod) *v1.Pod {
	pod = pod.DeepCopy()
	deleting(pod)
	return pod
}

func replacedCopy(pod *v1.Pod) *v1.Pod {
	pod = pod.DeepCopy()
	pod.UID = "another-uid"
	return pod
}
