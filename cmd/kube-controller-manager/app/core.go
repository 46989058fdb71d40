package app

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/endpoint"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/garbagecollector"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodelifecycle"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podgc"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replicaset"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/replication"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/serviceaccount/legacytokencleaner"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/storageversiongc"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/tainteviction"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttl"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttlafterfinished"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/expand"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvcprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/selinuxwarning"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/vacprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

// newNodeIPAMController runs only with --allocate-node-cidrs, as upstream.
func newNodeIPAMController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	shared := cc.ComponentConfig.KubeCloudShared
	if !shared.AllocateNodeCIDRs {
		return nil, nil
	}
	ipam := cc.ComponentConfig.NodeIPAMController
	cfg, err := nodeipam.NewConfig(klog.FromContext(ctx), nodeipam.Options{
		CIDRAllocatorType:    shared.CIDRAllocatorType,
		ClusterCIDR:          shared.ClusterCIDR,
		ServiceCIDR:          ipam.ServiceCIDR,
		SecondaryServiceCIDR: ipam.SecondaryServiceCIDR,
		NodeCIDRMaskSize:     ipam.NodeCIDRMaskSize,
		NodeCIDRMaskSizeIPv4: ipam.NodeCIDRMaskSizeIPv4,
		NodeCIDRMaskSizeIPv6: ipam.NodeCIDRMaskSizeIPv6,
	})
	if err != nil {
		return nil, err
	}
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	c, err := nodeipam.NewController(ctx, cc.InformerFactory.Core().V1().Nodes(), client, cfg)
	if err != nil {
		return nil, err
	}
	// running_managed_controllers{name="nodeipam"}: upstream sets it for
	// this controller alone.
	return newControllerLoop(name, func(ctx context.Context) {
		managerMetrics.ControllerStarted("nodeipam")
		defer managerMetrics.ControllerStopped("nodeipam")
		c.Run(ctx)
	}), nil
}

func newNodeLifecycleController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.NodeLifecycleController
	f := cc.InformerFactory
	nlc, err := nodelifecycle.NewController(ctx,
		f.Coordination().V1().Leases(), f.Core().V1().Pods(), f.Core().V1().Nodes(), f.Apps().V1().DaemonSets(), client,
		cfg.NodeMonitorPeriod.Duration, cfg.NodeStartupGracePeriod.Duration, cfg.NodeMonitorGracePeriod.Duration,
		cfg.NodeEvictionRate, cfg.SecondaryNodeEvictionRate, cfg.LargeClusterSizeThreshold, cfg.UnhealthyZoneThreshold,
		nodeLifecycleFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, err
	}
	return newControllerLoop(name, nlc.Run), nil
}

func nodeLifecycleFeatures(fg featuregate.FeatureGate) nodelifecycle.Features {
	return nodelifecycle.Features{LeaseCircuitBreaker: fg.Enabled(features.NodeControllerLeaseCircuitBreaker)}
}

// newTaintEvictionController uses the node-controller's identity, as
// upstream does, so the same bootstrap role applies.
func newTaintEvictionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("node-controller")
	if err != nil {
		return nil, err
	}
	tec, err := tainteviction.NewController(ctx, client, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Core().V1().Nodes(), name,
		defaultFeatureGate().Enabled(features.TaintTolerationComparisonOperators))
	if err != nil {
		return nil, err
	}
	return newControllerLoop(name, tec.Run), nil
}

