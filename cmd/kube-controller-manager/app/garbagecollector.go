package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/garbagecollector"
)

// gcSyncPeriod is how often the collector re-discovers resources, as upstream.
const gcSyncPeriod = 30 * time.Second

// gcController is the collector plus the debug handler serving its graph.
type gcController struct {
	Controller
	gc *garbagecollector.GarbageCollector
}

func (c *gcController) DebuggingHandler() http.Handler { return c.gc.DebuggingHandler() }

func newGarbageCollectorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg := cc.ComponentConfig.GarbageCollectorController
	if !cfg.EnableGarbageCollector {
		klog.FromContext(ctx).Info("Garbage collector disabled by --enable-garbage-collector=false")
		return nil, nil
	}
	client, err := cc.NewClient("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	// Its own discovery client: the REST mapper's cache is reset apart.
	discoveryClient, err := cc.ClientBuilder.DiscoveryClient("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	restCfg, err := cc.ClientBuilder.Config("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	// Every deletion costs a GET and a DELETE.
	restCfg.QPS *= 2
	metadataClient, err := metadata.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	ignored := map[schema.GroupResource]struct{}{}
	for _, r := range cfg.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, cc.RESTMapper, ignored,
		garbagecollector.NewInformerFactory(cc.InformerFactory, cc.MetadataInformerFactory), cc.InformersStarted)
	if err != nil {
		return nil, fmt.Errorf("failed to start the generic garbage collector: %w", err)
	}
	workers := int(cfg.ConcurrentGCSyncs)
	run := func(ctx context.Context) {
		go gc.Sync(ctx, discoveryClient, gcSyncPeriod)
		gc.Run(ctx, workers, gcSyncPeriod)
	}
	return &gcController{Controller: newControllerLoop(name, run), gc: gc}, nil
}
