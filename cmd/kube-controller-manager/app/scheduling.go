package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/podgroupprotection"
)

func newPodGroupProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	// Upstream names this client after the controller itself.
	client, err := cc.NewClient(name)
	if err != nil {
		return nil, err
	}
	c, err := podgroupprotection.NewController(klog.FromContext(ctx),
		cc.InformerFactory.Scheduling().V1beta1().PodGroups(),
		cc.InformerFactory.Core().V1().Pods(),
		client)
	if err != nil {
		return nil, fmt.Errorf("failed to init %s: %w", name, err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}
