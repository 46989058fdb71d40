package evaluator

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEquals(t *testing.T) {
	cases := []struct {
		a, b corev1.ResourceList
		want bool
	}{
		{rl("cpu", "1"), rl("cpu", "1000m"), true},
		{rl("cpu", "1"), rl("cpu", "2"), false},
		{rl("cpu", "1"), rl("memory", "1"), false},
		{rl("cpu", "1"), rl("cpu", "1", "memory", "1"), false},
		{nil, corev1.ResourceList{}, true},
	}
	for i, c := range cases {
		if got := Equals(c.a, c.b); got != c.want {
			t.Errorf("case %d: Equals(%s, %s) = %v", i, show(c.a), show(c.b), got)
		}
	}
}

func TestAddDoesNotAliasInputs(t *testing.T) {
	a, b := rl("cpu", "1", "pods", "1"), rl("cpu", "500m", "memory", "1Gi")
	sum := Add(a, b)
	expectList(t, "sum", sum, rl("cpu", "1500m", "pods", "1", "memory", "1Gi"))
	expectList(t, "a after Add", a, rl("cpu", "1", "pods", "1"))
	expectList(t, "b after Add", b, rl("cpu", "500m", "memory", "1Gi"))
}

func TestMaskKeepsOnlyNamed(t *testing.T) {
	got := Mask(rl("cpu", "1", "memory", "1Gi", "pods", "2"), names("cpu", "pods", "secrets"))
	expectList(t, "masked", got, rl("cpu", "1", "pods", "2"))
}

func TestIntersectionAndDifferenceAreSortedAndDistinct(t *testing.T) {
	a := names("pods", "cpu", "pods", "memory", "secrets")
	b := names("memory", "pods", "configmaps")
	if got, want := Intersection(a, b), names("memory", "pods"); !reflect.DeepEqual(got, want) {
		t.Errorf("Intersection = %v, want %v", got, want)
	}
	if got, want := Difference(a, b), names("cpu", "secrets"); !reflect.DeepEqual(got, want) {
		t.Errorf("Difference = %v, want %v", got, want)
	}
}

func TestObjectCountQuotaResourceNameFor(t *testing.T) {
	if got := ObjectCountQuotaResourceNameFor(schema.GroupResource{Resource: "secrets"}); got != "count/secrets" {
		t.Errorf("core group: %q", got)
	}
	if got := ObjectCountQuotaResourceNameFor(schema.GroupResource{Group: "apps", Resource: "deployments"}); got != "count/deployments.apps" {
		t.Errorf("named group: %q", got)
	}
}

func TestObjectCountEvaluator(t *testing.T) {
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	l := fakeListers{}
	l.add(t, gvr,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "c"}},
	)
	e := NewObjectCountEvaluator(gvr.GroupResource(), ListResourceUsingListerFunc(l.lister, gvr), corev1.ResourceSecrets)
	if got, want := e.MatchingResources(names("secrets", "count/secrets", "pods")), names("count/secrets", "secrets"); !reflect.DeepEqual(got, want) {
		t.Errorf("MatchingResources = %v, want %v", got, want)
	}
	stats, err := e.UsageStats(UsageStatsOptions{Namespace: "ns", Resources: names("secrets", "count/secrets")})
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, "used", stats.Used, rl("secrets", "2", "count/secrets", "2"))

	// Object counts have no scopes, so a scoped quota counts none of them.
	stats, err = e.UsageStats(UsageStatsOptions{Namespace: "ns", Resources: names("secrets"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}})
	if err != nil {
		t.Fatal(err)
	}
	expectList(t, "scoped used", stats.Used, rl("secrets", "0"))

	// Without an alias only the count/ name is measured.
	plain := NewObjectCountEvaluator(schema.GroupResource{Group: "apps", Resource: "deployments"}, nil, "")
	if got := plain.MatchingResources(names("deployments", "count/deployments.apps")); !reflect.DeepEqual(got, names("count/deployments.apps")) {
		t.Errorf("plain MatchingResources = %v", got)
	}
}

// stubEvaluator measures fixed resources with fixed usage or an error.
type stubEvaluator struct {
	gr        schema.GroupResource
	resources []corev1.ResourceName
	used      corev1.ResourceList
	err       error
	got       *UsageStatsOptions
}

func (s *stubEvaluator) GroupResource() schema.GroupResource { return s.gr }
func (s *stubEvaluator) MatchingResources(in []corev1.ResourceName) []corev1.ResourceName {
	return Intersection(in, s.resources)
}
func (s *stubEvaluator) Usage(runtime.Object) (corev1.ResourceList, error) { return nil, nil }
func (s *stubEvaluator) UsageStats(o UsageStatsOptions) (UsageStats, error) {
	s.got = &o
	if s.err != nil {
		return UsageStats{}, s.err
	}
	return UsageStats{Used: s.used}, nil
}

