package statefulset

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// runGarbageCollector runs the garbage collector until the test ends.
func runGarbageCollector(t *testing.T) {
	t.Helper()
	_, stop := framework.Shared(t).StartGarbageCollector(t, 30*time.Second)
	t.Cleanup(stop)
}

// With whenScaled=Delete a scaled-away pod's claim goes with it; with
// whenDeleted=Delete the remaining claims go with the set. Default
// (Retain) claims stay.
func TestRetentionPolicyDeletesClaims(t *testing.T) {
	c, ns, ctx := startTest(t, "sts-retention-gc", true)
	runGarbageCollector(t)

	sts := newSTS("web", 2)
	sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
	}
	create(t, ctx, c, ns, sts)
	kept := newSTS("kept", 1)
	create(t, ctx, c, ns, kept)
	waitStatus(t, c, ns, "web", "2 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 2 })
	waitStatus(t, c, ns, "kept", "1 ready", func(s *appsv1.StatefulSet) bool { return s.Status.ReadyReplicas == 1 })

	// Deleted means marked for deletion: the pvc-protection finalizer
	// keeps the object until its controller (not running here) lets go.
	claimGone := func(name string) {
		t.Helper()
		framework.Eventually(t, waitTimeout, "claim "+name+" to be deleted", func(ctx context.Context) (bool, error) {
			claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && claim.DeletionTimestamp != nil, err
		})
	}

	updateSTS(t, ctx, c, ns, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To[int32](1) })
	claimGone("www-web-1")
	if claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-web-0", metav1.GetOptions{}); err != nil || claim.DeletionTimestamp != nil {
		t.Fatalf("the wanted pod's claim is gone: %v", err)
	}

	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	claimGone("www-web-0")

	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitTimeout, "kept's pod to be collected", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "kept-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-kept-0", metav1.GetOptions{}); err != nil || claim.DeletionTimestamp != nil {
		t.Errorf("a Retain claim was deleted: %v", err)
	}
}
