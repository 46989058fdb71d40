// Package typecheck type-checks the CEL expressions of
// ValidatingAdmissionPolicies against the schemas of the kinds they match,
// the way the apiserver's type checker does, and reports the problems as
// the policy's status.typeChecking.expressionWarnings.
package typecheck

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
)

// maxTypesToCheck bounds the kinds one resource rule contributes.
const maxTypesToCheck = 10

// TypeChecker checks policies. SchemaResolver finds the schema of a kind
// (of the matched resources and of paramKind); RESTMapper maps the
// matched resources to kinds and is reset at most once per policy when a
// resource is not found, if it can be reset.
type TypeChecker struct {
	SchemaResolver SchemaResolver
	RESTMapper     meta.RESTMapper
}

// NewTypeChecker returns a TypeChecker.
func NewTypeChecker(resolver SchemaResolver, mapper meta.RESTMapper) *TypeChecker {
	return &TypeChecker{SchemaResolver: resolver, RESTMapper: mapper}
}

// Result is the outcome of checking one expression against one kind.
type Result struct {
	GVK schema.GroupVersionKind
	// Issues are the compiler's findings (an invalid expression).
	Issues *cel.Issues
	// Err is a failure to check at all.
	Err error
}

// String is "<gvk>: <issues>\n", or "" when there is nothing to report.
func (r Result) String() string {
	switch {
	case r.Err != nil:
		return fmt.Sprintf("%v: type checking error: %v\n", r.GVK, r.Err)
	case r.Issues != nil:
		return fmt.Sprintf("%v: %s\n", r.GVK, r.Issues.String())
	}
	return ""
}

// Results are the outcomes of checking one expression against every kind.
type Results []Result

// String joins the non-empty results with newlines: the text of an
// ExpressionWarning.
func (rs Results) String() string {
	var parts []string
	for _, r := range rs {
		if s := r.String(); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

// kindEnv pairs a kind with the environment its expressions are checked in.
type kindEnv struct {
	gvk schema.GroupVersionKind
	env *checkEnv
}

// Check type-checks every validation's expression and messageExpression
// and returns one warning per expression with problems, in spec order.
// It returns nil when there is nothing to report. Failing to resolve a
// kind or a schema is never a warning: that kind is skipped, since type
// checking must not change what a policy does.
func (c *TypeChecker) Check(policy *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning {
	envs := c.environments(policy)

	var warnings []admissionregistrationv1.ExpressionWarning
	validations := field.NewPath("spec", "validations")
	add := func(path *field.Path, expression string) {
		if results := checkAll(envs, expression); len(results) > 0 {
			warnings = append(warnings, admissionregistrationv1.ExpressionWarning{
				FieldRef: path.String(),
				Warning:  results.String(),
			})
		}
	}
	for i, v := range policy.Spec.Validations {
		add(validations.Index(i).Child("expression"), v.Expression)
		if v.MessageExpression != "" {
			add(validations.Index(i).Child("messageExpression"), v.MessageExpression)
		}
	}
	return warnings
}

func checkAll(envs []kindEnv, expression string) Results {
	var results Results
	for _, k := range envs {
		if iss := k.env.check(expression); iss != nil {
			results = append(results, Result{GVK: k.gvk, Issues: iss})
		}
	}
	return results
}

// environments resolves the kinds a policy matches and its paramKind, and
// builds for each kind with a schema an environment holding the policy's
// compiled variables.
func (c *TypeChecker) environments(policy *admissionregistrationv1.ValidatingAdmissionPolicy) []kindEnv {
	// Object types first, then params: the order upstream names them in.
	type resolved struct {
		gvk    schema.GroupVersionKind
		object *declType
	}
	var kinds []resolved
	for _, gvk := range c.kindsToCheck(policy) {
		t, err := c.declTypeOf(gvk)
		if err != nil {
			if !errors.Is(err, ErrSchemaNotFound) {
				klog.V(2).ErrorS(err, "internal error: schema resolution failure", "gvk", gvk)
			}
			continue
		}
		kinds = append(kinds, resolved{gvk: gvk, object: t})
	}

	paramGVK := paramKindOf(policy)
	hasParams := !paramGVK.Empty()
	params, err := c.declTypeOf(paramGVK)
	if err != nil {
		if !errors.Is(err, ErrSchemaNotFound) {
			klog.V(2).ErrorS(err, "internal error: cannot resolve schema for params", "gvk", paramGVK)
		}
		params = nil
	}

	envs := make([]kindEnv, 0, len(kinds))
	for _, k := range kinds {
		env, err := newCheckEnv(k.object, params, hasParams)
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("building the CEL environment for %v: %w", k.gvk, err))
			continue
		}
		for _, v := range policy.Spec.Variables {
			env.addVariable(v.Name, v.Expression)
		}
		envs = append(envs, kindEnv{gvk: k.gvk, env: env})
	}
	return envs
}

// declTypeOf resolves a kind's schema into its CEL type. The empty kind
// and a schema CEL cannot see give a nil type (dyn) without error.
func (c *TypeChecker) declTypeOf(gvk schema.GroupVersionKind) (*declType, error) {
	if gvk.Empty() {
		return nil, nil
	}
	s, err := c.SchemaResolver.ResolveSchema(gvk)
	if err != nil {
		return nil, err
	}
	return schemaToDeclType(s, true, typeNameFor(gvk.Kind, time.Now().Nanosecond())), nil
}

// paramKindOf is the kind of the policy's params, empty without paramKind
// or with an unparsable apiVersion.
func paramKindOf(policy *admissionregistrationv1.ValidatingAdmissionPolicy) schema.GroupVersionKind {
	pk := policy.Spec.ParamKind
	if pk == nil {
		return schema.GroupVersionKind{}
	}
	gv, err := schema.ParseGroupVersion(pk.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}
	}
	return gv.WithKind(pk.Kind)
}

