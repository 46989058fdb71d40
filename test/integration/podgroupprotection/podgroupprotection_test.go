// Package podgroupprotection tests the podgroup-protection-controller
// against a kube-apiserver serving scheduling.k8s.io/v1beta1 PodGroups
// (GenericWorkload on), whose PodGroupProtection admission plugin adds the
// finalizer at creation.
package podgroupprotection

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/podgroupprotection"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.MainWithOptions(m, framework.Options{APIServerFlags: []string{
		"--feature-gates=GenericWorkload=true",
		"--runtime-config=scheduling.k8s.io/v1beta1=true",
	}})
}

func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	pc, err := podgroupprotection.NewController(klog.Background(),
		factory.Scheduling().V1beta1().PodGroups(), factory.Core().V1().Pods(), c)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	framework.RunController(t, ctx, cancel, factory, func(ctx context.Context) { pc.Run(ctx, 1) })
}

func createPodGroup(t *testing.T, c clientset.Interface, ns, name string) *schedulingv1beta1.PodGroup {
	t.Helper()
	pg, err := c.SchedulingV1beta1().PodGroups(ns).Create(context.Background(), &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if pg, err := c.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && len(pg.Finalizers) > 0 {
			pg.Finalizers = nil
			_, _ = c.SchedulingV1beta1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		}
	})
	return pg
}

func createPod(t *testing.T, c clientset.Interface, ns, name, group string) *v1.Pod {
	t.Helper()
	pod, err := c.CoreV1().Pods(ns).Create(context.Background(), &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			Containers:      []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			SchedulingGroup: &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func deleteAndWaitTerminating(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	if err := c.SchedulingV1beta1().PodGroups(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "PodGroup "+name+" to be terminating", func(ctx context.Context) (bool, error) {
		pg, err := c.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pg.DeletionTimestamp != nil, nil
	})
}

func waitGone(t *testing.T, c clientset.Interface, ns, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "PodGroup "+name+" to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// The admission plugin puts the finalizer on; an unused PodGroup goes
// once deleted.
func TestUnusedPodGroupGoes(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "pg-unused")
	runController(t, c)
	pg := createPodGroup(t, c, ns, "unused")
	if !slices.Contains(pg.Finalizers, podgroupprotection.Finalizer) {
		t.Fatalf("admission did not add %s: %v", podgroupprotection.Finalizer, pg.Finalizers)
	}
	deleteAndWaitTerminating(t, c, ns, "unused")
	waitGone(t, c, ns, "unused")
}

// A PodGroup with an active pod stays until the pod finishes.
func TestPodGroupKeptWhileUsed(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "pg-used")
	runController(t, c)
	createPodGroup(t, c, ns, "used")
	pod := createPod(t, c, ns, "member", "used")
	deleteAndWaitTerminating(t, c, ns, "used")

	// Barrier: one worker, events in order; once an unused group deleted
	// after it has gone, "used" has been synced.
	createPodGroup(t, c, ns, "barrier")
	deleteAndWaitTerminating(t, c, ns, "barrier")
	waitGone(t, c, ns, "barrier")
	pg, err := c.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), "used", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pg.Finalizers, podgroupprotection.Finalizer) {
		t.Fatal("finalizer removed while a running pod belongs to the group")
	}

	pod.Status.Phase = v1.PodSucceeded
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, ns, "used")
}
