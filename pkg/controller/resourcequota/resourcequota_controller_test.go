package resourcequota

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func TestSyncNewQuotaSetsHardAndUsed(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10", "requests.cpu", "4", "count/pods", "20", "secrets", "5", "services", "3", "example.com/unknown", "1"))
	tc := newTestController(t, q)
	tc.stores.add(t, podsGVR,
		pod("ns", "running", v1.PodRunning, rl("cpu", "500m")),
		pod("ns", "pending", v1.PodPending, rl("cpu", "250m")),
		pod("ns", "done", v1.PodSucceeded, rl("cpu", "1")),
		pod("other", "elsewhere", v1.PodRunning, rl("cpu", "1")),
	)
	tc.stores.add(t, secretsGVR, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}})

	if err := tc.syncResourceQuota(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	updates := tc.statusUpdates()
	if len(updates) != 1 {
		t.Fatalf("%d status updates, want 1", len(updates))
	}
	got := updates[0].Status
	if !evaluator.Equals(got.Hard, q.Spec.Hard) {
		t.Errorf("status.hard = %s, want spec.hard %s", show(got.Hard), show(q.Spec.Hard))
	}
	// Only hard resources, terminal pods and other namespaces excluded,
	// and nothing for a resource no evaluator knows.
	want := rl("pods", "2", "requests.cpu", "750m", "count/pods", "3", "secrets", "1", "services", "0")
	if !evaluator.Equals(got.Used, want) {
		t.Errorf("status.used = %s, want %s", show(got.Used), show(want))
	}
}

func TestSyncWritesOnlyWhenStatusChanges(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10"))
	q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "10"), Used: rl("pods", "1")}
	tc := newTestController(t, q)
	tc.stores.add(t, podsGVR, pod("ns", "a", v1.PodRunning, nil))

	if err := tc.syncResourceQuota(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if n := len(tc.statusUpdates()); n != 0 {
		t.Fatalf("unchanged quota written %d times", n)
	}

	// Same usage written differently ("1000m" vs "1") is no change either.
	q2 := q.DeepCopy()
	q2.Status.Used = rl("pods", "1000m")
	if err := tc.syncResourceQuota(context.Background(), q2); err != nil {
		t.Fatal(err)
	}
	if n := len(tc.statusUpdates()); n != 0 {
		t.Fatalf("equal quantities written %d times", n)
	}

	tc.stores.add(t, podsGVR, pod("ns", "b", v1.PodRunning, nil))
	if err := tc.syncResourceQuota(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	updates := tc.statusUpdates()
	if len(updates) != 1 || !evaluator.Equals(updates[0].Status.Used, rl("pods", "2")) {
		t.Fatalf("after a new pod: updates %v", updates)
	}
}

func TestSyncFirstTimeWritesEvenIfZero(t *testing.T) {
	// Admission waits for used to be known; a quota with nothing used must
	// still get a status.
	q := quota("ns", "q", rl("pods", "10"))
	q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "10")}
	tc := newTestController(t, q)
	if err := tc.syncResourceQuota(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	updates := tc.statusUpdates()
	if len(updates) != 1 || !evaluator.Equals(updates[0].Status.Used, rl("pods", "0")) {
		t.Fatalf("updates = %v", updates)
	}
}