// kindsToCheck maps spec.matchConstraints.resourceRules to kinds, sorted by
// group, version and kind. A rule with a wildcard group or version is
// skipped, as are wildcard and subresource entries of resources. Each rule
// contributes at most maxTypesToCheck kinds; reaching that stops the
// search. The RESTMapper is reset at most once per policy on a miss.
func (c *TypeChecker) kindsToCheck(policy *admissionregistrationv1.ValidatingAdmissionPolicy) []schema.GroupVersionKind {
	mc := policy.Spec.MatchConstraints
	if mc == nil || len(mc.ResourceRules) == 0 {
		return nil
	}
	found := sets.New[schema.GroupVersionKind]()
	refreshed := false
	lookup := func(gvr schema.GroupVersionResource) []schema.GroupVersionKind {
		kinds, err := c.RESTMapper.KindsFor(gvr)
		if err == nil {
			return kinds
		}
		if refreshed {
			return nil
		}
		refreshed = true
		if r, ok := c.RESTMapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
		}
		kinds, err = c.RESTMapper.KindsFor(gvr)
		if err != nil {
			return nil
		}
		return kinds
	}

rules:
	for _, rule := range mc.ResourceRules {
		groups, versions, resources := ruleGroups(rule.Rule), ruleVersions(rule.Rule), ruleResources(rule.Rule)
		if len(groups) == 0 || len(versions) == 0 || len(resources) == 0 {
			continue
		}
		count := 0
		for _, g := range groups {
			for _, v := range versions {
				for _, r := range resources {
					for _, k := range lookup(schema.GroupVersionResource{Group: g, Version: v, Resource: r}) {
						if k.Empty() {
							continue
						}
						found.Insert(k)
						count++
						if count == maxTypesToCheck {
							break rules
						}
					}
				}
			}
		}
	}
	if found.Len() == 0 {
		return nil
	}
	return sortedKinds(found.UnsortedList())
}

// ruleGroups are a rule's groups, sorted; nil if any is a wildcard.
func ruleGroups(r admissionregistrationv1.Rule) []string {
	return sortedUnlessWildcard(r.APIGroups)
}

// ruleVersions are a rule's versions, sorted; nil if any is a wildcard.
func ruleVersions(r admissionregistrationv1.Rule) []string {
	return sortedUnlessWildcard(r.APIVersions)
}

func sortedUnlessWildcard(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if strings.Contains(s, "*") {
			return nil
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// ruleResources are a rule's resources without wildcards and
// subresources, sorted.
func ruleResources(r admissionregistrationv1.Rule) []string {
	out := make([]string, 0, len(r.Resources))
	for _, s := range r.Resources {
		if strings.ContainsAny(s, "*/") {
			continue
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func sortedKinds(kinds []schema.GroupVersionKind) []schema.GroupVersionKind {
	sort.Slice(kinds, func(i, j int) bool {
		a, b := kinds[i], kinds[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})
	return kinds
}
