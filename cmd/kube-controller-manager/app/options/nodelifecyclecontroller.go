package options

import (
	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// NodeLifecycleControllerOptions holds the node-lifecycle-controller flags.
type NodeLifecycleControllerOptions struct {
	*kcmconfig.NodeLifecycleControllerConfiguration
}

// AddFlags binds the flags to fs.
func (o *NodeLifecycleControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.DurationVar(&o.NodeStartupGracePeriod.Duration, "node-startup-grace-period", o.NodeStartupGracePeriod.Duration,
		"How long a starting Node may stay unresponsive before it is marked unhealthy.")
	fs.DurationVar(&o.NodeMonitorGracePeriod.Duration, "node-monitor-grace-period", o.NodeMonitorGracePeriod.Duration,
		"How long a running Node may stay unresponsive before it is marked unhealthy. "+
			"Must be N times the kubelet's nodeStatusUpdateFrequency, N being the number of status posts the kubelet may retry, "+
			"and more than HTTP2_PING_TIMEOUT_SECONDS plus HTTP2_READ_IDLE_TIMEOUT_SECONDS.")
	fs.Float32Var(&o.NodeEvictionRate, "node-eviction-rate", o.NodeEvictionRate,
		"Nodes per second whose pods are deleted after node failures while the zone is healthy (see --unhealthy-zone-threshold). "+
			"A cluster without zones counts as one zone.")
	fs.Float32Var(&o.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", o.SecondaryNodeEvictionRate,
		"Nodes per second whose pods are deleted after node failures while the zone is unhealthy (see --unhealthy-zone-threshold). "+
			"A cluster without zones counts as one zone. Treated as 0 when the cluster has no more than --large-cluster-size-threshold nodes.")
	fs.Int32Var(&o.LargeClusterSizeThreshold, "large-cluster-size-threshold", o.LargeClusterSizeThreshold,
		"From how many nodes node-lifecycle-controller considers the cluster large for eviction. "+
			"At or below this size --secondary-node-eviction-rate is treated as 0. With several zones the threshold applies to each zone separately.")
	fs.Float32Var(&o.UnhealthyZoneThreshold, "unhealthy-zone-threshold", o.UnhealthyZoneThreshold,
		"Share of a zone's Nodes (at least 3) that must be not Ready for the zone to count as unhealthy. ")
	fs.DurationVar(&o.NodeMonitorPeriod.Duration, "node-monitor-period", o.NodeMonitorPeriod.Duration,
		"How often NodeLifecycleController syncs NodeStatus.")
}

// ApplyTo copies the options into cfg.
func (o *NodeLifecycleControllerOptions) ApplyTo(cfg *kcmconfig.NodeLifecycleControllerConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.NodeLifecycleControllerConfiguration
	return nil
}

// Validate accepts any value, as upstream does.
func (o *NodeLifecycleControllerOptions) Validate() []error {
	return nil
}
