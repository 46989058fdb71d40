package app

import (
	"context"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslice"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpointslicemirroring"
)

func newEndpointSliceController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("endpointslice-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.EndpointSliceController
	f := cc.InformerFactory
	esc := endpointslice.NewController(ctx, f.Core().V1().Pods(), f.Core().V1().Services(), f.Core().V1().Nodes(),
		f.Discovery().V1().EndpointSlices(), cfg.MaxEndpointsPerSlice, client, cfg.EndpointUpdatesBatchPeriod.Duration)
	workers := int(cfg.ConcurrentServiceEndpointSyncs)
	return newControllerLoop(name, func(ctx context.Context) { esc.Run(ctx, workers) }), nil
}

func newEndpointSliceMirroringController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("endpointslicemirroring-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.EndpointSliceMirroringController
	c := endpointslicemirroring.NewController(ctx,
		cc.InformerFactory.Core().V1().Endpoints(),
		cc.InformerFactory.Discovery().V1().EndpointSlices(),
		cc.InformerFactory.Core().V1().Services(),
		cfg.MirroringMaxEndpointsPerSubset,
		client,
		cfg.MirroringEndpointUpdatesBatchPeriod.Duration)
	workers := int(cfg.MirroringConcurrentServiceEndpointSyncs)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, workers) }), nil
}
