// Package evaluator measures how much of each quota-tracked resource the
// objects of a namespace use. One Evaluator exists per group/resource:
// pods, services, persistentvolumeclaims and resourceclaims have their own
// accounting; every other resource (configmaps, secrets, deployments.apps,
// custom resources, ...) is an object count, "count/<resource>.<group>".
//
// It holds only what the resourcequota-controller needs: usage, never
// admission (the apiserver's ResourceQuota plugin does that part).
package evaluator

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// UsageStatsOptions selects what UsageStats measures.
type UsageStatsOptions struct {
	// Namespace whose objects are measured.
	Namespace string
	// Scopes every counted object must match (the quota's spec.scopes).
	Scopes []corev1.ResourceQuotaScope
	// Resources to report; each appears in the result, zero if unused.
	Resources []corev1.ResourceName
	// ScopeSelector every counted object must match too.
	ScopeSelector *corev1.ScopeSelector
}

// UsageStats is the measured usage.
type UsageStats struct {
	Used corev1.ResourceList
}

// Evaluator knows one group/resource's quota accounting.
type Evaluator interface {
	// GroupResource is the resource this evaluator measures.
	GroupResource() schema.GroupResource
	// MatchingResources returns the names of input this evaluator can measure.
	MatchingResources(input []corev1.ResourceName) []corev1.ResourceName
	// Usage is what one object is charged.
	Usage(item runtime.Object) (corev1.ResourceList, error)
	// UsageStats sums the usage of a namespace's matching objects.
	UsageStats(options UsageStatsOptions) (UsageStats, error)
}

// Registry holds the evaluators by group/resource. The quota monitor adds
// object-count evaluators as discovery finds resources, so it is safe for
// concurrent use.
type Registry interface {
	Add(e Evaluator)
	Remove(e Evaluator)
	Get(gr schema.GroupResource) Evaluator
	List() []Evaluator
}

type registry struct {
	mu         sync.RWMutex
	evaluators map[schema.GroupResource]Evaluator
}

// NewRegistry returns a registry holding evaluators; a later one for the
// same group/resource replaces an earlier one.
func NewRegistry(evaluators []Evaluator) Registry {
	r := &registry{evaluators: map[schema.GroupResource]Evaluator{}}
	for _, e := range evaluators {
		r.evaluators[e.GroupResource()] = e
	}
	return r
}

func (r *registry) Add(e Evaluator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evaluators[e.GroupResource()] = e
}

func (r *registry) Remove(e Evaluator) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.evaluators, e.GroupResource())
}

func (r *registry) Get(gr schema.GroupResource) Evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.evaluators[gr]
}

func (r *registry) List() []Evaluator {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Evaluator, 0, len(r.evaluators))
	for _, e := range r.evaluators {
		out = append(out, e)
	}
	return out
}

// CalculateUsage measures, in namespace, every resource of hardLimits some
// evaluator in registry can measure, for objects matching scopes and
// scopeSelector. An evaluator that fails has its resources left out of the
// result (and its error returned), so the caller can keep what it knew.
func CalculateUsage(namespace string, scopes []corev1.ResourceQuotaScope, hardLimits corev1.ResourceList, registry Registry, scopeSelector *corev1.ScopeSelector) (corev1.ResourceList, error) {
	hard := ResourceNames(hardLimits)
	evaluators := registry.List()
	var measurable []corev1.ResourceName
	for _, e := range evaluators {
		measurable = append(measurable, e.MatchingResources(hard)...)
	}
	matched := Intersection(hard, measurable)

	var errs []error
	usage := corev1.ResourceList{}
	for _, e := range evaluators {
		mine := e.MatchingResources(matched)
		if len(mine) == 0 {
			continue
		}
		stats, err := e.UsageStats(UsageStatsOptions{Namespace: namespace, Scopes: scopes, Resources: mine, ScopeSelector: scopeSelector})
		if err != nil {
			errs = append(errs, err)
			matched = Difference(matched, mine)
			continue
		}
		usage = Add(usage, stats.Used)
	}
	return Mask(usage, matched), utilerrors.NewAggregate(errs)
}

// ListFuncByNamespace lists the objects of one namespace.
type ListFuncByNamespace func(namespace string) ([]runtime.Object, error)

// MatchesScopeFunc reports whether object falls in a scope.
type MatchesScopeFunc func(scope corev1.ScopedResourceSelectorRequirement, object runtime.Object) (bool, error)

// UsageFunc is what one object is charged.
type UsageFunc func(object runtime.Object) (corev1.ResourceList, error)

// MatchesNoScope is the scope function of resources that have no scopes:
// a scoped quota never counts them.
func MatchesNoScope(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

// CalculateUsageStats sums usageFunc over the namespace's objects that
// match every scope and selector expression of options. Each requested
// resource is present in the result, zero when nothing uses it.
//
// A scope that cannot be evaluated (a malformed selector) ends the count
// without an error, returning what was summed so far, as upstream does.
func CalculateUsageStats(options UsageStatsOptions, listFunc ListFuncByNamespace, scopeFunc MatchesScopeFunc, usageFunc UsageFunc) (UsageStats, error) {
	stats := UsageStats{Used: corev1.ResourceList{}}
	for _, name := range options.Resources {
		stats.Used[name] = resource.Quantity{Format: resource.DecimalSI}
	}
	items, err := listFunc(options.Namespace)
	if err != nil {
		return stats, fmt.Errorf("failed to list content: %w", err)
	}
	selectors := make([]corev1.ScopedResourceSelectorRequirement, 0, len(options.Scopes))
	for _, s := range options.Scopes {
		selectors = append(selectors, corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists})
	}
	if options.ScopeSelector != nil {
		selectors = append(selectors, options.ScopeSelector.MatchExpressions...)
	}
	for _, item := range items {
		matches := true
		for _, sel := range selectors {
			ok, err := scopeFunc(sel, item)
			if err != nil {
				return stats, nil
			}
			matches = matches && ok
		}
		if !matches {
			continue
		}
		usage, err := usageFunc(item)
		if err != nil {
			return stats, err
		}
		stats.Used = Add(stats.Used, usage)
	}
	return stats, nil
}

// scopeSelectorAsLabelSelector turns one scope selector expression into a
// label selector over the key ScopeName, so In/NotIn/Exists/DoesNotExist
// keep their label semantics.
func scopeSelectorAsLabelSelector(req corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	var op selection.Operator
	switch req.Operator {
	case corev1.ScopeSelectorOpIn:
		op = selection.In
	case corev1.ScopeSelectorOpNotIn:
		op = selection.NotIn
	case corev1.ScopeSelectorOpExists:
		op = selection.Exists
	case corev1.ScopeSelectorOpDoesNotExist:
		op = selection.DoesNotExist
	default:
		return nil, fmt.Errorf("%q is not a valid scope selector operator", req.Operator)
	}
	r, err := labels.NewRequirement(string(req.ScopeName), op, req.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}
