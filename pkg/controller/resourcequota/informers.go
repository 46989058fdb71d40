package resourcequota

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata/metadatainformer"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
)

// typedResources are read through whole objects: their usage or their
// update filter looks past metadata (and resourcequotas is the
// controller's own informer already).
var typedResources = map[schema.GroupVersionResource]bool{
	v1.SchemeGroupVersion.WithResource("pods"):                    true,
	v1.SchemeGroupVersion.WithResource("services"):                true,
	v1.SchemeGroupVersion.WithResource("persistentvolumeclaims"):  true,
	v1.SchemeGroupVersion.WithResource("resourcequotas"):          true,
	resourceapi.SchemeGroupVersion.WithResource("resourceclaims"): true,
}

type quotaInformerFactory struct {
	typed    informers.SharedInformerFactory
	metadata metadatainformer.SharedInformerFactory
}

// NewInformerFactory returns the shared typed informer for the resources
// whose quota accounting reads object bodies (pods, services,
// persistentvolumeclaims, resourceclaims, and resourcequotas) and a
// metadata-only informer for everything else: counting objects needs no
// bodies, so no ConfigMap or Secret data is cached for quota.
//
// The evaluators must list through the same factory as the monitors (see
// DefaultOptions), or they would read informers nobody starts.
func NewInformerFactory(typed informers.SharedInformerFactory, metadata metadatainformer.SharedInformerFactory) InformerFactory {
	return &quotaInformerFactory{typed: typed, metadata: metadata}
}

func (f *quotaInformerFactory) ForResource(resource schema.GroupVersionResource) (informers.GenericInformer, error) {
	if typedResources[resource] {
		return f.typed.ForResource(resource)
	}
	return f.metadata.ForResource(resource), nil
}

func (f *quotaInformerFactory) Start(stopCh <-chan struct{}) {
	f.typed.Start(stopCh)
	f.metadata.Start(stopCh)
}

// DefaultOptions wires the controller as kube-controller-manager does:
// the built-in evaluators over the shared informers, the default ignored
// resources and update filter. quotaSyncPeriod is
// --resource-quota-sync-period; replenishmentResync is the manager's
// jittered informer resync (may be nil). Informers registered here start
// with the shared factories; the monitors start the rest after
// informersStarted closes. features are the evaluators' feature gates.
func DefaultOptions(quotaClient corev1client.ResourceQuotasGetter, typed informers.SharedInformerFactory, metadata metadatainformer.SharedInformerFactory,
	discoveryFunc NamespacedResourcesFunc, quotaSyncPeriod time.Duration, replenishmentResync func() time.Duration, informersStarted <-chan struct{},
	features evaluator.Features) (*ControllerOptions, error) {
	factory := NewInformerFactory(typed, metadata)
	evaluators, err := evaluator.NewEvaluators(evaluator.ListerFuncForResourceFunc(factory.ForResource), typed, features)
	if err != nil {
		return nil, err
	}
	return &ControllerOptions{
		QuotaClient:               quotaClient,
		ResourceQuotaInformer:     typed.Core().V1().ResourceQuotas(),
		ResyncPeriod:              func() time.Duration { return quotaSyncPeriod },
		Registry:                  evaluator.NewRegistry(evaluators),
		DiscoveryFunc:             discoveryFunc,
		IgnoredResourcesFunc:      evaluator.DefaultIgnoredResources,
		InformersStarted:          informersStarted,
		InformerFactory:           factory,
		ReplenishmentResyncPeriod: replenishmentResync,
		UpdateFilter:              evaluator.DefaultUpdateFilter(),
	}, nil
}
