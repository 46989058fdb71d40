package replicaset

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

// TestRunConverges drives the controller through real (fake-backed)
// informers: scale up, then scale down.
func TestRunConverges(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.CreateAction).GetObject().(*v1.Pod)
		mu.Lock()
		n++
		p.Name = p.GenerateName + strconv.Itoa(n)
		mu.Unlock()
		return false, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	rsc := NewReplicaSetController(ctx, factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client, BurstReplicas)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { rsc.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	rs := newRS("web", 3)
	if _, err := client.AppsV1().ReplicaSets("ns").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods := func(want int) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			live := 0
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					live++
				}
			}
			if live != want {
				return false, nil
			}
			got, err := client.AppsV1().ReplicaSets("ns").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && got.Status.Replicas == int32(want), err
		})
		if err != nil {
			t.Fatalf("never reached %d pods: %v", want, err)
		}
	}
	waitPods(3)

	cur, _ := client.AppsV1().ReplicaSets("ns").Get(ctx, "web", metav1.GetOptions{})
	cur.Spec.Replicas = func(i int32) *int32 { return &i }(1)
	cur.Generation = 2
	if _, err := client.AppsV1().ReplicaSets("ns").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(1)
}
