package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/devicetainteviction"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim"
)

func newResourceClaimController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("resource-claim-controller")
	if err != nil {
		return nil, err
	}
	c, err := resourceclaim.NewController(klog.FromContext(ctx), client,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Scheduling().V1beta1().PodGroups(),
		cc.InformerFactory.Resource().V1().ResourceClaims(),
		cc.InformerFactory.Resource().V1().ResourceClaimTemplates(),
		resourceclaim.DefaultFeatures())
	if err != nil {
		return nil, fmt.Errorf("failed to start resource claim controller: %w", err)
	}
	workers := int(cc.ComponentConfig.ResourceClaimController.ConcurrentSyncs)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, workers) }), nil
}

func newDeviceTaintEvictionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	const controllerName = "device-taint-eviction-controller"
	client, err := cc.NewClient(controllerName)
	if err != nil {
		return nil, err
	}
	features := devicetainteviction.DefaultFeatures()
	resource := cc.InformerFactory.Resource().V1()
	rules := resource.DeviceTaintRules()
	if !features.DeviceTaintRules {
		rules = nil
	}
	c := devicetainteviction.New(client, cc.InformerFactory.Core().V1().Pods(),
		resource.ResourceClaims(), resource.ResourceSlices(), rules, resource.DeviceClasses(),
		controllerName, features)
	workers := int(cc.ComponentConfig.DeviceTaintEvictionController.ConcurrentSyncs)
	return newControllerLoop(name, func(ctx context.Context) {
		if err := c.Run(ctx, workers); err != nil {
			// As upstream: the controller stays paused, the process runs on.
			klog.FromContext(ctx).Error(err, "Device taint processing leading to Pod eviction failed and is now paused")
			<-ctx.Done()
		}
	}), nil
}
