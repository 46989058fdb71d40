package volume

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/garbagecollector"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// runGC runs the garbage collector until the test ends, so that objects
// owned by a deleted pod are deleted too.
func runGC(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	typed := informers.NewSharedInformerFactory(c, 0)
	mdf := metadatainformer.NewSharedInformerFactory(md, 0)
	started := make(chan struct{})
	gc, err := garbagecollector.NewGarbageCollector(ctx, c, md, mapper,
		garbagecollector.DefaultIgnoredResources(), garbagecollector.NewInformerFactory(typed, mdf), started)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	typed.Start(ctx.Done())
	mdf.Start(ctx.Done())
	close(started)
	var wg sync.WaitGroup
	wg.Go(func() { gc.Run(ctx, 5, 30*time.Second) })
	wg.Go(func() { gc.Sync(ctx, dc, 30*time.Second) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		typed.Shutdown()
		mdf.Shutdown()
	})
	framework.Eventually(t, waitTimeout, "garbage collector to sync", func(context.Context) (bool, error) {
		return gc.IsSynced(klog.Background()), nil
	})
}
