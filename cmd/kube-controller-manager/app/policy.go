package app

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/scale"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/disruption"
)

func newDisruptionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("disruption-controller")
	if err != nil {
		return nil, err
	}
	config, err := cc.ClientBuilder.Config("disruption-controller")
	if err != nil {
		return nil, err
	}
	// The scale subresource of any workload kind, found through discovery.
	scales, err := scale.NewForConfig(config, cc.RESTMapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(client.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("error creating scale client: %w", err)
	}
	dc := disruption.NewController(ctx,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Policy().V1().PodDisruptionBudgets(),
		cc.InformerFactory.Core().V1().ReplicationControllers(),
		cc.InformerFactory.Apps().V1().ReplicaSets(),
		cc.InformerFactory.Apps().V1().Deployments(),
		cc.InformerFactory.Apps().V1().StatefulSets(),
		client, cc.RESTMapper, scales, client.Discovery())
	workers := int(cc.ComponentConfig.DisruptionController.ConcurrentDisruptionSyncs)
	return newControllerLoop(name, func(ctx context.Context) { dc.Run(ctx, workers) }), nil
}
