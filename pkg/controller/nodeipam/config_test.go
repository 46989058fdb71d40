package nodeipam

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		wantErr   string
		wantCIDRs string
		wantMasks []int
		wantSvc   string
		wantSvc2  string
	}{
		{name: "cloud allocator", opts: Options{CIDRAllocatorType: "CloudAllocator", ClusterCIDR: "10.0.0.0/16"},
			wantErr: "--cidr-allocator-type is set to 'CloudAllocator' but cloud provider is not configured"},
		{name: "no cluster CIDR", opts: Options{CIDRAllocatorType: RangeAllocatorType},
			wantErr: "invalid CIDR[0]: <nil> (invalid CIDR address: )"},
		{name: "bad cluster CIDR", opts: Options{ClusterCIDR: "10.0.0.0/16,bogus"},
			wantErr: "invalid CIDR[1]: <nil> (invalid CIDR address: bogus)"},
		{name: "two of one family", opts: Options{ClusterCIDR: "10.0.0.0/16,10.1.0.0/16"},
			wantErr: "len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily"},
		{name: "three CIDRs", opts: Options{ClusterCIDR: "10.0.0.0/16,fd00::/48,10.1.0.0/16"},
			wantErr: "length of clusterCIDRs is:3 more than max allowed of 2"},
		{name: "single stack IPv4 defaults", opts: Options{ClusterCIDR: " 10.0.0.0/16 "},
			wantCIDRs: "[10.0.0.0/16]", wantMasks: []int{24}},
		{name: "single stack IPv6 defaults", opts: Options{ClusterCIDR: "fd00::/48"},
			wantCIDRs: "[fd00::/48]", wantMasks: []int{64}},
		{name: "dual stack defaults", opts: Options{ClusterCIDR: "10.0.0.0/16,fd00::/48"},
			wantCIDRs: "[10.0.0.0/16 fd00::/48]", wantMasks: []int{24, 64}},
		{name: "dual stack IPv6 first", opts: Options{ClusterCIDR: "fd00::/48,10.0.0.0/16", NodeCIDRMaskSizeIPv4: 26, NodeCIDRMaskSizeIPv6: 56},
			wantCIDRs: "[fd00::/48 10.0.0.0/16]", wantMasks: []int{56, 26}},
		{name: "dual stack with the plain flag", opts: Options{ClusterCIDR: "10.0.0.0/16,fd00::/48", NodeCIDRMaskSize: 24},
			wantErr: "usage of --node-cidr-mask-size is not allowed with dual-stack clusters"},
		{name: "plain flag IPv4", opts: Options{ClusterCIDR: "10.0.0.0/16", NodeCIDRMaskSize: 20},
			wantCIDRs: "[10.0.0.0/16]", wantMasks: []int{20}},
		{name: "plain flag IPv6", opts: Options{ClusterCIDR: "fd00::/100", NodeCIDRMaskSize: 112},
			wantCIDRs: "[fd00::/100]", wantMasks: []int{112}},
		{name: "plain and family flags", opts: Options{ClusterCIDR: "10.0.0.0/16", NodeCIDRMaskSize: 20, NodeCIDRMaskSizeIPv6: 64},
			wantErr: "usage of --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 is not allowed if --node-cidr-mask-size is set. For dual-stack clusters please unset it and use IPFamily specific flags"},
		{name: "IPv4 flag on IPv4", opts: Options{ClusterCIDR: "10.0.0.0/16", NodeCIDRMaskSizeIPv4: 25},
			wantCIDRs: "[10.0.0.0/16]", wantMasks: []int{25}},
		{name: "IPv4 flag on IPv6", opts: Options{ClusterCIDR: "fd00::/48", NodeCIDRMaskSizeIPv4: 25},
			wantErr: "usage of --node-cidr-mask-size-ipv4 is not allowed for a single-stack IPv6 cluster"},
		{name: "IPv6 flag on IPv6", opts: Options{ClusterCIDR: "fd00::/48", NodeCIDRMaskSizeIPv6: 60},
			wantCIDRs: "[fd00::/48]", wantMasks: []int{60}},
		{name: "IPv6 flag on IPv4", opts: Options{ClusterCIDR: "10.0.0.0/16", NodeCIDRMaskSizeIPv6: 60},
			wantErr: "usage of --node-cidr-mask-size-ipv6 is not allowed for a single-stack IPv4 cluster"},
		{name: "service ranges", opts: Options{ClusterCIDR: "10.0.0.0/16", ServiceCIDR: "10.96.0.0/12", SecondaryServiceCIDR: "fd00:96::/112"},
			wantCIDRs: "[10.0.0.0/16]", wantMasks: []int{24}, wantSvc: "10.96.0.0/12", wantSvc2: "fd00:96::/112"},
		{name: "unparsable service range is ignored", opts: Options{ClusterCIDR: "10.0.0.0/16", ServiceCIDR: "bogus", SecondaryServiceCIDR: "  "},
			wantCIDRs: "[10.0.0.0/16]", wantMasks: []int{24}},
		{name: "service ranges of one family", opts: Options{ClusterCIDR: "10.0.0.0/16", ServiceCIDR: "10.96.0.0/12", SecondaryServiceCIDR: "10.112.0.0/12"},
			wantErr: "serviceCIDR and secondaryServiceCIDR are not dualstack (from different IPfamiles)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			cfg, err := NewConfig(logger, tc.opts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(cfg.ClusterCIDRs); got != tc.wantCIDRs {
				t.Errorf("cluster CIDRs %s, want %s", got, tc.wantCIDRs)
			}
			if fmt.Sprint(cfg.NodeCIDRMaskSizes) != fmt.Sprint(tc.wantMasks) {
				t.Errorf("mask sizes %v, want %v", cfg.NodeCIDRMaskSizes, tc.wantMasks)
			}
			if got := cidrString(cfg.ServiceCIDR); got != tc.wantSvc {
				t.Errorf("service CIDR %q, want %q", got, tc.wantSvc)
			}
			if got := cidrString(cfg.SecondaryServiceCIDR); got != tc.wantSvc2 {
				t.Errorf("secondary service CIDR %q, want %q", got, tc.wantSvc2)
			}
			if cfg.AllocatorType != tc.opts.CIDRAllocatorType {
				t.Errorf("allocator type %q", cfg.AllocatorType)
			}
		})
	}
}