func TestCalculateUsage(t *testing.T) {
	pods := &stubEvaluator{gr: schema.GroupResource{Resource: "pods"}, resources: names("pods", "cpu"),
		// An evaluator may report more than asked; only hard names survive.
		used: rl("pods", "3", "cpu", "2", "count/pods", "5")}
	broken := &stubEvaluator{gr: schema.GroupResource{Resource: "services"}, resources: names("services"), err: errors.New("boom")}
	unused := &stubEvaluator{gr: schema.GroupResource{Resource: "secrets"}, resources: names("secrets")}
	reg := NewRegistry([]Evaluator{pods, broken, unused})

	selector := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpExists}}}
	scopes := []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotTerminating}
	used, err := CalculateUsage("ns", scopes, rl("pods", "10", "cpu", "4", "services", "2", "unknown", "1"), reg, selector)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %v, want the failing evaluator's", err)
	}
	// The failed evaluator's resources and names nobody measures are left
	// out, not reported as zero.
	expectList(t, "used", used, rl("pods", "3", "cpu", "2"))

	if pods.got == nil || pods.got.Namespace != "ns" || !reflect.DeepEqual(pods.got.Resources, names("cpu", "pods")) ||
		!reflect.DeepEqual(pods.got.Scopes, scopes) || pods.got.ScopeSelector != selector {
		t.Errorf("pods evaluator options = %+v", pods.got)
	}
	if unused.got != nil {
		t.Errorf("an evaluator measuring nothing of the quota was asked: %+v", unused.got)
	}
}

func TestCalculateUsageStats(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"in": "yes"}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"in": "yes"}}},
	}
	list := func(string) ([]runtime.Object, error) { return objs, nil }
	usage := func(runtime.Object) (corev1.ResourceList, error) { return rl("pods", "1", "cpu", "1"), nil }
	// Scope "in" matches labelled pods; "broken" cannot be evaluated.
	scope := func(s corev1.ScopedResourceSelectorRequirement, o runtime.Object) (bool, error) {
		if s.ScopeName == "broken" {
			return false, errors.New("bad selector")
		}
		pod := o.(*corev1.Pod)
		return pod.Labels[string(s.ScopeName)] == "yes", nil
	}

	stats, err := CalculateUsageStats(UsageStatsOptions{Resources: names("pods", "memory")}, list, scope, usage)
	if err != nil {
		t.Fatal(err)
	}
	// Requested but unused resources report zero.
	expectList(t, "unscoped", stats.Used, rl("pods", "3", "cpu", "3", "memory", "0"))

	stats, _ = CalculateUsageStats(UsageStatsOptions{Scopes: []corev1.ResourceQuotaScope{"in"}}, list, scope, usage)
	expectList(t, "scoped", stats.Used, rl("pods", "2", "cpu", "2"))

	sel := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{ScopeName: "in", Operator: corev1.ScopeSelectorOpExists}}}
	stats, _ = CalculateUsageStats(UsageStatsOptions{ScopeSelector: sel}, list, scope, usage)
	expectList(t, "selector", stats.Used, rl("pods", "2", "cpu", "2"))

	// A scope that fails to evaluate stops counting without an error.
	stats, err = CalculateUsageStats(UsageStatsOptions{Resources: names("pods"), Scopes: []corev1.ResourceQuotaScope{"broken"}}, list, scope, usage)
	if err != nil {
		t.Errorf("scope error surfaced: %v", err)
	}
	expectList(t, "broken scope", stats.Used, rl("pods", "0"))

	// A list failure is an error.
	failing := func(string) ([]runtime.Object, error) { return nil, errors.New("not synced") }
	if _, err := CalculateUsageStats(UsageStatsOptions{}, failing, scope, usage); err == nil {
		t.Error("list error not returned")
	}
}

func TestRegistry(t *testing.T) {
	a := &stubEvaluator{gr: schema.GroupResource{Resource: "pods"}}
	b := &stubEvaluator{gr: schema.GroupResource{Resource: "pods"}}
	r := NewRegistry([]Evaluator{a})
	if r.Get(a.gr) != a {
		t.Fatal("Get after NewRegistry")
	}
	r.Add(b)
	if r.Get(a.gr) != b || len(r.List()) != 1 {
		t.Fatal("Add must replace the evaluator of the same group/resource")
	}
	r.Remove(b)
	if r.Get(a.gr) != nil || len(r.List()) != 0 {
		t.Fatal("Remove")
	}
}

func TestListerRefusesUntilSynced(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	f := ListerFuncForResourceFunc(factory.ForResource)
	l, err := f(podsGVR)
	if err != nil {
		t.Fatal(err)
	}
	// The informer never ran: counting from it would report zero usage.
	if _, err := l.ByNamespace("ns").List(nil); err == nil || !strings.Contains(err.Error(), "not yet synced") {
		t.Errorf("List before sync: err = %v", err)
	}
	if _, err := l.List(nil); err == nil {
		t.Error("cluster List before sync succeeded")
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	if got, err := l.ByNamespace("ns").List(labels.Everything()); err != nil || len(got) != 0 {
		t.Errorf("List after sync = %v, %v", got, err)
	}
	if _, err := f(schema.GroupVersionResource{Group: "nope", Version: "v1", Resource: "nothing"}); err == nil {
		t.Error("unknown resource: no error")
	}
}
