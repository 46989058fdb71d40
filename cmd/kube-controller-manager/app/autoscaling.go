package app

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/scale"
	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podautoscaler/metrics"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

func newHorizontalPodAutoscalerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("horizontal-pod-autoscaler")
	if err != nil {
		return nil, err
	}
	config, err := cc.ClientBuilder.Config("horizontal-pod-autoscaler")
	if err != nil {
		return nil, err
	}
	scales, err := scale.NewForConfig(config, cc.RESTMapper, dynamic.LegacyAPIPathResolverFunc,
		scale.NewDiscoveryScaleKindResolver(client.Discovery()))
	if err != nil {
		return nil, fmt.Errorf("error creating scale client: %w", err)
	}
	metricsClient, err := metrics.NewRESTMetricsClient(config, cc.RESTMapper)
	if err != nil {
		return nil, fmt.Errorf("error creating metrics client: %w", err)
	}
	cfg := cc.ComponentConfig.HPAController
	hc := podautoscaler.NewController(ctx,
		client.CoreV1(), scales, client.AutoscalingV2(), cc.RESTMapper, metricsClient,
		cc.InformerFactory.Autoscaling().V2().HorizontalPodAutoscalers(),
		cc.InformerFactory.Core().V1().Pods(),
		cfg.HorizontalPodAutoscalerSyncPeriod.Duration,
		cfg.HorizontalPodAutoscalerDownscaleStabilizationWindow.Duration,
		cfg.HorizontalPodAutoscalerTolerance,
		cfg.HorizontalPodAutoscalerCPUInitializationPeriod.Duration,
		cfg.HorizontalPodAutoscalerInitialReadinessDelay.Duration,
		hpaFeatures(defaultFeatureGate()))
	workers := int(cfg.ConcurrentHorizontalPodAutoscalerSyncs)
	return newControllerLoop(name, func(ctx context.Context) { hc.Run(ctx, workers) }), nil
}

func hpaFeatures(fg featuregate.FeatureGate) podautoscaler.Features {
	return podautoscaler.Features{
		HPAGeneration:              fg.Enabled(features.HPAGeneration),
		HPAConfigurableTolerance:   fg.Enabled(features.HPAConfigurableTolerance),
		HPAScaleToZero:             fg.Enabled(features.HPAScaleToZero),
		PodLevelResources:          fg.Enabled(features.PodLevelResources),
		HPAOptimizedSelectorStore:  fg.Enabled(features.HPAOptimizedSelectorStore),
		StaleControllerConsistency: fg.Enabled(features.StaleControllerConsistencyHPA),
	}
}