func TestSyncSpecChangeUpdatesHardAndMasksUsed(t *testing.T) {
	// cpu dropped from spec, memory added; the unknown resource keeps the
	// usage it had (someone else may maintain it).
	q := quota("ns", "q", rl("pods", "10", "requests.memory", "1Gi", "example.com/unknown", "5"))
	q.Status = v1.ResourceQuotaStatus{
		Hard: rl("pods", "5", "requests.cpu", "1", "example.com/unknown", "5"),
		Used: rl("pods", "1", "requests.cpu", "100m", "example.com/unknown", "2"),
	}
	tc := newTestController(t, q)
	tc.stores.add(t, podsGVR, pod("ns", "a", v1.PodRunning, rl("cpu", "100m", "memory", "100Mi")))
	if err := tc.syncResourceQuota(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	updates := tc.statusUpdates()
	if len(updates) != 1 {
		t.Fatalf("%d updates", len(updates))
	}
	st := updates[0].Status
	if !evaluator.Equals(st.Hard, q.Spec.Hard) {
		t.Errorf("hard = %s", show(st.Hard))
	}
	if want := rl("pods", "1", "requests.memory", "100Mi", "example.com/unknown", "2"); !evaluator.Equals(st.Used, want) {
		t.Errorf("used = %s, want %s", show(st.Used), show(want))
	}
	// The write is based on the cached object, so a concurrent spec edit
	// conflicts instead of being overwritten.
	if updates[0].ResourceVersion != "1" || !reflect.DeepEqual(updates[0].Spec, q.Spec) {
		t.Errorf("update carries %q / %v", updates[0].ResourceVersion, updates[0].Spec)
	}
}

func TestSyncKeepsOldUsageWhenAnEvaluatorFails(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10", "services", "5"))
	q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "10", "services", "5"), Used: rl("pods", "3", "services", "4")}
	tc := newTestController(t, q)
	tc.stores.failing[servicesGVR] = true

	err := tc.syncResourceQuota(context.Background(), q)
	if err == nil || !strings.Contains(err.Error(), "services not yet synced") {
		t.Fatalf("err = %v, want the lister error (so the quota is retried)", err)
	}
	updates := tc.statusUpdates()
	if len(updates) != 1 {
		t.Fatalf("%d updates, want the usage that could be calculated written", len(updates))
	}
	if want := rl("pods", "0", "services", "4"); !evaluator.Equals(updates[0].Status.Used, want) {
		t.Errorf("used = %s, want %s", show(updates[0].Status.Used), show(want))
	}
}

func TestSyncReturnsUpdateErrors(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10"))
	tc := newTestController(t, q)
	tc.client.PrependReactor("update", "resourcequotas", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "resourcequotas"}, "q", errors.New("stale"))
	})
	if err := tc.syncResourceQuota(context.Background(), q); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("err = %v, want the conflict", err)
	}
}

func TestSyncScopes(t *testing.T) {
	be := quota("ns", "best-effort", rl("pods", "10"))
	be.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeBestEffort}
	nbe := quota("ns", "not-best-effort", rl("pods", "10", "requests.cpu", "10"))
	nbe.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeNotBestEffort}
	term := quota("ns", "terminating", rl("pods", "10"))
	term.Spec.Scopes = []v1.ResourceQuotaScope{v1.ResourceQuotaScopeTerminating}
	prio := quota("ns", "priority", rl("pods", "10"))
	prio.Spec.ScopeSelector = &v1.ScopeSelector{MatchExpressions: []v1.ScopedResourceSelectorRequirement{
		{ScopeName: v1.ResourceQuotaScopePriorityClass, Operator: v1.ScopeSelectorOpIn, Values: []string{"high"}}}}
	tc := newTestController(t, be, nbe, term, prio)

	withDeadline := pod("ns", "job", v1.PodRunning, nil)
	withDeadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	high := pod("ns", "high", v1.PodRunning, rl("cpu", "1"))
	high.Spec.PriorityClassName = "high"
	tc.stores.add(t, podsGVR, pod("ns", "be", v1.PodRunning, nil), withDeadline, high, pod("ns", "burst", v1.PodRunning, rl("cpu", "250m")))

	want := map[string]v1.ResourceList{
		"best-effort":     rl("pods", "2"),
		"not-best-effort": rl("pods", "2", "requests.cpu", "1250m"),
		"terminating":     rl("pods", "1"),
		"priority":        rl("pods", "1"),
	}
	for _, q := range []*v1.ResourceQuota{be, nbe, term, prio} {
		tc.client.ClearActions()
		if err := tc.syncResourceQuota(context.Background(), q); err != nil {
			t.Fatal(err)
		}
		updates := tc.statusUpdates()
		if len(updates) != 1 || !evaluator.Equals(updates[0].Status.Used, want[q.Name]) {
			t.Errorf("%s: updates %v, want used %s", q.Name, updates, show(want[q.Name]))
		}
	}
}

