package app

import (
	"context"
	"fmt"

	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/devicetainteviction"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourceclaim"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcepoolstatusrequest"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
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
		resourceClaimFeatures())
	if err != nil {
		return nil, fmt.Errorf("failed to start resource claim controller: %w", err)
	}
	workers := int(cc.ComponentConfig.ResourceClaimController.ConcurrentSyncs)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, workers) }), nil
}

// resourceClaimFeatures reads the controller's gates from the process gate.
func resourceClaimFeatures() resourceclaim.Features {
	fg := defaultFeatureGate()
	return resourceclaim.Features{
		AdminAccess:            fg.Enabled(features.DRAAdminAccess),
		PrioritizedList:        fg.Enabled(features.DRAPrioritizedList),
		GenericWorkload:        fg.Enabled(features.GenericWorkload),
		WorkloadResourceClaims: fg.Enabled(features.DRAWorkloadResourceClaims),
	}
}

func newDeviceTaintEvictionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	const controllerName = "device-taint-eviction-controller"
	client, err := cc.NewClient(controllerName)
	if err != nil {
		return nil, err
	}
	fg := defaultFeatureGate()
	gates := devicetainteviction.Features{
		DeviceTaintRules:       fg.Enabled(features.DRADeviceTaintRules),
		WorkloadResourceClaims: fg.Enabled(features.DRAWorkloadResourceClaims),
	}
	resource := cc.InformerFactory.Resource().V1()
	rules := resource.DeviceTaintRules()
	if !gates.DeviceTaintRules {
		rules = nil
	}
	c := devicetainteviction.NewController(client, cc.InformerFactory.Core().V1().Pods(),
		resource.ResourceClaims(), resource.ResourceSlices(), rules, resource.DeviceClasses(),
		controllerName, gates)
	workers := int(cc.ComponentConfig.DeviceTaintEvictionController.ConcurrentSyncs)
	return newControllerLoop(name, func(ctx context.Context) {
		if err := c.Run(ctx, workers); err != nil {
			// As upstream: the controller stays paused, the process runs on.
			klog.FromContext(ctx).Error(err, "Device taint processing leading to Pod eviction failed and is now paused")
			<-ctx.Done()
		}
	}), nil
}

func newResourcePoolStatusRequestController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("resourcepoolstatusrequest-controller")
	if err != nil {
		return nil, err
	}
	r := cc.InformerFactory.Resource()
	gates := resourcePoolStatusRequestFeatures(defaultFeatureGate())
	rules := r.V1().DeviceTaintRules()
	if !gates.DeviceTaintRules {
		rules = nil
	}
	c, err := resourcepoolstatusrequest.NewController(ctx, client,
		r.V1alpha3().ResourcePoolStatusRequests(), r.V1().ResourceSlices(),
		r.V1().ResourceClaims(), rules, gates)
	if err != nil {
		return nil, fmt.Errorf("failed to init resourcepoolstatusrequest controller: %w", err)
	}
	// One worker, as upstream.
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func resourcePoolStatusRequestFeatures(fg featuregate.FeatureGate) resourcepoolstatusrequest.Features {
	return resourcepoolstatusrequest.Features{DeviceTaintRules: fg.Enabled(features.DRADeviceTaintRules)}
}
