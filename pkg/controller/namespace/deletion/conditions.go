package deletion

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// managedConditionTypes are the namespace conditions this controller owns,
// in the order upstream appends them to a namespace's status.
var managedConditionTypes = []v1.NamespaceConditionType{
	v1.NamespaceDeletionDiscoveryFailure,
	v1.NamespaceDeletionGVParsingFailure,
	v1.NamespaceDeletionContentFailure,
	v1.NamespaceContentRemaining,
	v1.NamespaceFinalizersRemaining,
}

// healthy is the reason and message of a managed condition whose failure
// did not happen (Status False).
var healthy = map[v1.NamespaceConditionType]struct{ reason, message string }{
	v1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	v1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	v1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	v1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	v1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// conditionCollector gathers what went wrong during one deletion pass and
// turns it into the namespace's managed conditions.
type conditionCollector struct {
	failed        []v1.NamespaceCondition
	contentErrors []error
}

func trueCondition(t v1.NamespaceConditionType, reason, message string) v1.NamespaceCondition {
	return v1.NamespaceCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: reason, Message: message}
}

func (c *conditionCollector) discoveryFailed(err error) {
	msg := err.Error()
	if gerr, ok := err.(*discovery.ErrGroupDiscoveryFailed); ok {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gerr.Groups), err)
	}
	c.failed = append(c.failed, trueCondition(v1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg))
}

func (c *conditionCollector) groupVersionParsingFailed(err error) {
	c.failed = append(c.failed, trueCondition(v1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error()))
}

func (c *conditionCollector) contentDeletionFailed(err error) {
	c.contentErrors = append(c.contentErrors, err)
}

// remaining records what is left after a full pass over every resource.
// Group "" renders as "configmaps." exactly as upstream prints it.
func (c *conditionCollector) remaining(totals remainingContent) {
	if len(totals.byResource) > 0 {
		var parts []string
		for gvr, n := range totals.byResource {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
			}
		}
		sort.Strings(parts) // stable message, so no spurious status writes
		c.failed = append(c.failed, trueCondition(v1.NamespaceContentRemaining, "SomeResourcesRemain",
			"Some resources are remaining: "+strings.Join(parts, ", ")))
	}
	if len(totals.byFinalizer) > 0 {
		var parts []string
		for f, n := range totals.byFinalizer {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
			}
		}
		sort.Strings(parts)
		c.failed = append(c.failed, trueCondition(v1.NamespaceFinalizersRemaining, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(parts, ", ")))
	}
}

// apply writes the collected conditions into ns.Status and reports whether
// anything changed, so callers only call UpdateStatus when needed.
func (c *conditionCollector) apply(ns *v1.Namespace) bool {
	if findCondition(c.failed, v1.NamespaceDeletionContentFailure) == nil && len(c.contentErrors) > 0 {
		msgs := make([]string, 0, len(c.contentErrors))
		for _, e := range c.contentErrors {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		c.failed = append(c.failed, trueCondition(v1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(c.contentErrors), strings.Join(msgs, ", "))))
	}
	return mergeConditions(&ns.Status, c.failed)
}

// mergeConditions sets every managed condition: failed ones as given, the
// rest to their healthy form. LastTransitionTime only moves with Status.
func mergeConditions(status *v1.NamespaceStatus, failed []v1.NamespaceCondition) bool {
	changed := false
	for _, t := range managedConditionTypes {
		want := findCondition(failed, t)
		if want == nil {
			h := healthy[t]
			ok := v1.NamespaceCondition{Type: t, Status: v1.ConditionFalse, LastTransitionTime: metav1.Now(), Reason: h.reason, Message: h.message}
			want = &ok
		}
		have := findCondition(status.Conditions, t)
		switch {
		case have == nil:
			status.Conditions = append(status.Conditions, *want)
			changed = true
		case have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message:
			if have.Status != want.Status {
				have.LastTransitionTime = metav1.Now()
			}
			have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

func findCondition(conds []v1.NamespaceCondition, t v1.NamespaceConditionType) *v1.NamespaceCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
