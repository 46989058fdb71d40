package app

import (
	"context"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/tainteviction"
)

func newNodeLifecycleController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.NodeLifecycleController
	f := cc.InformerFactory
	nlc, err := nodelifecycle.NewNodeLifecycleController(ctx,
		f.Coordination().V1().Leases(), f.Core().V1().Pods(), f.Core().V1().Nodes(), f.Apps().V1().DaemonSets(), client,
		cfg.NodeMonitorPeriod.Duration, cfg.NodeStartupGracePeriod.Duration, cfg.NodeMonitorGracePeriod.Duration,
		cfg.NodeEvictionRate, cfg.SecondaryNodeEvictionRate, cfg.LargeClusterSizeThreshold, cfg.UnhealthyZoneThreshold)
	if err != nil {
		return nil, err
	}
	return newControllerLoop(name, nlc.Run), nil
}

// newTaintEvictionController uses the node-controller's identity, as
// upstream does, so the same bootstrap role applies.
func newTaintEvictionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	tec, err := tainteviction.New(ctx, client, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Core().V1().Nodes(), name)
	if err != nil {
		return nil, err
	}
	return newControllerLoop(name, tec.Run), nil
}
