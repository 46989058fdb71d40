package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// HPAControllerOptions holds the horizontal-pod-autoscaler-controller flags.
type HPAControllerOptions struct {
	*kcmconfig.HPAControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *HPAControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.Int32Var(&o.ConcurrentHorizontalPodAutoscalerSyncs, "concurrent-horizontal-pod-autoscaler-syncs", o.ConcurrentHorizontalPodAutoscalerSyncs,
		"How many horizontal pod autoscalers are synced at the same time. More react faster but use more CPU and network.")
	fs.DurationVar(&o.HorizontalPodAutoscalerSyncPeriod.Duration, "horizontal-pod-autoscaler-sync-period", o.HorizontalPodAutoscalerSyncPeriod.Duration,
		"How often the horizontal pod autoscaler recomputes the number of pods.")
	fs.DurationVar(&o.HorizontalPodAutoscalerDownscaleStabilizationWindow.Duration, "horizontal-pod-autoscaler-downscale-stabilization", o.HorizontalPodAutoscalerDownscaleStabilizationWindow.Duration,
		"How far back the autoscaler looks at its own recommendations; it never scales below any of them.")
	fs.Float64Var(&o.HorizontalPodAutoscalerTolerance, "horizontal-pod-autoscaler-tolerance", o.HorizontalPodAutoscalerTolerance,
		"How far (from 1.0) the ratio of desired to actual metrics must move before the autoscaler scales.")
	fs.DurationVar(&o.HorizontalPodAutoscalerCPUInitializationPeriod.Duration, "horizontal-pod-autoscaler-cpu-initialization-period", o.HorizontalPodAutoscalerCPUInitializationPeriod.Duration,
		"How long after a pod starts its CPU samples may be skipped.")
	fs.DurationVar(&o.HorizontalPodAutoscalerInitialReadinessDelay.Duration, "horizontal-pod-autoscaler-initial-readiness-delay", o.HorizontalPodAutoscalerInitialReadinessDelay.Duration,
		"How long after a pod starts readiness changes count as its initial readiness.")
}

// ApplyTo copies the options into cfg.
func (o *HPAControllerOptions) ApplyTo(cfg *kcmconfig.HPAControllerConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.HPAControllerConfiguration
	return nil
}

// Validate requires at least one worker.
func (o *HPAControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	return collect(atLeastOne("concurrent-horizontal-pod-autoscaler-syncs", o.ConcurrentHorizontalPodAutoscalerSyncs))
}
