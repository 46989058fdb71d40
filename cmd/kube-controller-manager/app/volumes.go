package app

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/ephemeral"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/expand"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/persistentvolume"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvcprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/pvprotection"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/vacprotection"
)

func newPVCProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pvc-protection-controller")
	if err != nil {
		return nil, err
	}
	c, err := pvcprotection.NewPVCProtectionController(klog.FromContext(ctx),
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(), cc.InformerFactory.Core().V1().Pods(), client)
	if err != nil {
		return nil, fmt.Errorf("failed to start the pvc protection controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newPVProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pv-protection-controller")
	if err != nil {
		return nil, err
	}
	c := pvprotection.NewPVProtectionController(klog.FromContext(ctx), cc.InformerFactory.Core().V1().PersistentVolumes(), client)
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
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

func newVACProtectionController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("volumeattributesclass-protection-controller")
	if err != nil {
		return nil, err
	}
	c, err := vacprotection.NewVACProtectionController(klog.FromContext(ctx), client,
		cc.InformerFactory.Core().V1().PersistentVolumeClaims(),
		cc.InformerFactory.Core().V1().PersistentVolumes(),
		cc.InformerFactory.Storage().V1().VolumeAttributesClasses())
	if err != nil {
		return nil, fmt.Errorf("failed to start the vac protection controller: %w", err)
	}
	return newControllerLoop(name, func(ctx context.Context) { c.Run(ctx, 1) }), nil
}

func newPersistentVolumeExpanderController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("expand-controller")
	if err != nil {
		return nil, err
	}
	c, err := expand.NewExpandController(ctx, client, cc.InformerFactory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		return nil, fmt.Errorf("failed to init volume expand controller: %w", err)
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
	c, err := attachdetach.NewAttachDetachController(ctx, client,
		core.Pods(), core.Nodes(), core.PersistentVolumeClaims(), core.PersistentVolumes(),
		storage.CSINodes(), storage.CSIDrivers(), storage.VolumeAttachments(),
		cfg.DisableAttachDetachReconcilerSync, cfg.ReconcilerSyncLoopPeriod.Duration,
		cfg.DisableForceDetachOnTimeout, attachdetach.DefaultTimerConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to start attach/detach controller: %w", err)
	}
	return newControllerLoop(name, c.Run), nil
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
