package app

import (
	"context"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/servicecidrs"
)

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
