package replication

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func newRC(name string, replicas int32) *v1.ReplicationController {
	return &v1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "rc-uid", Generation: 1},
		Spec: v1.ReplicationControllerSpec{
			Replicas: ptr.To(replicas),
			Selector: map[string]string{"app": name},
			Template: &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img"}}},
			},
		},
	}
}

// TestReplicationManager runs the manager against fake-backed informers:
// pods are created for the RC, owned by it, and its status (without
// terminatingReplicas) and ReplicaFailure condition follow.
func TestReplicationManager(t *testing.T) {
	client := fake.NewClientset()
	var n atomic.Int32
	var quota atomic.Bool
	quota.Store(true)
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if quota.Load() {
			return true, nil, apierrors.NewForbidden(v1.Resource("pods"), "", errors.New("exceeded quota: q"))
		}
		p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		p.Name = p.GenerateName + strconv.Itoa(int(n.Add(1)))
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	rm := NewController(ctx, factory.Core().V1().Pods(), factory.Core().V1().ReplicationControllers(), client, BurstReplicas, Features{PodDeletionCost: true})
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { rm.Run(ctx, 1); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	if _, err := client.CoreV1().ReplicationControllers("ns").Create(ctx, newRC("web", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll := func(cond func(*v1.ReplicationController) bool) {
		t.Helper()
		testutil.WaitUntil(t, "the RC's status", func(ctx context.Context) (bool, error) {
			rc, err := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && cond(rc), nil
		})
	}
	poll(func(rc *v1.ReplicationController) bool {
		return len(rc.Status.Conditions) == 1 && rc.Status.Conditions[0].Type == v1.ReplicationControllerReplicaFailure &&
			rc.Status.Conditions[0].Reason == "FailedCreate" && strings.Contains(rc.Status.Conditions[0].Message, "exceeded quota")
	})

	quota.Store(false)
	// Any update wakes the RC (the failed creations were given back).
	rc, _ := client.CoreV1().ReplicationControllers("ns").Get(ctx, "web", metav1.GetOptions{})
	rc.Labels = map[string]string{"touch": "1"}
	if _, err := client.CoreV1().ReplicationControllers("ns").Update(ctx, rc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(func(rc *v1.ReplicationController) bool {
		return rc.Status.Replicas == 2 && len(rc.Status.Conditions) == 0 && rc.Status.ObservedGeneration == 1
	})
	pods, _ := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 2 {
		t.Fatalf("pods %d", len(pods.Items))
	}
	for _, p := range pods.Items {
		ref := metav1.GetControllerOf(&p)
		if p.GenerateName != "web-" || ref == nil || ref.Kind != "ReplicationController" || ref.APIVersion != "v1" || ref.UID != "rc-uid" {
			t.Fatalf("pod %s: generateName %q ref %+v", p.Name, p.GenerateName, ref)
		}
	}
}

func TestRCOwnerView(t *testing.T) {
	rc := newRC("web", 3)
	rc.Spec.Replicas = nil
	rc.Spec.Template = nil
	rc.Spec.Selector = nil
	o := rcOwner(rc)
	if o.Replicas != 1 || o.Template == nil || o.Selector != nil {
		t.Fatalf("view %+v", o)
	}
}
