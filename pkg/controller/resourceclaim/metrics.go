package resourceclaim

import (
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The subsystem is shared with kube-scheduler, which creates claims too.
const metricsSubsystem = "dynamic_resource_allocation"

// Values of the "source" label of dynamic_resource_allocation_resource_claims.
const (
	sourceTemplate         = "resource_claim_template"
	sourceExtendedResource = "extended_resource"
)

var (
	// claimCreates counts ResourceClaim create requests by outcome, admin
	// access and owner (Pod, or scheduling.k8s.io PodGroup).
	claimCreates = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "resourceclaim_creates_total",
		Help:           "Number of ResourceClaims creation requests, categorized by creation status, admin access, and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
		StabilityLevel: metrics.ALPHA,
	}, []string{"status", "admin_access", "owner_api_group", "owner_api_kind"})

	// numClaimsDesc describes the gauge the claim collector computes from
	// the informer cache at scrape time.
	numClaimsDesc = metrics.NewDesc(
		metrics.BuildFQName("", metricsSubsystem, "resource_claims"),
		"Number of ResourceClaims, categorized by allocation status, admin access, and source. "+
			"Source can be 'resource_claim_template' (created from a template), "+
			"'extended_resource' (extended resources), or empty (manually created by a user).",
		[]string{"allocated", "admin_access", "source"}, nil,
		metrics.ALPHA, "")

	registerCounterOnce   sync.Once
	registerCollectorOnce sync.Once
)

// registerMetrics adds the metrics to the legacy registry the app serves.
// Only the first controller's cache backs the gauge (there is one per process).
func registerMetrics(collector metrics.StableCollector) {
	registerCounterOnce.Do(func() {
		legacyregistry.MustRegister(claimCreates)
	})
	registerCollectorOnce.Do(func() {
		legacyregistry.CustomMustRegister(collector)
	})
}

// adminAccessLabel is "true" when a top-level request of the claim asks
// for admin access (subrequests of firstAvailable cannot).
func adminAccessLabel(claim *resourceapi.ResourceClaim) string {
	if claim == nil {
		return "false"
	}
	for _, request := range claim.Spec.Devices.Requests {
		if request.Exactly != nil && ptr.Deref(request.Exactly.AdminAccess, false) {
			return "true"
		}
	}
	return "false"
}

// ownerLabels returns the API group and kind of the claim's controller.
func ownerLabels(claim *resourceapi.ResourceClaim) (group, kind string) {
	owner := metav1.GetControllerOfNoCopy(claim)
	if owner == nil {
		return "", ""
	}
	if g, _, found := strings.Cut(owner.APIVersion, "/"); found {
		group = g
	}
	return group, owner.Kind
}

// countCreate records the outcome ("success" or "failure") of creating claim.
func countCreate(claim *resourceapi.ResourceClaim, status string) {
	group, kind := ownerLabels(claim)
	claimCreates.WithLabelValues(status, adminAccessLabel(claim), group, kind).Inc()
}

// claimCollector reports dynamic_resource_allocation_resource_claims.
type claimCollector struct {
	metrics.BaseStableCollector
	lister resourcelisters.ResourceClaimLister
	logger klog.Logger
}

var _ metrics.StableCollector = &claimCollector{}

func (c *claimCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- numClaimsDesc
}

type claimCountKey struct {
	allocated, adminAccess, source string
}

func (c *claimCollector) CollectWithStability(ch chan<- metrics.Metric) {
	claims, err := c.lister.List(labels.Everything())
	if err != nil {
		c.logger.Error(err, "failed to list resource claims for metrics collection")
		return
	}
	counts := map[claimCountKey]int{}
	for _, claim := range claims {
		key := claimCountKey{allocated: "false", adminAccess: adminAccessLabel(claim)}
		if claim.Status.Allocation != nil {
			key.allocated = "true"
		}
		if claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true" {
			key.source = sourceExtendedResource
		} else if claim.Annotations[resourceapi.PodResourceClaimAnnotation] != "" {
			key.source = sourceTemplate
		}
		counts[key]++
	}
	for key, n := range counts {
		ch <- metrics.NewLazyConstMetric(numClaimsDesc, metrics.GaugeValue, float64(n), key.allocated, key.adminAccess, key.source)
	}
}
