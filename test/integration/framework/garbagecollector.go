package framework

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
)

// StartGarbageCollector runs a garbage collector against the control plane,
// wired as the controller manager wires it (typed informers where they
// already run, metadata otherwise, a deferred discovery RESTMapper,
// rediscovery every syncPeriod). It returns once the collector is synced,
// with a stop function that waits until it has stopped; the caller decides
// the lifetime (t.Cleanup, or longer for a collector shared by a package).
func (cp *ControlPlane) StartGarbageCollector(t testing.TB, syncPeriod time.Duration) (*garbagecollector.GarbageCollector, func()) {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = "generic-garbage-collector"
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
	// The mapper gets its own client: resyncs must not invalidate its cache.
	mapperDC, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(mapperDC))
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
	// Sync discovers the resources and starts their monitors.
	wg.Go(func() { gc.Sync(ctx, dc, syncPeriod) })
	stop := func() {
		cancel()
		wg.Wait()
		typed.Shutdown()
		mdf.Shutdown()
	}
	Eventually(t, time.Minute, "garbage collector to sync", func(context.Context) (bool, error) {
		return gc.IsSynced(klog.Background()), nil
	})
	return gc, stop
}