func newPersistentVolumeBinderController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("persistent-volume-binder")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.PersistentVolumeBinderController
	recycler := cfg.VolumeConfiguration.PersistentVolumeRecyclerConfiguration
	core := cc.InformerFactory.Core().V1()
	c, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient:                 client,
		SyncPeriod:                 cfg.PVClaimBinderSyncPeriod.Duration,
		VolumeInformer:             core.PersistentVolumes(),
		ClaimInformer:              core.PersistentVolumeClaims(),
		ClassInformer:              cc.InformerFactory.Storage().V1().StorageClasses(),
		PodInformer:                core.Pods(),
		NodeInformer:               core.Nodes(),
		EnableDynamicProvisioning:  cfg.VolumeConfiguration.EnableDynamicProvisioning,
		EnableHostPathProvisioning: cfg.VolumeConfiguration.EnableHostPathProvisioning,
		Recycler: persistentvolume.RecyclerConfig{
			PodTemplateFilePathHostPath: recycler.PodTemplateFilePathHostPath,
			MinimumTimeoutHostPath:      int(recycler.MinimumTimeoutHostPath),
			IncrementTimeoutHostPath:    int(recycler.IncrementTimeoutHostPath),
			PodTemplateFilePathNFS:      recycler.PodTemplateFilePathNFS,
			MinimumTimeoutNFS:           int(recycler.MinimumTimeoutNFS),
			IncrementTimeoutNFS:         int(recycler.IncrementTimeoutNFS),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("failed to construct persistentvolume controller: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
}

func newAttachDetachController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("attachdetach-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.AttachDetachController
	core, storage := cc.InformerFactory.Core().V1(), cc.InformerFactory.Storage().V1()
	c, err := attachdetach.NewController(ctx, client,
		core.Pods(), core.Nodes(), core.PersistentVolumeClaims(), core.PersistentVolumes(),
		storage.CSINodes(), storage.CSIDrivers(), storage.VolumeAttachments(),
		cc.ComponentConfig.PersistentVolumeBinderController.VolumeConfiguration.FlexVolumePluginDir,
		cfg.DisableAttachDetachReconcilerSync, cfg.ReconcilerSyncLoopPeriod.Duration,
		cfg.DisableForceDetachOnTimeout, attachdetach.DefaultTimerConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to start attach/detach controller: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
}

func newPersistentVolumeExpanderController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("expand-controller")
	if err != nil {
		return nil, err
	}
	c, err := expand.NewController(ctx, client, cc.InformerFactory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		return nil, fmt.Errorf("failed to init volume expand controller: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
}

func newEphemeralVolumeController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("ephemeral-volume-controller")
	if err != nil {
		return nil, err
	}
	c, err := ephemeral.NewController(ctx, client, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		return nil, fmt.Errorf("failed to start ephemeral volume controller: %w", err)
	}
	workers := int(cc.ComponentConfig.EphemeralVolumeController.ConcurrentEphemeralVolumeSyncs)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, workers) }), nil
}

func newEndpointsController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("endpoint-controller")
	if err != nil {
		return nil, err
	}
	cfg := cc.ComponentConfig.EndpointController
	f := cc.InformerFactory
	ec := endpoint.NewController(ctx, f.Core().V1().Pods(), f.Core().V1().Services(), f.Core().V1().Endpoints(),
		client, cfg.EndpointUpdatesBatchPeriod.Duration)
	workers := int(cfg.ConcurrentEndpointSyncs)
	return newControllerLoop(name, func(ctx context.Context) { ec.Run(ctx, workers) }), nil
}

func newReplicationController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("replication-controller")
	if err != nil {
		return nil, err
	}
	rm := replication.NewController(ctx,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Core().V1().ReplicationControllers(),
		client, replicaset.BurstReplicas, replicationFeatures(defaultFeatureGate()))
	rm.WithNamespaceInformer(cc.InformerFactory.Core().V1().Namespaces())
	workers := int(cc.ComponentConfig.ReplicationController.ConcurrentRCSyncs)
	return newControllerLoop(name, func(ctx context.Context) { rm.Run(ctx, workers) }), nil
}

func replicationFeatures(fg featuregate.FeatureGate) replication.Features {
	return replication.Features{PodDeletionCost: fg.Enabled(features.PodDeletionCost)}
}

func newPodGarbageCollectorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pod-garbage-collector")
	if err != nil {
		return nil, err
	}
	gc := podgc.NewController(ctx, client, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Core().V1().Nodes(),
		int(cc.ComponentConfig.PodGCController.TerminatedPodGCThreshold))
	return newControllerLoop(name, gc.Run), nil
}

