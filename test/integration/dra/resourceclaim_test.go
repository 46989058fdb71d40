package dra

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// A pod with a claim template gets exactly one claim, generated for it,
// and its name in the pod status.
func TestClaimFromTemplate(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "claim-template")
	runClaimController(t, c)
	createTemplate(t, c, ns)
	pod := createPod(t, c, ns, newPod("trainer", ""))

	var claimName string
	framework.Eventually(t, 30*time.Second, "claim name in pod status", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil {
			claimName = *p.Status.ResourceClaimStatuses[0].ResourceClaimName
		}
		return claimName != "", nil
	})

	// Give a second claim every chance to appear.
	holdsFor(t, 3*time.Second, "exactly one claim", func() bool {
		list, err := c.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 1 && list.Items[0].Name == claimName
	})

	claim := getClaim(t, c, ns, claimName)
	if !strings.HasPrefix(claim.Name, "trainer-gpu-") || claim.GenerateName != "trainer-gpu-" || len(claim.Name) != len("trainer-gpu-")+5 {
		t.Errorf("claim name %q (generateName %q), want trainer-gpu-xxxxx", claim.Name, claim.GenerateName)
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	if !reflect.DeepEqual(claim.OwnerReferences, wantOwner) {
		t.Errorf("owner references %+v, want %+v", claim.OwnerReferences, wantOwner)
	}
	if claim.Annotations[resourceapi.PodResourceClaimAnnotation] != "gpu" || claim.Annotations["note"] != "copied" {
		t.Errorf("annotations %v", claim.Annotations)
	}
	if claim.Labels["app"] != "train" {
		t.Errorf("labels %v", claim.Labels)
	}
	if r := claim.Spec.Devices.Requests; len(r) != 1 || r[0].Name != "gpu" || r[0].Exactly == nil || r[0].Exactly.DeviceClassName != className {
		t.Errorf("spec %+v", claim.Spec)
	}
	p := getPod(t, c, ns, pod.Name)
	want := []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(claimName)}}
	if !reflect.DeepEqual(p.Status.ResourceClaimStatuses, want) {
		t.Errorf("pod status %+v", p.Status.ResourceClaimStatuses)
	}
	var applied bool
	for _, m := range p.ManagedFields {
		applied = applied || m.Manager == "ResourceClaimController" && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "status"
	}
	if !applied {
		t.Errorf("pod status not applied by ResourceClaimController: %+v", p.ManagedFields)
	}
}

// A claim the pod status names but which is gone (deleted by accident) is
// made again under a new name.
func TestRecreateMissingClaim(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "claim-recreate")
	ctx := context.Background()
	createTemplate(t, c, ns)
	pod := createPod(t, c, ns, newPod("trainer", ""))
	pod.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("trainer-gpu-gone1")}}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	runClaimController(t, c)
	framework.Eventually(t, 30*time.Second, "claim made again", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := p.Status.ResourceClaimStatuses
		if len(s) != 1 || s[0].ResourceClaimName == nil || *s[0].ResourceClaimName == "trainer-gpu-gone1" {
			return false, nil
		}
		claim, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, *s[0].ResourceClaimName, metav1.GetOptions{})
		return err == nil && metav1.IsControlledBy(claim, p), nil
	})
}

// A missing template is reported on the pod; the claim comes once the
// template does.
func TestMissingTemplate(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "claim-missing-template")
	runClaimController(t, c)
	pod := createPod(t, c, ns, newPod("waiting", ""))

	framework.Eventually(t, 30*time.Second, "FailedResourceClaimCreation event", func(ctx context.Context) (bool, error) {
		events, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == pod.UID && e.Type == v1.EventTypeWarning && e.Reason == "FailedResourceClaimCreation" &&
				e.Source.Component == "resource_claim" &&
				e.Message == `PodResourceClaim gpu: resource claim template "gpu-template": resourceclaimtemplate.resource.k8s.io "gpu-template" not found` {
				return true, nil
			}
		}
		return false, nil
	})
	createTemplate(t, c, ns)
	framework.Eventually(t, 30*time.Second, "claim after the template appeared", func(ctx context.Context) (bool, error) {
		list, err := c.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, err
	})
}

// The generated claim of a pod goes once the pod has finished: released,
// deallocated, unprotected and deleted.
func TestClaimDeletedAfterPodCompletion(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "claim-completion")
	runClaimController(t, c)
	createTemplate(t, c, ns)
	spec := newPod("job", "")
	spec.Spec.NodeName = nodeName
	pod := createPod(t, c, ns, spec)

	var claimName string
	framework.Eventually(t, 30*time.Second, "claim", func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if s := p.Status.ResourceClaimStatuses; len(s) == 1 && s[0].ResourceClaimName != nil {
			claimName = *s[0].ResourceClaimName
		}
		return claimName != "", nil
	})
	allocate(t, c, ns, claimName, "driver-"+ns, "dev-0", nil, pod)

	pod, err := (framework.Kubelet{Client: c}).MarkSucceeded(context.Background(), getPod(t, c, ns, pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "claim deleted", func(ctx context.Context) (bool, error) {
		_, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		return notFound(err), nil
	})
	if p := getPod(t, c, ns, pod.Name); p.DeletionTimestamp != nil {
		t.Error("the finished pod itself must stay")
	}
}

// A user's claim loses reservations of pods that finished or are gone and
// is deallocated when the last one went; it stays. A scheduled pod gets
// the allocated claim reserved.
func TestReservedForCleanup(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	ns := framework.CreateNamespace(t, c, "claim-reserved")
	ctx := context.Background()
	if _, err := c.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec:       claimSpec(),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheduled := func(name string) *v1.Pod {
		p := newPod(name, "shared")
		p.Spec.NodeName = nodeName
		return createPod(t, c, ns, p)
	}
	finisher, leaver, newcomer := scheduled("finisher"), scheduled("leaver"), scheduled("newcomer")
	allocate(t, c, ns, "shared", "driver-"+ns, "dev-0", nil, finisher, leaver)
	runClaimController(t, c)

	reserved := func(ctx context.Context) ([]string, *resourceapi.ResourceClaim, error) {
		claim, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		var names []string
		for _, r := range claim.Status.ReservedFor {
			names = append(names, r.Name)
		}
		return names, claim, nil
	}
	framework.Eventually(t, 30*time.Second, "newcomer reserved", func(ctx context.Context) (bool, error) {
		names, _, err := reserved(ctx)
		return reflect.DeepEqual(names, []string{"finisher", "leaver", "newcomer"}), err
	})

	if _, err := (framework.Kubelet{Client: c}).MarkSucceeded(ctx, getPod(t, c, ns, finisher.Name)); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, leaver.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "finished and deleted pods released", func(ctx context.Context) (bool, error) {
		names, claim, err := reserved(ctx)
		return reflect.DeepEqual(names, []string{"newcomer"}) && claim.Status.Allocation != nil, err
	})

	if err := c.CoreV1().Pods(ns).Delete(ctx, newcomer.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "claim deallocated and unprotected", func(ctx context.Context) (bool, error) {
		_, claim, err := reserved(ctx)
		return err == nil && len(claim.Status.ReservedFor) == 0 && claim.Status.Allocation == nil && len(claim.Finalizers) == 0, err
	})
	holdsFor(t, 2*time.Second, "user claim stays", func() bool {
		_, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, "shared", metav1.GetOptions{})
		return err == nil
	})
}
