// Package clusterroleaggregation implements the
// clusterrole-aggregation-controller: every ClusterRole carrying an
// aggregationRule has its rules replaced by the union of the rules of the
// ClusterRoles its selectors match.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	rbacclient "k8s.io/client-go/kubernetes/typed/rbac/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// queueName labels the workqueue metrics, as upstream names it.
	queueName = "ClusterRoleAggregator"
	// FieldManager owns the aggregated rules written by server-side apply.
	FieldManager = "clusterrole-aggregation-controller"
)

// Controller fills aggregated ClusterRoles. Its queue
// holds the names of ClusterRoles that have an aggregationRule.
type Controller struct {
	clusterRoleClient  rbacclient.ClusterRolesGetter
	clusterRoleLister  rbaclisters.ClusterRoleLister
	clusterRolesSynced cache.InformerSynced

	queue workqueue.TypedRateLimitingInterface[string]
	loop  controller.WorkLoop[string]

	// syncHandler is syncClusterRole; tests replace it.
	syncHandler func(ctx context.Context, key string) error
}

// NewController wires the controller to the ClusterRole informer.
func NewController(clusterRoleInformer rbacinformers.ClusterRoleInformer, clusterRoleClient rbacclient.ClusterRolesGetter) *Controller {
	c := &Controller{
		clusterRoleClient:  clusterRoleClient,
		clusterRoleLister:  clusterRoleInformer.Lister(),
		clusterRolesSynced: clusterRoleInformer.Informer().HasSynced,
		queue:              controller.NewNamedQueue(queueName),
	}
	c.syncHandler = c.syncClusterRole
	c.loop = controller.WorkLoop[string]{
		Name:  queueName,
		Queue: c.queue,
		Sync:  func(ctx context.Context, key string) error { return c.syncHandler(ctx, key) },
	}

	// Any change to any ClusterRole may change what some aggregated role
	// should contain, and the dependency graph is unknown, so every event
	// requeues every aggregated role. The set of ClusterRoles is small.
	_, _ = clusterRoleInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { c.enqueueAll() },
		UpdateFunc: func(interface{}, interface{}) { c.enqueueAll() },
		DeleteFunc: func(interface{}) { c.enqueueAll() },
	})
	return c
}

// Run waits for the cache and aggregates with workers goroutines until ctx
// is cancelled. The controller manager runs five workers.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	c.loop.Run(ctx, workers, c.clusterRolesSynced)
}

// enqueueAll queues every ClusterRole that has an aggregationRule.
func (c *Controller) enqueueAll() {
	roles, err := c.clusterRoleLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("listing ClusterRoles: %w", err))
		return
	}
	for _, role := range roles {
		if role.AggregationRule == nil {
			continue
		}
		c.queue.Add(role.Name)
	}
}

// syncClusterRole recomputes the rules of one aggregated ClusterRole from
// the cache and applies them when they differ from what it holds.
func (c *Controller) syncClusterRole(ctx context.Context, key string) error {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	role, err := c.clusterRoleLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}

	rules, err := c.aggregatedRules(role)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	return c.applyRules(ctx, role.Name, rules)
}

// aggregatedRules walks the selectors in order; for each, the matching
// ClusterRoles (other than role itself) in name order; for each, its rules
// in order, keeping only the first occurrence of each distinct rule. The
// result is never nil, so an aggregated role with nothing to aggregate is
// written with an empty rule list.
func (c *Controller) aggregatedRules(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		matched, err := c.clusterRoleLister.List(selector)
		if err != nil {
			return nil, err
		}
		matched = slices.Clone(matched)
		slices.SortFunc(matched, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
		for _, m := range matched {
			if m.Name == role.Name {
				continue
			}
			for _, rule := range m.Rules {
				if !containsRule(rules, rule) {
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, rule rbacv1.PolicyRule) bool {
	for i := range rules {
		if equality.Semantic.DeepEqual(rules[i], rule) {
			return true
		}
	}
	return false
}

// applyRules writes the rules with server-side apply, forcing ownership of
// the rules field to FieldManager.
func (c *Controller) applyRules(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	cfg := rbacv1ac.ClusterRole(name).WithRules(policyRuleConfigs(rules)...)
	_, err := c.clusterRoleClient.ClusterRoles().Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

func policyRuleConfigs(rules []rbacv1.PolicyRule) []*rbacv1ac.PolicyRuleApplyConfiguration {
	out := make([]*rbacv1ac.PolicyRuleApplyConfiguration, 0, len(rules))
	for _, r := range rules {
		cfg := rbacv1ac.PolicyRule()
		cfg.Verbs = r.Verbs
		cfg.APIGroups = r.APIGroups
		cfg.Resources = r.Resources
		cfg.ResourceNames = r.ResourceNames
		cfg.NonResourceURLs = r.NonResourceURLs
		out = append(out, cfg)
	}
	return out
}