// quotaDiscoveryPeriod is how often new quotable resources are looked for,
// as upstream.
const quotaDiscoveryPeriod = 30 * time.Second

func newResourceQuotaController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("resourcequota-controller")
	if err != nil {
		return nil, err
	}
	dc, err := cc.ClientBuilder.DiscoveryClient("resourcequota-controller")
	if err != nil {
		return nil, err
	}
	discoveryFunc := dc.ServerPreferredNamespacedResources
	cfg := cc.ComponentConfig.ResourceQuotaController
	opts, err := resourcequota.DefaultOptions(client.CoreV1(), cc.InformerFactory, cc.MetadataInformerFactory,
		discoveryFunc, cfg.ResourceQuotaSyncPeriod.Duration, cc.ResyncPeriod, cc.InformersStarted,
		quotaFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, fmt.Errorf("failed to create the resource quota controller options: %w", err)
	}
	rq, err := resourcequota.NewController(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the resource quota controller: %w", err)
	}
	workers := int(cfg.ConcurrentResourceQuotaSyncs)
	return newControllerLoop(name, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { rq.Run(ctx, workers) })
		wg.Go(func() { rq.Sync(ctx, discoveryFunc, quotaDiscoveryPeriod) })
		wg.Wait()
	}), nil
}

func quotaFeatures(fg featuregate.FeatureGate) evaluator.Features {
	return evaluator.Features{
		PodLevelResources:                   fg.Enabled(features.PodLevelResources),
		PodLevelResourcesFixKubeletQOSClass: fg.Enabled(features.PodLevelResourcesFixKubeletQOSClass),
	}
}

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
	nc := namespace.NewController(ctx, client, metadataClient,
		client.Discovery().ServerPreferredNamespacedResources,
		cc.InformerFactory.Core().V1().Namespaces(),
		nsCfg.NamespaceSyncPeriod.Duration, v1.FinalizerKubernetes)
	nc.WakeWhenPodsGone(cc.InformerFactory.Core().V1().Pods())
	workers := int(nsCfg.ConcurrentNamespaceSyncs)
	return newControllerLoop(name, func(ctx context.Context) { nc.Run(ctx, workers) }), nil
}

func newServiceAccountController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("service-account-controller")
	if err != nil {
		return nil, err
	}
	sac, err := serviceaccount.NewServiceAccountsController(
		cc.InformerFactory.Core().V1().ServiceAccounts(), cc.InformerFactory.Core().V1().Namespaces(),
		client, serviceaccount.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return nil, fmt.Errorf("error creating ServiceAccount controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { sac.Run(ctx, 1) }), nil
}

func newTTLController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("ttl-controller")
	if err != nil {
		return nil, err
	}
	c := ttl.NewController(ctx, cc.InformerFactory.Core().V1().Nodes(), client)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 5) }), nil
}

// gcSyncPeriod is how often the collector re-discovers resources, as upstream.
const gcSyncPeriod = 30 * time.Second

// gcController is the collector plus the debug handler serving its graph.
type gcController struct {
	Controller
	gc *garbagecollector.GarbageCollector
}

func (c *gcController) DebuggingHandler() http.Handler { return c.gc.DebuggingHandler() }

func newGarbageCollectorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	cfg := cc.ComponentConfig.GarbageCollectorController
	if !cfg.EnableGarbageCollector {
		klog.FromContext(ctx).Info("Garbage collector disabled by --enable-garbage-collector=false")
		return nil, nil
	}
	client, err := cc.NewClient("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	// Its own discovery client: the REST mapper's cache is reset apart.
	discoveryClient, err := cc.ClientBuilder.DiscoveryClient("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	restCfg, err := cc.ClientBuilder.Config("generic-garbage-collector")
	if err != nil {
		return nil, err
	}
	// Every deletion costs a GET and a DELETE.
	restCfg.QPS *= 2
	metadataClient, err := metadata.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	ignored := map[schema.GroupResource]struct{}{}
	for _, r := range cfg.GCIgnoredResources {
		ignored[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = struct{}{}
	}
	gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, cc.RESTMapper, ignored,
		garbagecollector.NewInformerFactory(cc.InformerFactory, cc.MetadataInformerFactory), cc.InformersStarted)
	if err != nil {
		return nil, fmt.Errorf("failed to start the generic garbage collector: %w", err)
	}
	workers := int(cfg.ConcurrentGCSyncs)
	run := func(ctx context.Context) {
		go gc.Sync(ctx, discoveryClient, gcSyncPeriod)
		gc.Run(ctx, workers, gcSyncPeriod)
	}
	return &gcController{Controller: newControllerLoop(name, run), gc: gc}, nil
}

func newPVCProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pvc-protection-controller")
	if err != nil {
		return nil, err
	}
	c, err := pvcprotection.NewController(klog.FromContext(ctx),
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(), cc.InformerFactory.Core().V1().Pods(), client,
		pvcProtectionFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, fmt.Errorf("failed to start the pvc protection controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func pvcProtectionFeatures(fg featuregate.FeatureGate) pvcprotection.Features {
	return pvcprotection.Features{UnusedSinceTime: fg.Enabled(features.PersistentVolumeClaimUnusedSinceTime)}
}

func newPVProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pv-protection-controller")
	if err != nil {
		return nil, err
	}
	c := pvprotection.NewController(klog.FromContext(ctx), cc.InformerFactory.Core().V1().PersistentVolumes(), client)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newVACProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("volumeattributesclass-protection-controller")
	if err != nil {
		return nil, err
	}
	c, err := vacprotection.NewController(klog.FromContext(ctx), client,
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
		cc.InformerFactory.Core().V1().PersistentVolumes(),
		cc.InformerFactory.Storage().V1().VolumeAttributesClasses())
	if err != nil {
		return nil, fmt.Errorf("failed to start the vac protection controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newTTLAfterFinishedController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("ttl-after-finished-controller")
	if err != nil {
		return nil, err
	}
	tc := ttlafterfinished.NewController(ctx, cc.InformerFactory.Batch().V1().Jobs(), client)
	workers := int(cc.ComponentConfig.TTLAfterFinishedController.ConcurrentTTLSyncs)
	return newControllerLoop(name, func(ctx context.Context) { tc.Run(ctx, workers) }), nil
}

func newLegacySATokenCleanerController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("legacy-service-account-token-cleaner")
	if err != nil {
		return nil, err
	}
	tokens := cc.FilteredInformerFactory("", "type="+string(v1.SecretTypeServiceAccountToken)).Core().V1().Secrets()
	c, err := legacytokencleaner.NewController(
		cc.InformerFactory.Core().V1().ServiceAccounts(), tokens, cc.InformerFactory.Core().V1().Pods(),
		client, clock.RealClock{}, legacytokencleaner.LegacySATokenCleanerOptions{
			CleanUpPeriod: cc.ComponentConfig.LegacySATokenCleaner.CleanUpPeriod.Duration,
			SyncInterval:  legacytokencleaner.DefaultCleanerSyncInterval,
		})
	if err != nil {
		return nil, fmt.Errorf("failed to init the legacy service account token cleaner: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
}

func newStorageVersionGarbageCollectorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("storage-version-garbage-collector")
	if err != nil {
		return nil, err
	}
	c, err := storageversiongc.NewController(ctx, client,
		cc.InformerFactory.Coordination().V1().Leases(),
		cc.InformerFactory.Internal().V1alpha1().StorageVersions())
	if err != nil {
		return nil, fmt.Errorf("failed to init %s: %w", name, err)
	}
	return newControllerLoop(name, c.Run), nil
}

func newSELinuxWarningController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	// Upstream names this client after the controller itself.
	client, err := cc.NewClient(name)
	if err != nil {
		return nil, err
	}
	c, err := selinuxwarning.NewController(ctx, client,
		cc.InformerFactory.Core().V1().Pods(),
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
		cc.InformerFactory.Core().V1().PersistentVolumes(),
		cc.InformerFactory.Storage().V1().CSIDrivers())
	if err != nil {
		return nil, fmt.Errorf("failed to start SELinux warning controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}
