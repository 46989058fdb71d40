package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/metadata"

	svm "github.com/kcmclone/kube-controller-manager/pkg/controller/storageversionmigrator"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

// newStorageVersionMigratorController runs upstream's three migration loops
// together: resourceVersion recording, object rewriting, and the CRD
// storedVersions update.
func newStorageVersionMigratorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	if !defaultFeatureGate().Enabled(features.StorageVersionMigrator) ||
		!clientfeatures.FeatureGates().Enabled(clientfeatures.InformerResourceVersion) {
		return nil, nil
	}
	if !cc.ComponentConfig.GarbageCollectorController.EnableGarbageCollector {
		return nil, errors.New("storage version migrator requires garbage collector")
	}
	if !clientfeatures.FeatureGates().Enabled(clientfeatures.InOrderInformers) {
		return nil, errors.New("storage version migrator requires the InOrderInformers feature gate to be enabled")
	}

	// A migration rewrites every object of a resource: keep it fast.
	config, err := cc.ClientBuilder.Config(name)
	if err != nil {
		return nil, err
	}
	config.QPS *= 20
	config.Burst *= 100
	client, err := cc.NewClient(name)
	if err != nil {
		return nil, err
	}
	dynamicClient, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	metadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("failed to create metadata client for %s: %w", name, err)
	}

	ignored := map[schema.GroupResource]struct{}{}
	for _, r := range cc.ComponentConfig.GarbageCollectorController.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	// The garbage collector's metadata informers, shared through the factory.
	monitors := svm.NewMetadataMonitors(ctx, discoveryClient, cc.MetadataInformerFactory, ignored, cc.InformersStarted)
	informer := cc.InformerFactory.Storagemigration().V1().StorageVersionMigrations()
	loops := []func(context.Context){
		svm.NewController(ctx, client, dynamicClient, informer, name, cc.RESTMapper, monitors).Run,
		svm.NewResourceVersionController(ctx, client, discoveryClient, metadataClient, informer, cc.RESTMapper).Run,
		svm.NewCustomResourceController(ctx, client, informer, dynamicClient).Run,
	}
	return newControllerLoop(name, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, run := range loops {
			wg.Go(func() { run(ctx) })
		}
		wg.Wait()
	}), nil
}