func TestSyncFromKey(t *testing.T) {
	q := quota("ns", "q", rl("pods", "1"))
	tc := newTestController(t, q)
	if err := tc.syncResourceQuotaFromKey(context.Background(), "ns/q"); err != nil {
		t.Fatal(err)
	}
	if len(tc.statusUpdates()) != 1 {
		t.Fatal("quota not synced")
	}
	// A deleted quota is done with, not an error.
	tc.client.ClearActions()
	if err := tc.syncResourceQuotaFromKey(context.Background(), "ns/gone"); err != nil {
		t.Fatalf("deleted quota: %v", err)
	}
	if len(tc.client.Actions()) != 0 {
		t.Fatal("deleted quota written")
	}
	if err := tc.syncResourceQuotaFromKey(context.Background(), "a/b/c"); err == nil {
		t.Fatal("bad key accepted")
	}
}

func TestAddQuotaPrioritisesMissingStatus(t *testing.T) {
	cases := map[string]struct {
		quota    *v1.ResourceQuota
		priority bool
	}{
		"new quota": {quota("ns", "q", rl("pods", "1")), true},
		"status.hard differs from spec": {func() *v1.ResourceQuota {
			q := quota("ns", "q", rl("pods", "2"))
			q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "1"), Used: rl("pods", "0")}
			return q
		}(), true},
		"usage missing for a resource we calculate": {func() *v1.ResourceQuota {
			q := quota("ns", "q", rl("pods", "2", "requests.cpu", "1"))
			q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "2", "requests.cpu", "1"), Used: rl("pods", "0")}
			return q
		}(), true},
		"usage missing only for a resource nobody calculates": {func() *v1.ResourceQuota {
			q := quota("ns", "q", rl("pods", "2", "example.com/unknown", "1"))
			q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "2", "example.com/unknown", "1"), Used: rl("pods", "0")}
			return q
		}(), false},
		"complete status": {func() *v1.ResourceQuota {
			q := quota("ns", "q", rl("pods", "2"))
			q.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "2"), Used: rl("pods", "1")}
			return q
		}(), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tc := newTestController(t)
			tc.addQuota(klog.Background(), c.quota)
			priority, primary := drain(tc.missingUsageQueue), drain(tc.queue)
			if c.priority && (len(priority) != 1 || len(primary) != 0) {
				t.Errorf("priority %v, primary %v: want the priority queue", priority, primary)
			}
			if !c.priority && (len(priority) != 0 || len(primary) != 1) {
				t.Errorf("priority %v, primary %v: want the primary queue", priority, primary)
			}
		})
	}
}

