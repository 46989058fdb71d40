package app

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestTrackedHandlersAreRemoved(t *testing.T) {
	client := fake.NewClientset()
	shared := informers.NewSharedInformerFactory(client, 0)
	reg := &handlerRegistry{}
	tracked := &trackingFactory{SharedInformerFactory: shared, reg: reg}

	var viaTracked, direct atomic.Int32
	if _, err := tracked.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { viaTracked.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	// Positive control: a handler added on the factory itself stays.
	if _, err := shared.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { direct.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	if reg.len() != 1 {
		t.Fatalf("registry holds %d handlers, want 1", reg.len())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); shared.Shutdown() }()
	shared.Start(ctx.Done())
	shared.WaitForCacheSync(ctx.Done())

	create := func(name string) {
		t.Helper()
		if _, err := client.CoreV1().Pods("ns").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCount := func(c *atomic.Int32, want int32) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return c.Load() == want, nil
		}); err != nil {
			t.Fatalf("count %d, want %d", c.Load(), want)
		}
	}
	create("a")
	waitCount(&viaTracked, 1)
	waitCount(&direct, 1)

	reg.removeAll()
	create("b")
	waitCount(&direct, 2)
	if got := viaTracked.Load(); got != 1 {
		t.Errorf("removed handler saw %d adds, want 1", got)
	}
}

func TestTrackedIndexersAreIdempotent(t *testing.T) {
	shared := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	tracked := &trackingFactory{SharedInformerFactory: shared, reg: &handlerRegistry{}}
	idx := cache.Indexers{"byName": func(obj interface{}) ([]string, error) { return nil, nil }}
	inf := tracked.Core().V1().Pods().Informer()
	for i := 0; i < 2; i++ {
		if err := inf.AddIndexers(idx); err != nil {
			t.Fatalf("adding the indexer a %d. time: %v", i+1, err)
		}
	}
	// Positive control: the informer itself refuses a second copy.
	if err := shared.Core().V1().Pods().Informer().AddIndexers(idx); err == nil {
		t.Fatal("the shared informer accepted a duplicate indexer; the test proves nothing")
	}
}

func TestControllerWeights(t *testing.T) {
	for name, w := range controllerWeights {
		if _, ok := NewControllerDescriptors()[name]; !ok {
			t.Errorf("weight for unknown controller %q", name)
		}
		if w < 1 {
			t.Errorf("%s weighs %d", name, w)
		}
	}
	if controllerWeight("garbage-collector-controller") <= controllerWeight("ttl-controller") {
		t.Error("the garbage collector should weigh more than the TTL controller")
	}
}
