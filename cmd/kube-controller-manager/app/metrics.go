package app

import (
	_ "k8s.io/apiserver/pkg/cel/metrics" // apiserver_cel_*_duration_seconds
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
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

// Upstream's binary links the aggregator's serving code, which registers
// these two counters; nothing here proxies to aggregated servers, so they
// stay 0, but dashboards and alerts written against upstream find them.
var (
	aggregatorX509MissingSAN = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "apiserver",
		Subsystem:      "kube_aggregator",
		Name:           "x509_missing_san_total",
		Help:           "Requests to, or failed connections with, servers whose serving certificate lacks the SAN extension.",
		StabilityLevel: metrics.ALPHA,
	})
	aggregatorX509InsecureSHA1 = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "apiserver",
		Subsystem:      "kube_aggregator",
		Name:           "x509_insecure_sha1_total",
		Help:           "Requests to, or failed connections with, servers whose serving certificate is signed with SHA1.",
		StabilityLevel: metrics.ALPHA,
	})
)

func init() {
	legacyregistry.MustRegister(aggregatorX509MissingSAN, aggregatorX509InsecureSHA1)
}
