package app

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/servicecidrs"
)

// newNodeIPAMController runs only with --allocate-node-cidrs, as upstream.
func newNodeIPAMController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	shared := cc.ComponentConfig.KubeCloudShared
	if !shared.AllocateNodeCIDRs {
		return nil, nil
	}
	ipam := cc.ComponentConfig.NodeIPAMController
	cfg, err := nodeipam.NewConfig(klog.FromContext(ctx), nodeipam.Options{
		CIDRAllocatorType:    shared.CIDRAllocatorType,
		ClusterCIDR:          shared.ClusterCIDR,
		ServiceCIDR:          ipam.ServiceCIDR,
		SecondaryServiceCIDR: ipam.SecondaryServiceCIDR,
		NodeCIDRMaskSize:     ipam.NodeCIDRMaskSize,
		NodeCIDRMaskSizeIPv4: ipam.NodeCIDRMaskSizeIPv4,
		NodeCIDRMaskSizeIPv6: ipam.NodeCIDRMaskSizeIPv6,
	})
	if err != nil {
		return nil, err
	}
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	c, err := nodeipam.NewNodeIpamController(ctx, cc.InformerFactory.Core().V1().Nodes(), client, cfg)
	if err != nil {
		return nil, err
	}
	// running_managed_controllers{name="nodeipam"}: upstream sets it for
	// this controller alone.
	return newControllerLoop(name, func(ctx context.Context) {
		managerMetrics.ControllerStarted("nodeipam")
		defer managerMetrics.ControllerStopped("nodeipam")
		c.Run(ctx)
	}), nil
}

func newServiceCIDRController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("service-cidrs-controller")
	if err != nil {
		return nil, err
	}
	c := servicecidrs.NewController(ctx,
		cc.InformerFactory.Networking().V1().ServiceCIDRs(),
		cc.InformerFactory.Networking().V1().IPAddresses(),
		client)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}
