package app

import (
	"context"

	v1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace"
)

func newNamespaceController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg, err := cc.ClientBuilder.Config("namespace-controller")
	if err != nil {
		return nil, err
	}
	// Emptying a namespace means discovery plus a delete per resource
	// type; upstream raises the limits the same way.
	cfg.QPS *= 20
	cfg.Burst *= 100
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nsCfg := cc.ComponentConfig.NamespaceController
	nc := namespace.NewNamespaceController(ctx, client, metadataClient,
		client.Discovery().ServerPreferredNamespacedResources,
		cc.InformerFactory.Core().V1().Namespaces(),
		nsCfg.NamespaceSyncPeriod.Duration, v1.FinalizerKubernetes)
	workers := int(nsCfg.ConcurrentNamespaceSyncs)
	return newControllerLoop(name, func(ctx context.Context) { nc.Run(ctx, workers) }), nil
}
