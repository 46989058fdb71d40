package options

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	kcmconfig "github.com/kcmclone/kube-controller-manager/pkg/controller/apis/config"
)

// NodeIPAMControllerOptions holds the node-ipam-controller flags.
type NodeIPAMControllerOptions struct {
	*kcmconfig.NodeIPAMControllerConfiguration
}

// AddFlags binds the flags to fs. --service-cluster-ip-range may hold a
// second, comma-separated range for dual-stack clusters.
func (o *NodeIPAMControllerOptions) AddFlags(fs *pflag.FlagSet) {
	if o == nil {
		return
	}
	fs.StringVar(&o.ServiceCIDR, "service-cluster-ip-range", o.ServiceCIDR,
		"The CIDR range of Services. Read only when --allocate-node-cidrs=true.")
	fs.Int32Var(&o.NodeCIDRMaskSize, "node-cidr-mask-size", o.NodeCIDRMaskSize,
		"The mask size of node CIDRs. Defaults to 24 for IPv4 and 64 for IPv6.")
	fs.Int32Var(&o.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", o.NodeCIDRMaskSizeIPv4,
		"The mask size of IPv4 node CIDRs in a dual-stack cluster. Defaults to 24.")
	fs.Int32Var(&o.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", o.NodeCIDRMaskSizeIPv6,
		"The mask size of IPv6 node CIDRs in a dual-stack cluster. Defaults to 64.")
}

// ApplyTo copies the options into cfg, splitting the service range into
// primary and secondary.
func (o *NodeIPAMControllerOptions) ApplyTo(cfg *kcmconfig.NodeIPAMControllerConfiguration) error {
	if o == nil {
		return nil
	}
	ranges := strings.Split(o.ServiceCIDR, ",")
	cfg.ServiceCIDR = ranges[0]
	if len(ranges) > 1 {
		cfg.SecondaryServiceCIDR = ranges[1]
	}
	cfg.NodeCIDRMaskSize = o.NodeCIDRMaskSize
	cfg.NodeCIDRMaskSizeIPv4 = o.NodeCIDRMaskSizeIPv4
	cfg.NodeCIDRMaskSizeIPv6 = o.NodeCIDRMaskSizeIPv6
	return nil
}

// Validate allows at most two service ranges.
func (o *NodeIPAMControllerOptions) Validate() []error {
	if o == nil {
		return nil
	}
	if len(strings.Split(o.ServiceCIDR, ",")) > 2 {
		return []error{fmt.Errorf("--service-cluster-ip-range can hold at most two ranges, got %q", o.ServiceCIDR)}
	}
	return nil
}
