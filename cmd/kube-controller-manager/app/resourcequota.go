package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota"
)

// quotaDiscoveryPeriod is how often new quotable resources are looked for,
// as upstream.
const quotaDiscoveryPeriod = 30 * time.Second

func newResourceQuotaController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("resourcequota-controller")
	if err != nil {
		return nil, err
	}
	dc, err := cc.ClientBuilder.DiscoveryClient("resourcequota-controller")
	if err != nil {
		return nil, err
	}
	discoveryFunc := dc.ServerPreferredNamespacedResources
	cfg := cc.ComponentConfig.ResourceQuotaController
	opts, err := resourcequota.DefaultOptions(client.CoreV1(), cc.InformerFactory, cc.MetadataInformerFactory,
		discoveryFunc, cfg.ResourceQuotaSyncPeriod.Duration, cc.ResyncPeriod, cc.InformersStarted)
	if err != nil {
		return nil, fmt.Errorf("failed to create the resource quota controller options: %w", err)
	}
	rq, err := resourcequota.NewController(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the resource quota controller: %w", err)
	}
	workers := int(cfg.ConcurrentResourceQuotaSyncs)
	return newControllerLoop(name, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { rq.Run(ctx, workers) })
		wg.Go(func() { rq.Sync(ctx, discoveryFunc, quotaDiscoveryPeriod) })
		wg.Wait()
	}), nil
}