func TestQuotaInformerHandlers(t *testing.T) {
	tc := newTestController(t)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Run the real informer over the fake clientset to exercise the handlers.
	tc.factory.Start(ctx.Done())
	tc.factory.WaitForCacheSync(ctx.Done())

	q := quota("ns", "q", rl("pods", "1"))
	q.ResourceVersion = ""
	created, err := tc.client.CoreV1().ResourceQuotas("ns").Create(ctx, q, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "add to reach the priority queue", func() bool { return tc.missingUsageQueue.Len() == 1 })
	drain(tc.missingUsageQueue)

	// A status write (ours) queues nothing...
	st := created.DeepCopy()
	st.Status = v1.ResourceQuotaStatus{Hard: rl("pods", "1"), Used: rl("pods", "0")}
	if _, err := tc.client.CoreV1().ResourceQuotas("ns").UpdateStatus(ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ...a spec edit does, with priority since status.hard is now stale.
	spec := st.DeepCopy()
	spec.Spec.Hard = rl("pods", "2")
	if _, err := tc.client.CoreV1().ResourceQuotas("ns").Update(ctx, spec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "spec edit to reach the priority queue", func() bool { return tc.missingUsageQueue.Len() == 1 })
	if tc.queue.Len() != 0 {
		t.Errorf("the status update queued %v", drain(tc.queue))
	}
	drain(tc.missingUsageQueue)

	if err := tc.client.CoreV1().ResourceQuotas("ns").Delete(ctx, "q", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "delete to be queued", func() bool { return tc.queue.Len() == 1 })
}

func TestReplenishQuota(t *testing.T) {
	podsQuota := quota("ns", "pods", rl("pods", "1"))
	podsQuota.Status.Hard = rl("pods", "1")
	// Matching uses status.hard: a spec not yet synced does not count.
	pendingSpec := quota("ns", "pending", rl("pods", "1"))
	secretsQuota := quota("ns", "secrets", rl("secrets", "1"))
	secretsQuota.Status.Hard = rl("secrets", "1")
	otherNS := quota("other", "pods", rl("pods", "1"))
	otherNS.Status.Hard = rl("pods", "1")
	tc := newTestController(t, podsQuota, pendingSpec, secretsQuota, otherNS)
	ctx := context.Background()

	tc.replenishQuota(ctx, schema.GroupResource{Resource: "pods"}, "ns")
	if got := drain(tc.queue); !reflect.DeepEqual(got, []string{"ns/pods"}) {
		t.Errorf("pods changed: queued %v, want [ns/pods]", got)
	}
	tc.replenishQuota(ctx, schema.GroupResource{Resource: "secrets"}, "ns")
	if got := drain(tc.queue); !reflect.DeepEqual(got, []string{"ns/secrets"}) {
		t.Errorf("secrets changed: queued %v", got)
	}
	// No evaluator for it: nothing to recalculate.
	tc.replenishQuota(ctx, schema.GroupResource{Group: "apps", Resource: "deployments"}, "ns")
	tc.replenishQuota(ctx, schema.GroupResource{Resource: "pods"}, "empty")
	if got := drain(tc.queue); len(got) != 0 {
		t.Errorf("queued %v", got)
	}
	if tc.missingUsageQueue.Len() != 0 {
		t.Error("replenishment used the priority queue")
	}
}

func TestEnqueueAll(t *testing.T) {
	tc := newTestController(t, quota("a", "q1", rl("pods", "1")), quota("b", "q2", rl("pods", "1")))
	tc.enqueueAll(context.Background())
	got := drain(tc.queue)
	if len(got) != 2 || tc.missingUsageQueue.Len() != 0 {
		t.Errorf("full resync queued %v on the primary queue", got)
	}
}

func TestGetQuotableResources(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "pods", Namespaced: true, Verbs: []string{"create", "delete", "get", "list", "watch"}},
			{Name: "bindings", Namespaced: true, Verbs: []string{"create"}},
			{Name: "pods/status", Namespaced: true, Verbs: []string{"get", "update"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Namespaced: true, Verbs: []string{"create", "delete", "list", "watch"}},
			{Name: "nodeletes", Namespaced: true, Verbs: []string{"create", "list", "watch"}},
		}},
	}
	got, err := GetQuotableResources(func() ([]*metav1.APIResourceList, error) { return lists, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := map[schema.GroupVersionResource]struct{}{
		{Version: "v1", Resource: "pods"}:                       {},
		{Group: "apps", Version: "v1", Resource: "deployments"}: {},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("quotable = %v", got)
	}

	partial := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("down")}}
	got, err = GetQuotableResources(func() ([]*metav1.APIResourceList, error) { return lists, partial })
	if !discovery.IsGroupDiscoveryFailedError(err) || len(got) != 2 {
		t.Errorf("partial failure: %v, %v", got, err)
	}
	if _, err := GetQuotableResources(func() ([]*metav1.APIResourceList, error) { return nil, errors.New("down") }); err == nil {
		t.Error("total failure: no error")
	}
}
