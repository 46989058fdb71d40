package app

import (
	"context"
	"fmt"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/cronjob"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/podgc"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttlafterfinished"
)

func newJobController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("job-controller")
	if err != nil {
		return nil, err
	}
	jc, err := job.NewController(ctx, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Batch().V1().Jobs(), client)
	if err != nil {
		return nil, err
	}
	workers := int(cc.ComponentConfig.JobController.ConcurrentJobSyncs)
	return newControllerLoop(name, func(ctx context.Context) { jc.Run(ctx, workers) }), nil
}

func newTTLAfterFinishedController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("ttl-after-finished-controller")
	if err != nil {
		return nil, err
	}
	tc := ttlafterfinished.New(ctx, cc.InformerFactory.Batch().V1().Jobs(), client)
	workers := int(cc.ComponentConfig.TTLAfterFinishedController.ConcurrentTTLSyncs)
	return newControllerLoop(name, func(ctx context.Context) { tc.Run(ctx, workers) }), nil
}

func newPodGarbageCollectorController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("pod-garbage-collector")
	if err != nil {
		return nil, err
	}
	gc := podgc.NewPodGC(ctx, client, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Core().V1().Nodes(),
		int(cc.ComponentConfig.PodGCController.TerminatedPodGCThreshold))
	return newControllerLoop(name, gc.Run), nil
}

func newCronJobController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("cronjob-controller")
	if err != nil {
		return nil, err
	}
	cjc, err := cronjob.NewControllerV2(ctx, cc.InformerFactory.Batch().V1().Jobs(), cc.InformerFactory.Batch().V1().CronJobs(), client)
	if err != nil {
		return nil, fmt.Errorf("creating CronJob controller V2: %w", err)
	}
	workers := int(cc.ComponentConfig.CronJobController.ConcurrentCronJobSyncs)
	return newControllerLoop(name, func(ctx context.Context) { cjc.Run(ctx, workers) }), nil
}
