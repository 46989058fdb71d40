package util

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
)

// RequiredNodeAffinity is a pod's hard placement constraint, parsed once:
// its nodeSelector and its required node affinity terms. The scheduler
// evaluates these the same way, so a node matching here is one the
// scheduler can bind the daemon pod to.
type RequiredNodeAffinity struct {
	// nodeSelector is nil when the pod has none.
	nodeSelector labels.Selector
	// terms is nil when the pod has no required node affinity; non-nil
	// (possibly empty) otherwise.
	terms *[]nodeSelectorTerm
}

// nodeSelectorTerm is one parsed term; terms are ORed, requirements inside
// a term ANDed.
type nodeSelectorTerm struct {
	matchLabels labels.Selector // nil: no label requirements
	matchFields fields.Selector // nil: no field requirements
	errs        []error
}

// NewRequiredNodeAffinity parses nodeSelector and the required part of
// affinity. Bad terms are remembered, not reported: like the scheduler, a
// bad term only matters when no other term matches.
func NewRequiredNodeAffinity(nodeSelector map[string]string, affinity *v1.Affinity) RequiredNodeAffinity {
	var r RequiredNodeAffinity
	if len(nodeSelector) > 0 {
		r.nodeSelector = labels.SelectorFromSet(nodeSelector)
	}
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return r
	}
	terms := []nodeSelectorTerm{}
	for _, t := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		// A term without requirements selects nothing; skip it.
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue
		}
		terms = append(terms, parseTerm(t))
	}
	r.terms = &terms
	return r
}

func parseTerm(t v1.NodeSelectorTerm) nodeSelectorTerm {
	var out nodeSelectorTerm
	if len(t.MatchExpressions) > 0 {
		sel := labels.NewSelector()
		for _, e := range t.MatchExpressions {
			op, ok := labelOperators[e.Operator]
			if !ok {
				out.errs = append(out.errs, fmt.Errorf("matchExpressions: unsupported operator %q", e.Operator))
				continue
			}
			req, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				out.errs = append(out.errs, err)
				continue
			}
			sel = sel.Add(*req)
		}
		out.matchLabels = sel
	}
	if len(t.MatchFields) > 0 {
		var sels []fields.Selector
		for _, e := range t.MatchFields {
			if len(e.Values) != 1 {
				out.errs = append(out.errs, fmt.Errorf("matchFields %q: must have exactly one value", e.Key))
				continue
			}
			switch e.Operator {
			case v1.NodeSelectorOpIn:
				sels = append(sels, fields.OneTermEqualSelector(e.Key, e.Values[0]))
			case v1.NodeSelectorOpNotIn:
				sels = append(sels, fields.OneTermNotEqualSelector(e.Key, e.Values[0]))
			default:
				out.errs = append(out.errs, fmt.Errorf("matchFields: unsupported operator %q", e.Operator))
			}
		}
		out.matchFields = fields.AndSelectors(sels...)
	}
	return out
}

var labelOperators = map[v1.NodeSelectorOperator]selection.Operator{
	v1.NodeSelectorOpIn:           selection.In,
	v1.NodeSelectorOpNotIn:        selection.NotIn,
	v1.NodeSelectorOpExists:       selection.Exists,
	v1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	v1.NodeSelectorOpGt:           selection.GreaterThan,
	v1.NodeSelectorOpLt:           selection.LessThan,
}

// Match reports whether node satisfies both the nodeSelector and one of
// the required terms. The error lists the bad terms and is only returned
// when nothing matched.
func (r RequiredNodeAffinity) Match(node *v1.Node) (bool, error) {
	if r.nodeSelector != nil && !r.nodeSelector.Matches(labels.Set(node.Labels)) {
		return false, nil
	}
	if r.terms == nil {
		return true, nil
	}
	nodeLabels := labels.Set(node.Labels)
	// metadata.name is the only node field selectors may use.
	nodeFields := fields.Set{}
	if node.Name != "" {
		nodeFields[metav1.ObjectNameField] = node.Name
	}
	var errs []error
	for _, t := range *r.terms {
		if len(t.errs) > 0 {
			errs = append(errs, t.errs...)
			continue
		}
		if t.matchLabels != nil && !t.matchLabels.Matches(nodeLabels) {
			continue
		}
		if t.matchFields != nil && len(nodeFields) > 0 && !t.matchFields.Matches(nodeFields) {
			continue
		}
		return true, nil
	}
	return false, utilerrors.NewAggregate(errs)
}

// TaintFilter selects the taints a check cares about.
type TaintFilter func(*v1.Taint) bool

// FindMatchingUntoleratedTaint returns the first taint passing filter (all
// taints when filter is nil) that no toleration tolerates, and whether
// there is one. enableComparisonOperators is the
// TaintTolerationComparisonOperators feature: without it Lt and Gt
// tolerations tolerate nothing.
func FindMatchingUntoleratedTaint(logger klog.Logger, taints []v1.Taint, tolerations []v1.Toleration, filter TaintFilter, enableComparisonOperators bool) (v1.Taint, bool) {
	for i := range taints {
		taint := &taints[i]
		if filter != nil && !filter(taint) {
			continue
		}
		if !TolerationsTolerateTaint(logger, tolerations, taint, enableComparisonOperators) {
			return *taint, true
		}
	}
	return v1.Taint{}, false
}

// TolerationsTolerateTaint reports whether any toleration tolerates taint.
func TolerationsTolerateTaint(logger klog.Logger, tolerations []v1.Toleration, taint *v1.Taint, enableComparisonOperators bool) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logger, taint, enableComparisonOperators) {
			return true
		}
	}
	return false
}
