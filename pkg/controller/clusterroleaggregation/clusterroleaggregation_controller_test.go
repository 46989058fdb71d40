package clusterroleaggregation

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func role(name string, lbls map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}, Rules: rules}
}

func aggregated(name string, selectors []map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	r := role(name, nil, rules)
	r.AggregationRule = &rbacv1.AggregationRule{}
	for _, s := range selectors {
		r.AggregationRule.ClusterRoleSelectors = append(r.AggregationRule.ClusterRoleSelectors, metav1.LabelSelector{MatchLabels: s})
	}
	return r
}

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func TestSyncClusterRole(t *testing.T) {
	tests := []struct {
		name  string
		roles []*rbacv1.ClusterRole
		sync  string
		// wantRules nil means no write is expected.
		wantRules []rbacv1.PolicyRule
		wantWrite bool
	}{
		{
			name:  "missing role",
			roles: []*rbacv1.ClusterRole{role("a", map[string]string{"x": "y"}, []rbacv1.PolicyRule{rule("get", "pods")})},
			sync:  "combined",
		},
		{
			name:  "role without aggregation rule",
			roles: []*rbacv1.ClusterRole{role("plain", map[string]string{"x": "y"}, nil), role("a", map[string]string{"x": "y"}, []rbacv1.PolicyRule{rule("get", "pods")})},
			sync:  "plain",
		},
		{
			name: "union, ordered by selector then role name, deduplicated, self skipped",
			roles: []*rbacv1.ClusterRole{
				role("b", map[string]string{"foo": "bar"}, []rbacv1.PolicyRule{rule("list", "pods"), rule("get", "pods")}),
				role("a", map[string]string{"foo": "bar"}, []rbacv1.PolicyRule{rule("get", "pods")}),
				role("c", map[string]string{"baz": "qux"}, []rbacv1.PolicyRule{rule("watch", "pods"), rule("list", "pods")}),
				role("unrelated", map[string]string{"other": "x"}, []rbacv1.PolicyRule{rule("delete", "pods")}),
				func() *rbacv1.ClusterRole {
					r := aggregated("combined", []map[string]string{{"baz": "qux"}, {"foo": "bar"}}, nil)
					r.Labels = map[string]string{"foo": "bar"}
					return r
				}(),
			},
			sync:      "combined",
			wantWrite: true,
			wantRules: []rbacv1.PolicyRule{rule("watch", "pods"), rule("list", "pods"), rule("get", "pods")},
		},
		{
			name: "stale rules replaced",
			roles: []*rbacv1.ClusterRole{
				role("a", map[string]string{"foo": "bar"}, []rbacv1.PolicyRule{rule("get", "pods")}),
				aggregated("combined", []map[string]string{{"foo": "bar"}}, []rbacv1.PolicyRule{rule("delete", "secrets")}),
			},
			sync:      "combined",
			wantWrite: true,
			wantRules: []rbacv1.PolicyRule{rule("get", "pods")},
		},
		{
			name: "nothing matches clears rules",
			roles: []*rbacv1.ClusterRole{
				aggregated("combined", []map[string]string{{"foo": "bar"}}, []rbacv1.PolicyRule{rule("delete", "secrets")}),
			},
			sync:      "combined",
			wantWrite: true,
			wantRules: nil,
		},
		{
			name: "no diff, no write",
			roles: []*rbacv1.ClusterRole{
				role("a", map[string]string{"foo": "bar"}, []rbacv1.PolicyRule{rule("get", "pods")}),
				aggregated("combined", []map[string]string{{"foo": "bar"}}, []rbacv1.PolicyRule{rule("get", "pods")}),
			},
			sync: "combined",
		},
		{
			name: "empty and nil rules are equal",
			roles: []*rbacv1.ClusterRole{
				aggregated("combined", []map[string]string{{"foo": "bar"}}, nil),
			},
			sync: "combined",
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			var objs []runtime.Object
			for _, r := range tc.roles {
				objs = append(objs, r)
				if err := indexer.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			client := fake.NewClientset(objs...)
			// The object tracker cannot apply; the controller ignores the result.
			client.PrependReactor("patch", "clusterroles", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, nil
			})
			c := &Controller{
				clusterRoleClient: client.RbacV1(),
				clusterRoleLister: rbaclisters.NewClusterRoleLister(indexer),
			}
			if err := c.syncClusterRole(context.Background(), tc.sync); err != nil {
				t.Fatal(err)
			}
			actions := client.Actions()
			if !tc.wantWrite {
				if len(actions) != 0 {
					t.Fatalf("unexpected actions: %v", actions)
				}
				return
			}
			if len(actions) != 1 {
				t.Fatalf("want 1 action, got %v", actions)
			}
			patch, ok := actions[0].(clienttesting.PatchAction)
			if !ok || !actions[0].Matches("patch", "clusterroles") {
				t.Fatalf("unexpected action %#v", actions[0])
			}
			if patch.GetPatchType() != types.ApplyPatchType {
				t.Errorf("patch type %q, want apply", patch.GetPatchType())
			}
			if patch.GetName() != tc.sync {
				t.Errorf("patched %q, want %q", patch.GetName(), tc.sync)
			}
			var got rbacv1.ClusterRole
			if err := json.Unmarshal(patch.GetPatch(), &got); err != nil {
				t.Fatal(err)
			}
			if got.Kind != "ClusterRole" || got.APIVersion != "rbac.authorization.k8s.io/v1" {
				t.Errorf("bad type meta %v", got.TypeMeta)
			}
			if !equality.Semantic.DeepEqual(got.Rules, tc.wantRules) {
				t.Errorf("rules = %v, want %v", got.Rules, tc.wantRules)
			}
		})
	}
}

