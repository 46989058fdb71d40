package app

import (
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	_ "k8s.io/component-base/metrics/prometheus/version" // kubernetes_build_info
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/cmd/kube-controller-manager/app/config"
)

// managerMetrics sets running_managed_controllers{manager="kube-controller-manager"}.
var managerMetrics = controllersmetrics.NewControllerManagerMetrics(componentName)

// registerComponentMetrics publishes kubernetes_feature_enabled, version_info
// and running_managed_controllers, as upstream does once its config is built.
func registerComponentMetrics(c *config.CompletedConfig) {
	controllersmetrics.Register()
	if c.ComponentGlobalsRegistry == nil {
		return
	}
	if fg, ok := c.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent).(featuregate.MutableFeatureGate); ok {
		fg.AddMetrics()
	}
	c.ComponentGlobalsRegistry.AddMetrics()
}

// reserveInformerName claims the name upstream gives its shared informer
// factory, which labels the informer_* metrics. The name is unique per
// process: a second controller context built while the first still holds
// it (upstream exits there) runs unnamed, so without those metrics.
func reserveInformerName(logger klog.Logger) *cache.InformerName {
	n, err := cache.NewInformerName(componentName)
	if err != nil {
		logger.V(2).Info("Shared informers run without a name, so without informer metrics", "err", err)
		return nil
	}
	return n
}
