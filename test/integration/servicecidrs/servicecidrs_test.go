// Package servicecidrs tests the service CIDR controller against a real
// apiserver, whose Service IP allocator creates the IPAddress objects that
// hold a ServiceCIDR's deletion.
package servicecidrs

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/servicecidrs"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// runController runs the controller in-process until the test ends.
func runController(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(c, 0)
	scc := servicecidrs.NewController(ctx, factory.Networking().V1().ServiceCIDRs(), factory.Networking().V1().IPAddresses(), c)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		scc.Run(ctx, 5)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
}

func createServiceCIDR(t *testing.T, c clientset.Interface, name string, cidrs ...string) {
	t.Helper()
	_, err := c.NetworkingV1().ServiceCIDRs().Create(context.Background(), &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: cidrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.NetworkingV1().ServiceCIDRs().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitForReady waits for the finalizer and the condition the controller
// sets on a live ServiceCIDR.
func waitForReady(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, name+" to be Ready", func(ctx context.Context) (bool, error) {
		sc, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
		return slices.Contains(sc.Finalizers, servicecidrs.ServiceCIDRProtectionFinalizer) &&
			cond != nil && cond.Status == metav1.ConditionTrue && cond.Message == "Kubernetes Service CIDR is ready", nil
	})
}

// createService creates a ClusterIP Service with the given address,
// retrying while the apiserver's allocator has not picked up a new
// ServiceCIDR yet.
func createService(t *testing.T, c clientset.Interface, ns, name, ip string) {
	t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{
			ClusterIP: ip,
			Ports:     []v1.ServicePort{{Port: 80}},
		},
	}
	framework.Eventually(t, 30*time.Second, "service "+name+" to be created", func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Logf("creating service %s: %v", name, err)
		}
		return err == nil, nil
	})
}

func TestServiceCIDRBecomesReady(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runController(t, c)
	createServiceCIDR(t, c, "ready", "10.100.0.0/24", "fd00:100::/112")
	waitForReady(t, c, "ready")
}

// A ServiceCIDR being deleted waits, Ready=False with reason Terminating,
// while a Service address allocated from it exists, and goes once the
// Service is deleted.
func TestDeletionWaitsForIPAddresses(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "servicecidr-delete")
	runController(t, c)
	createServiceCIDR(t, c, "blocked", "10.101.0.0/24")
	waitForReady(t, c, "blocked")
	createService(t, c, ns, "svc", "10.101.0.10")
	framework.Eventually(t, 30*time.Second, "the IPAddress", func(ctx context.Context) (bool, error) {
		_, err := c.NetworkingV1().IPAddresses().Get(ctx, "10.101.0.10", metav1.GetOptions{})
		return err == nil, nil
	})

	ctx := context.Background()
	if err := c.NetworkingV1().ServiceCIDRs().Delete(ctx, "blocked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "Ready=False Terminating", func(ctx context.Context) (bool, error) {
		sc, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "blocked", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == networkingv1.ServiceCIDRReasonTerminating &&
			cond.Message == "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR", nil
	})
	// Terminating is reported only while the finalizer is kept.
	sc, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "blocked", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ServiceCIDR went while its address exists: %v", err)
	}
	if !slices.Contains(sc.Finalizers, servicecidrs.ServiceCIDRProtectionFinalizer) {
		t.Fatalf("finalizer removed while an address exists: %v", sc.Finalizers)
	}

	if err := c.CoreV1().Services(ns).Delete(ctx, "svc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the ServiceCIDR to be gone", func(ctx context.Context) (bool, error) {
		_, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "blocked", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// A ServiceCIDR whose range another ServiceCIDR contains can go even with
// addresses in it: they stay covered.
func TestDeletionWithParent(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "servicecidr-parent")
	runController(t, c)
	createServiceCIDR(t, c, "child", "10.102.0.0/24")
	createServiceCIDR(t, c, "parent", "10.102.0.0/16")
	waitForReady(t, c, "child")
	waitForReady(t, c, "parent")
	createService(t, c, ns, "svc", "10.102.0.20")

	if err := c.NetworkingV1().ServiceCIDRs().Delete(context.Background(), "child", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the child ServiceCIDR to be gone", func(ctx context.Context) (bool, error) {
		sc, err := c.NetworkingV1().ServiceCIDRs().Get(ctx, "child", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if cond := apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady); cond != nil && cond.Reason == networkingv1.ServiceCIDRReasonTerminating {
			return false, fmt.Errorf("child reported Terminating though its parent covers it")
		}
		return false, nil
	})
}
