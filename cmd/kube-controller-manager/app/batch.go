package app

import (
	"context"
	"fmt"

	"k8s.io/component-base/featuregate"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/cronjob"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/job"
	"github.com/kcmclone/kube-controller-manager/pkg/features"
)

func newJobController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("job-controller")
	if err != nil {
		return nil, err
	}
	jc, err := job.NewController(ctx, cc.InformerFactory.Core().V1().Pods(), cc.InformerFactory.Batch().V1().Jobs(), client,
		jobFeatures(defaultFeatureGate()))
	if err != nil {
		return nil, err
	}
	workers := int(cc.ComponentConfig.JobController.ConcurrentJobSyncs)
	return newControllerLoop(name, func(ctx context.Context) { jc.Run(ctx, workers) }), nil
}

func newCronJobController(ctx context.Context, cc ControllerContext, name string) (Controller, error) {
	client, err := cc.NewClient("cronjob-controller")
	if err != nil {
		return nil, err
	}
	cjc, err := cronjob.NewController(ctx, cc.InformerFactory.Batch().V1().Jobs(), cc.InformerFactory.Batch().V1().CronJobs(), client)
	if err != nil {
		return nil, fmt.Errorf("creating CronJob controller V2: %w", err)
	}
	workers := int(cc.ComponentConfig.CronJobController.ConcurrentCronJobSyncs)
	return newControllerLoop(name, func(ctx context.Context) { cjc.Run(ctx, workers) }), nil
}

func jobFeatures(fg featuregate.FeatureGate) job.Features {
	return job.Features{
		StaleControllerConsistency:                  fg.Enabled(features.StaleControllerConsistencyJob),
		MutableSchedulingDirectivesForSuspendedJobs: fg.Enabled(features.MutableSchedulingDirectivesForSuspendedJobs),
	}
}
