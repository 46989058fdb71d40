package pvcprotection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	clocktesting "k8s.io/utils/clock/testing"
)

const (
	ns    = "default"
	ns2   = "other"
	node1 = "node1"
)

var testNow = time.Unix(123, 0)

// Builders: each takes the object and returns it changed, so they nest.

func newPVC(namespace, name string) *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func protected(pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc.Finalizers = append(pvc.Finalizers, Finalizer)
	return pvc
}

func deleting(pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc.DeletionTimestamp = &metav1.Time{Time: testNow}
	return pvc
}

func bound(pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc.Status.Phase = v1.ClaimBound
	return pvc
}

func withUnused(status v1.ConditionStatus, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc.Status.Conditions = append(pvc.Status.Conditions, v1.PersistentVolumeClaimCondition{
		Type: v1.PersistentVolumeClaimUnused, Status: status, LastTransitionTime: metav1.Unix(100, 0),
	})
	return pvc
}

func ownedBy(pod *v1.Pod, pvc *v1.PersistentVolumeClaim) *v1.PersistentVolumeClaim {
	pvc.OwnerReferences = append(pvc.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
	})
	return pvc
}

// newPod is scheduled and Pending.
func newPod(namespace, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{NodeName: node1},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
}

func usingClaim(claim string, pod *v1.Pod) *v1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{
		Name:         "vol-" + claim,
		VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}},
	})
	return pod
}

func withEphemeral(volume string, pod *v1.Pod) *v1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{
		Name:         volume,
		VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{}}},
	})
	return pod
}

func withEmptyDir(pod *v1.Pod) *v1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{
		Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}},
	})
	return pod
}

func inPhase(phase v1.PodPhase, pod *v1.Pod) *v1.Pod {
	pod.Status.Phase = phase
	return pod
}

func unscheduled(pod *v1.Pod) *v1.Pod {
	pod.Spec.NodeName = ""
	return pod
}

func withUID(uid string, pod *v1.Pod) *v1.Pod {
	pod.UID = types.UID(uid)
	return pod
}

// podDeleting marks the pod deleted with the given grace period.
func podDeleting(grace int64, pod *v1.Pod) *v1.Pod {
	pod.DeletionTimestamp = &metav1.Time{Time: testNow}
	pod.DeletionGracePeriodSeconds = ptr.To(grace)
	return pod
}

func withContainer(state v1.ContainerState, pod *v1.Pod) *v1.Pod {
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: "c", State: state})
	return pod
}

// fixture is a controller on a fake client whose informer stores the test
// fills by hand, with a queue that retries without delay.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	logger   klog.Logger
	client   *fake.Clientset
	c        *Controller
	pvcStore cache.Store
	podStore cache.Store
}

// newFixture puts apiObjs in the fake apiserver and cacheObjs (usually the
// same) in the informers.
func newFixture(t *testing.T, trackUnused bool, apiObjs, cacheObjs []runtime.Object) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(apiObjs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcInformer := factory.Core().V1().PersistentVolumeClaims()
	podInformer := factory.Core().V1().Pods()
	c, err := NewController(logger, pvcInformer, podInformer, client, Features{UnusedSinceTime: trackUnused})
	if err != nil {
		t.Fatal(err)
	}
	c.clock = clocktesting.NewFakePassiveClock(testNow)
	c.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
	t.Cleanup(c.queue.ShutDown)
	t.Cleanup(c.batches.shutDown)
	f := &fixture{t: t, ctx: ctx, logger: logger, client: client, c: c,
		pvcStore: pvcInformer.Informer().GetStore(), podStore: podInformer.Informer().GetStore()}
	for _, obj := range cacheObjs {
		var err error
		switch obj.(type) {
		case *v1.PersistentVolumeClaim:
			err = f.pvcStore.Add(obj)
		case *v1.Pod:
			err = f.podStore.Add(obj)
		default:
			err = fmt.Errorf("unexpected object %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// failN makes the first n calls of verb on resource fail.
func (f *fixture) failN(verb, resource string, n int) {
	calls := 0
	f.client.PrependReactor(verb, resource, func(action clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls > n {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(action.GetResource().GroupResource(), "x", errors.New("injected"))
	})
}

// drain runs both stages until no key is left: all queued keys go into
// batches first, then every batch is processed, so PVCs queued together
// share a batch as they would in a busy controller.
func (f *fixture) drain() {
	f.t.Helper()
	for rounds := 0; f.c.queue.Len() > 0 || f.c.batches.len() > 0; rounds++ {
		if rounds > 50 {
			f.t.Fatal("queue does not drain")
		}
		for n := f.c.queue.Len(); n > 0; n-- {
			f.c.batchNextKey()
		}
		for f.c.batches.len() > 0 {
			f.c.processNextNamespace(f.ctx)
		}
	}
}

// actions describes the client calls, one line each: the verb, what, and
// what an update wrote.
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a := a.(type) {
		case clienttesting.ListAction:
			out = append(out, fmt.Sprintf("list %s %s", a.GetResource().Resource, a.GetNamespace()))
		case clienttesting.UpdateAction:
			pvc := a.GetObject().(*v1.PersistentVolumeClaim)
			if a.GetSubresource() == "status" {
				out = append(out, fmt.Sprintf("status %s/%s %s", pvc.Namespace, pvc.Name, describeUnused(pvc)))
			} else {
				out = append(out, fmt.Sprintf("update %s/%s [%s]", pvc.Namespace, pvc.Name, strings.Join(pvc.Finalizers, ",")))
			}
		default:
			out = append(out, fmt.Sprintf("%s %s", a.GetVerb(), a.GetResource().Resource))
		}
	}
	return out
}

func describeUnused(pvc *v1.PersistentVolumeClaim) string {
	var parts []string
	for _, c := range pvc.Status.Conditions {
		if c.Type == v1.PersistentVolumeClaimUnused {
			parts = append(parts, fmt.Sprintf("Unused=%s/%s/%q@%d", c.Status, c.Reason, c.Message, c.LastTransitionTime.Unix()))
		}
	}
	return strings.Join(parts, ";")
}

func (f *fixture) expect(want ...string) {
	f.t.Helper()
	got := f.actions()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Errorf("actions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
