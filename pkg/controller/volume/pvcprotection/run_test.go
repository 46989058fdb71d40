package pvcprotection

import (
	"context"
	"fmt"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
)

func TestNewController(t *testing.T) {
	recordedQueues := testutil.RecordQueueNames()
	logger, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods()
	if _, err := NewController(logger, factory.Core().V1().PersistentVolumeClaims(), podInformer, client, Features{UnusedSinceTime: true}); err != nil {
		t.Fatal(err)
	}
	if !recordedQueues.Has("pvcprotection") {
		t.Errorf("no workqueue named pvcprotection (have %v)", recordedQueues.Names())
	}
	if _, ok := podInformer.Informer().GetIndexer().GetIndexers()[ephemeral.PodPVCIndex]; !ok {
		t.Errorf("pod informer lacks the %s index", ephemeral.PodPVCIndex)
	}
	// The ephemeral volume controller shares the pod informer and index.
	if _, err := ephemeral.NewController(ctx, client, podInformer, factory.Core().V1().PersistentVolumeClaims()); err != nil {
		t.Fatalf("second controller on the same pod informer: %v", err)
	}
}

// Features.UnusedSinceTime decides whether a bound PVC that no pod uses
// gets the Unused condition.
func TestUnusedTrackingFollowsFeatures(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("UnusedSinceTime=%v", on), func(t *testing.T) {
			pvc := bound(protected(newPVC(ns, "claim")))
			f := newFixture(t, on, []runtime.Object{pvc}, []runtime.Object{pvc})
			f.c.pvcAddedUpdated(f.logger, pvc)
			f.drain()
			got, err := f.client.CoreV1().PersistentVolumeClaims(ns).Get(f.ctx, "claim", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if has := findCondition(got.Status.Conditions, conditionTypeUnused) != nil; has != on {
				t.Errorf("Unused condition present = %v, want %v: %+v", has, on, got.Status.Conditions)
			}
		})
	}
}

func TestNamespaceBatches(t *testing.T) {
	b := newNamespaceBatches()
	b.add("a", claimRef{key: "a/1", name: "1"})
	b.add("b", claimRef{key: "b/1", name: "1"})
	b.add("a", claimRef{key: "a/2", name: "2"})
	if b.len() != 2 {
		t.Fatalf("%d namespaces waiting, want 2", b.len())
	}
	ns, claims, ok := b.next()
	if !ok || ns != "a" || len(claims) != 2 || claims[0].name != "1" || claims[1].name != "2" {
		t.Fatalf("first batch %q %v %v", ns, claims, ok)
	}
	// A claim arriving once a batch is taken starts a new one.
	b.add("a", claimRef{key: "a/3", name: "3"})
	ns, claims, _ = b.next()
	if ns != "b" || len(claims) != 1 {
		t.Fatalf("second batch %q %v", ns, claims)
	}
	ns, claims, _ = b.next()
	if ns != "a" || len(claims) != 1 || claims[0].name != "3" {
		t.Fatalf("third batch %q %v", ns, claims)
	}
	b.shutDown()
	if _, _, ok := b.next(); ok {
		t.Fatal("next after shutdown returned a batch")
	}
}

// Run with real informers: a PVC lacking the finalizer gets it, an unused
// PVC being deleted loses it, and Run returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	plain := newPVC(ns, "plain")
	gone := deleting(protected(newPVC(ns, "gone")))
	client := fake.NewClientset(plain, gone)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(klog.FromContext(ctx), factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().Pods(), client, Features{UnusedSinceTime: true})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	waitFor(t, "finalizers to be synced", func() bool {
		p, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "plain", metav1.GetOptions{})
		if err != nil || !slices.Contains(p.Finalizers, Finalizer) {
			return false
		}
		g, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "gone", metav1.GetOptions{})
		return err == nil && !slices.Contains(g.Finalizers, Finalizer)
	})
	cancel()
	<-done
	factory.Shutdown()
}
