package pvprotection

import (
	"context"
	"errors"
	"fmt"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

func newPV(name string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func protected(pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.Finalizers = append(pv.Finalizers, Finalizer)
	return pv
}

func deleting(pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.DeletionTimestamp = &metav1.Time{Time: time.Unix(123, 0)}
	return pv
}

func inPhase(phase v1.PersistentVolumePhase, pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.Status.Phase = phase
	return pv
}

func withClaimRef(pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "ns", Name: "claim"}
	return pv
}

func withFinalizer(f string, pv *v1.PersistentVolume) *v1.PersistentVolume {
	pv.Finalizers = append(pv.Finalizers, f)
	return pv
}

func TestSync(t *testing.T) {
	tests := []struct {
		name    string
		pv      *v1.PersistentVolume
		failN   int
		want    []string
		queued  bool
		noCache bool
	}{
		{name: "PV without finalizer gets it", pv: newPV("pv"), queued: true,
			want: []string{"update pv [kubernetes.io/pv-protection]"}},
		{name: "other finalizers are kept when adding", pv: withFinalizer("x/y", newPV("pv")), queued: true,
			want: []string{"update pv [x/y,kubernetes.io/pv-protection]"}},
		{name: "PV with finalizer is left alone", pv: protected(newPV("pv"))},
		{name: "failed add is retried", pv: newPV("pv"), queued: true, failN: 2,
			want: []string{"update pv [kubernetes.io/pv-protection]", "update pv [kubernetes.io/pv-protection]", "update pv [kubernetes.io/pv-protection]"}},
		{name: "deleted bound PV keeps the finalizer", pv: deleting(inPhase(v1.VolumeBound, withClaimRef(protected(newPV("pv"))))), queued: true},
		{name: "deleted available PV loses it", pv: deleting(inPhase(v1.VolumeAvailable, protected(newPV("pv")))), queued: true,
			want: []string{"update pv []"}},
		{name: "deleted released PV loses it though it still names a claim", pv: deleting(inPhase(v1.VolumeReleased, withClaimRef(protected(newPV("pv"))))), queued: true,
			want: []string{"update pv []"}},
		{name: "deleted PV loses only our finalizer", pv: deleting(withFinalizer("x/y", protected(newPV("pv")))), queued: true,
			want: []string{"update pv [x/y]"}},
		{name: "failed removal is retried", pv: deleting(protected(newPV("pv"))), queued: true, failN: 1,
			want: []string{"update pv []", "update pv []"}},
		{name: "deleted PV without our finalizer is not queued", pv: deleting(withFinalizer("x/y", newPV("pv")))},
		{name: "PV gone from the cache is skipped", pv: newPV("pv"), queued: true, noCache: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset(tc.pv)
			factory := informers.NewSharedInformerFactory(client, 0)
			pvInformer := factory.Core().V1().PersistentVolumes()
			c := NewController(logger, pvInformer, client)
			// Retry without delay so the test needs no clock.
			c.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
			c.loop.Queue = c.queue
			defer c.queue.ShutDown()
			if !tc.noCache {
				if err := pvInformer.Informer().GetStore().Add(tc.pv); err != nil {
					t.Fatal(err)
				}
			}
			calls := 0
			client.PrependReactor("update", "persistentvolumes", func(action clienttesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls <= tc.failN {
					return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), "pv", errors.New("injected"))
				}
				return false, nil, nil
			})

			c.pvAddedUpdated(logger, tc.pv)
			if got := c.queue.Len() == 1; got != tc.queued {
				t.Fatalf("queued %v, want %v", got, tc.queued)
			}
			for i := 0; c.queue.Len() > 0; i++ {
				if i > 10 {
					t.Fatal("queue does not drain")
				}
				c.loop.ProcessNextWorkItem(ctx)
			}
			if got := describe(client.Actions()); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

func describe(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if u, ok := a.(clienttesting.UpdateAction); ok {
			pv := u.GetObject().(*v1.PersistentVolume)
			out = append(out, fmt.Sprintf("update %s [%s]", pv.Name, strings.Join(pv.Finalizers, ",")))
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

func TestQueueName(t *testing.T) {
	rec := testutil.RecordQueueNames()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	NewController(klog.Background(), factory.Core().V1().PersistentVolumes(), client)
	if !rec.Has("pvprotection") {
		t.Errorf("no workqueue named pvprotection (have %v)", rec.Names())
	}
}

// Run with real informers: the finalizer is added to a new PV and removed
// from an unbound PV being deleted; Run returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(newPV("new"), deleting(inPhase(v1.VolumeReleased, protected(newPV("old")))))
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(klog.FromContext(ctx), factory.Core().V1().PersistentVolumes(), client)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err1 := client.CoreV1().PersistentVolumes().Get(ctx, "new", metav1.GetOptions{})
		o, err2 := client.CoreV1().PersistentVolumes().Get(ctx, "old", metav1.GetOptions{})
		if err1 == nil && err2 == nil && slices.Contains(n.Finalizers, Finalizer) && !slices.Contains(o.Finalizers, Finalizer) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("finalizers not synced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	factory.Shutdown()
}