func TestApplyOptions(t *testing.T) {
	client := fake.NewClientset()
	var opts metav1.PatchOptions
	client.PrependReactor("patch", "clusterroles", func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts = a.(clienttesting.PatchActionImpl).PatchOptions
		return true, nil, nil
	})
	c := &Controller{clusterRoleClient: client.RbacV1()}
	if err := c.applyRules(context.Background(), "x", []rbacv1.PolicyRule{rule("get", "pods")}); err != nil {
		t.Fatal(err)
	}
	if opts.FieldManager != "clusterrole-aggregation-controller" || opts.Force == nil || !*opts.Force {
		t.Errorf("unexpected options %+v", opts)
	}
}

func TestEventsEnqueueOnlyAggregatedRoles(t *testing.T) {
	client := fake.NewClientset(
		role("a", map[string]string{"foo": "bar"}, nil),
		aggregated("agg1", []map[string]string{{"foo": "bar"}}, nil),
		aggregated("agg2", []map[string]string{{"x": "y"}}, nil),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(factory.Rbac().V1().ClusterRoles(), client.RbacV1())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	factory.WaitForCacheSync(ctx.Done())

	// Every add event requeues all aggregated roles; the queue dedups.
	deadline := time.Now().Add(5 * time.Second)
	for c.queue.Len() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := map[string]bool{}
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		got[k] = true
		c.queue.Done(k)
	}
	if !got["agg1"] || !got["agg2"] || len(got) != 2 {
		t.Fatalf("queued %v, want agg1 and agg2", got)
	}
	c.queue.ShutDown()
}

func TestRunAggregates(t *testing.T) {
	client := fake.NewClientset(
		role("a", map[string]string{"foo": "bar"}, []rbacv1.PolicyRule{rule("get", "pods")}),
		aggregated("agg", []map[string]string{{"foo": "bar"}}, nil),
	)
	applied := make(chan string, 10)
	client.PrependReactor("patch", "clusterroles", func(a clienttesting.Action) (bool, runtime.Object, error) {
		applied <- a.(clienttesting.PatchAction).GetName()
		return true, nil, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	c := NewController(factory.Rbac().V1().ClusterRoles(), client.RbacV1())
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	select {
	case name := <-applied:
		if name != "agg" {
			t.Errorf("applied %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Error("no apply")
	}
	cancel()
	<-done
	factory.Shutdown()
}
