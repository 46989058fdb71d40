package nodeipam

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
)

// The --cidr-allocator-type values upstream knows. Only RangeAllocator
// works in kube-controller-manager; the others need a cloud provider.
const (
	RangeAllocatorType           = "RangeAllocator"
	CloudAllocatorType           = "CloudAllocator"
	IPAMFromClusterAllocatorType = "IPAMFromCluster"
	IPAMFromCloudAllocatorType   = "IPAMFromCloud"
)

// Default node CIDR mask sizes when no --node-cidr-mask-size* flag is set.
const (
	defaultNodeMaskSizeIPv4 = 24
	defaultNodeMaskSizeIPv6 = 64
)

// Options are the raw settings the controller reads, as the flags give
// them. The caller only builds the controller when --allocate-node-cidrs
// is true.
type Options struct {
	// CIDRAllocatorType is --cidr-allocator-type.
	CIDRAllocatorType string
	// ClusterCIDR is --cluster-cidr: one CIDR, or an IPv4 and an IPv6 one
	// separated by a comma.
	ClusterCIDR string
	// ServiceCIDR and SecondaryServiceCIDR are the first and second entries
	// of --service-cluster-ip-range.
	ServiceCIDR          string
	SecondaryServiceCIDR string
	// NodeCIDRMaskSize* are --node-cidr-mask-size, -ipv4 and -ipv6; zero
	// means unset.
	NodeCIDRMaskSize     int32
	NodeCIDRMaskSizeIPv4 int32
	NodeCIDRMaskSizeIPv6 int32
}

// Config is what the controller is built from.
type Config struct {
	// AllocatorType is the --cidr-allocator-type value.
	AllocatorType string
	// ClusterCIDRs holds one CIDR, or one per IP family.
	ClusterCIDRs []*net.IPNet
	// ServiceCIDR and SecondaryServiceCIDR, when set, are kept out of the
	// node CIDRs of the cluster CIDR they overlap.
	ServiceCIDR          *net.IPNet
	SecondaryServiceCIDR *net.IPNet
	// NodeCIDRMaskSizes holds the node mask size of each cluster CIDR, by
	// index.
	NodeCIDRMaskSizes []int
}

// NewConfig validates the flags the way kube-controller-manager does before
// building the controller, with the same error texts. A service range that
// does not parse is logged and ignored, as upstream.
func NewConfig(logger klog.Logger, o Options) (Config, error) {
	if o.CIDRAllocatorType == CloudAllocatorType {
		return Config{}, errors.New("--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured")
	}
	clusterCIDRs, err := parseClusterCIDRs(o.ClusterCIDR)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{
		AllocatorType:        o.CIDRAllocatorType,
		ClusterCIDRs:         clusterCIDRs,
		ServiceCIDR:          parseServiceCIDR(logger, o.ServiceCIDR),
		SecondaryServiceCIDR: parseServiceCIDR(logger, o.SecondaryServiceCIDR),
	}
	if cfg.ServiceCIDR != nil && cfg.SecondaryServiceCIDR != nil {
		dual, err := netutils.IsDualStackCIDRs([]*net.IPNet{cfg.ServiceCIDR, cfg.SecondaryServiceCIDR})
		if err != nil {
			return Config{}, fmt.Errorf("failed to perform dualstack check on serviceCIDR and secondaryServiceCIDR error: %w", err)
		}
		if !dual {
			return Config{}, errors.New("serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)")
		}
	}
	cfg.NodeCIDRMaskSizes, err = nodeCIDRMaskSizes(o, clusterCIDRs)
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// parseClusterCIDRs accepts one CIDR or a dual-stack pair.
func parseClusterCIDRs(s string) ([]*net.IPNet, error) {
	cidrs, err := netutils.ParseCIDRs(strings.Split(strings.TrimSpace(s), ","))
	if err != nil {
		return nil, err
	}
	// Every entry parsed, so the family check cannot fail.
	dual, _ := netutils.IsDualStackCIDRs(cidrs)
	if len(cidrs) > 1 && !dual {
		return nil, fmt.Errorf("len of ClusterCIDRs==%v and they are not configured as dual stack (at least one from each IPFamily", len(cidrs))
	}
	if len(cidrs) > 2 {
		return nil, fmt.Errorf("length of clusterCIDRs is:%v more than max allowed of 2", len(cidrs))
	}
	return cidrs, nil
}

func parseServiceCIDR(logger klog.Logger, s string) *net.IPNet {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	_, cidr, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		logger.Info("Warning: unsuccessful parsing of service CIDR", "CIDR", s, "err", err)
		return nil
	}
	return cidr
}

// nodeCIDRMaskSizes picks the node mask size of each cluster CIDR. Dual
// stack takes only the per-family flags; single stack takes either the
// plain flag or the flag of its own family.
func nodeCIDRMaskSizes(o Options, clusterCIDRs []*net.IPNet) ([]int, error) {
	ipv4, ipv6 := defaultNodeMaskSizeIPv4, defaultNodeMaskSizeIPv6
	byFamily := func() []int {
		sizes := make([]int, len(clusterCIDRs))
		for i, cidr := range clusterCIDRs {
			sizes[i] = ipv4
			if netutils.IsIPv6CIDR(cidr) {
				sizes[i] = ipv6
			}
		}
		return sizes
	}

	if len(clusterCIDRs) > 1 {
		if o.NodeCIDRMaskSize != 0 {
			return nil, errors.New("usage of --node-cidr-mask-size is not allowed with dual-stack clusters")
		}
		if o.NodeCIDRMaskSizeIPv4 != 0 {
			ipv4 = int(o.NodeCIDRMaskSizeIPv4)
		}
		if o.NodeCIDRMaskSizeIPv6 != 0 {
			ipv6 = int(o.NodeCIDRMaskSizeIPv6)
		}
		return byFamily(), nil
	}

	if o.NodeCIDRMaskSize != 0 {
		if o.NodeCIDRMaskSizeIPv4 != 0 || o.NodeCIDRMaskSizeIPv6 != 0 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags")
		}
		ipv4, ipv6 = int(o.NodeCIDRMaskSize), int(o.NodeCIDRMaskSize)
		return byFamily(), nil
	}
	singleStackIPv6 := netutils.IsIPv6CIDR(clusterCIDRs[0])
	if o.NodeCIDRMaskSizeIPv4 != 0 {
		if singleStackIPv6 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster")
		}
		ipv4 = int(o.NodeCIDRMaskSizeIPv4)
	}
	if o.NodeCIDRMaskSizeIPv6 != 0 {
		if !singleStackIPv6 {
			return nil, errors.New("usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster")
		}
		ipv6 = int(o.NodeCIDRMaskSizeIPv6)
	}
	return byFamily(), nil
}
