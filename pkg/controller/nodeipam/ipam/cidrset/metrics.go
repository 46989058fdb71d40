package cidrset

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const nodeIpamSubsystem = "node_ipam_controller"

// The names, help texts and buckets are upstream's, misspellings included
// ("cirdset", the histogram's help), since dashboards key on them.
var (
	cidrSetAllocations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      nodeIpamSubsystem,
		Name:           "cidrset_cidrs_allocations_total",
		Help:           "Counter measuring total number of CIDR allocations.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"clusterCIDR"})

	cidrSetReleases = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      nodeIpamSubsystem,
		Name:           "cidrset_cidrs_releases_total",
		Help:           "Counter measuring total number of CIDR releases.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"clusterCIDR"})

	cidrSetMaxCidrs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      nodeIpamSubsystem,
		Name:           "cirdset_max_cidrs",
		Help:           "Maximum number of CIDRs that can be allocated.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"clusterCIDR"})

	cidrSetUsage = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      nodeIpamSubsystem,
		Name:           "cidrset_usage_cidrs",
		Help:           "Gauge measuring percentage of allocated CIDRs.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"clusterCIDR"})

	cidrSetAllocationTriesPerRequest = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      nodeIpamSubsystem,
		Name:           "cidrset_allocation_tries_per_request",
		Help:           "Number of endpoints added on each Service sync",
		StabilityLevel: metrics.ALPHA,
		Buckets:        metrics.ExponentialBuckets(1, 5, 5),
	}, []string{"clusterCIDR"})

	registerOnce sync.Once
)

// registerCidrsetMetrics adds the metrics to the legacy registry the
// controller manager serves; the first CidrSet does it.
func registerCidrsetMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(cidrSetAllocations, cidrSetReleases, cidrSetMaxCidrs, cidrSetUsage, cidrSetAllocationTriesPerRequest)
	})
}
