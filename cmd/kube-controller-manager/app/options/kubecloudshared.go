package options

import (
	"fmt"

	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// externalCloudProvider is the only --cloud-provider value besides empty:
// in-tree cloud providers are gone since v1.31.
const externalCloudProvider = "external"

// KubeCloudSharedOptions holds the cloud-related generic flags.
type KubeCloudSharedOptions struct {
	*kcmconfig.KubeCloudSharedConfiguration
}

// AddFlags binds the flags to fs.
func (o *KubeCloudSharedOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.StringVar(&o.CloudProvider.Name, "cloud-provider", o.CloudProvider.Name,
		"Which cloud provider to use; empty for none.")
	fs.StringVar(&o.CloudProvider.CloudConfigFile, "cloud-config", o.CloudProvider.CloudConfigFile,
		"File with the cloud provider configuration; empty for none.")
	fs.StringVar(&o.ExternalCloudVolumePlugin, "external-cloud-volume-plugin", o.ExternalCloudVolumePlugin,
		"Volume plugin used when --cloud-provider=external; leave empty otherwise. Lets node-ipam-controller, persistentvolume-binder-controller, "+
			"persistentvolume-expander-controller and attach-detach-controller work with in-tree cloud providers.")
	fs.BoolVar(&o.UseServiceAccountCredentials, "use-service-account-credentials", o.UseServiceAccountCredentials,
		"Give each controller its own service account credentials.")
	fs.BoolVar(&o.AllowUntaggedCloud, "allow-untagged-cloud", false,
		"Let the cluster run without a cluster-id on its cloud instances (legacy).")
	_ = fs.MarkDeprecated("allow-untagged-cloud", "This flag is deprecated and will be removed in a future release. A cluster-id will be required on cloud instances.")
	fs.DurationVar(&o.RouteReconciliationPeriod.Duration, "route-reconciliation-period", o.RouteReconciliationPeriod.Duration,
		"How often routes the cloud provider created for Nodes are reconciled.")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName,
		"Prefix of the cluster's instances.")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", o.ClusterCIDR,
		"The CIDR range of Pods. Read only when --allocate-node-cidrs=true.")
	fs.BoolVar(&o.AllocateNodeCIDRs, "allocate-node-cidrs", o.AllocateNodeCIDRs,
		"Allocate Pod CIDRs to nodes and set them on the cloud provider. Needs --cluster-cidr.")
	fs.StringVar(&o.CIDRAllocatorType, "cidr-allocator-type", o.CIDRAllocatorType,
		"Which CIDR allocator to use")
	fs.BoolVar(&o.ConfigureCloudRoutes, "configure-cloud-routes", o.ConfigureCloudRoutes,
		"Configure the CIDRs handed out by --allocate-node-cidrs on the cloud provider.")
	fs.DurationVar(&o.NodeSyncPeriod.Duration, "node-sync-period", 0,
		"Deprecated and ignored. Node health is governed by --node-monitor-period, cloud routes by --route-reconciliation-period.")
	_ = fs.MarkDeprecated("node-sync-period", "This flag is currently no-op and will be deleted.")
}

// ApplyTo copies the options into cfg.
func (o *KubeCloudSharedOptions) ApplyTo(cfg *kcmconfig.KubeCloudSharedConfiguration) error {
	if o == nil {
		return nil
	}
	*cfg = *o.KubeCloudSharedConfiguration
	return nil
}

// Validate rejects in-tree cloud providers and CIDR allocators other than
// RangeAllocator, which upstream no longer ships.
func (o *KubeCloudSharedOptions) Validate() []error {
	if o == nil {
		return nil
	}
	var errs []error
	if name := o.CloudProvider.Name; name != "" && name != externalCloudProvider {
		errs = append(errs, fmt.Errorf("--cloud-provider=%q: built-in cloud providers are disabled; set --cloud-provider=external and run an external cloud controller manager", name))
	}
	if t := o.CIDRAllocatorType; t != "" && t != kcmconfig.RangeAllocatorType {
		errs = append(errs, fmt.Errorf("--cidr-allocator-type=%q: built-in cloud providers are disabled, only %s is available", t, kcmconfig.RangeAllocatorType))
	}
	return errs
}
