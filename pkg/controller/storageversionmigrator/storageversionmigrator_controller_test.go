package storageversionmigrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

type fakeRV string

func (r fakeRV) LastSyncResourceVersion() string { return string(r) }

// fakeGraph serves one monitor (or an error, or an unsynced monitor).
type fakeGraph struct {
	mu      sync.Mutex
	monitor *Monitor
	synced  bool
	err     error
	asked   []schema.GroupVersionResource
}

func (g *fakeGraph) GetMonitor(ctx context.Context, gvr schema.GroupVersionResource) (*Monitor, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, gvr)
	if _, ok := ctx.Deadline(); !ok {
		return nil, false, errors.New("GetMonitor called without a deadline")
	}
	if g.err != nil {
		return nil, false, g.err
	}
	if !g.synced {
		return nil, false, nil
	}
	return g.monitor, true, nil
}

func objMeta(ns, name, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
}

func newMonitor(t *testing.T, lastRV string, objs ...*metav1.PartialObjectMetadata) *Monitor {
	t.Helper()
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range objs {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return &Monitor{Store: store, Controller: fakeRV(lastRV)}
}

// patchRecorder answers the dynamic client's patches with errs[name]
// (success if absent) and records them.
type patchRecorder struct {
	mu      sync.Mutex
	errs    map[string]error
	patches []clienttesting.PatchActionImpl
}

func (r *patchRecorder) react(a clienttesting.Action) (bool, runtime.Object, error) {
	p := a.(clienttesting.PatchActionImpl)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.patches = append(r.patches, p)
	if err := r.errs[p.GetName()]; err != nil {
		return true, nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetName(p.GetName())
	u.SetNamespace(p.GetNamespace())
	return true, u, nil
}

func (r *patchRecorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.patches {
		out = append(out, p.GetNamespace()+"/"+p.GetName())
	}
	return out
}

type migratorFixture struct {
	*svmFixture
	c       *Controller
	graph   *fakeGraph
	patches *patchRecorder
	dyn     *dynamicfake.FakeDynamicClient
}

func newMigratorFixture(t *testing.T, graph *fakeGraph, svms ...*svmv1.StorageVersionMigration) *migratorFixture {
	t.Helper()
	f := newSVMFixture(t, svms...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList", widgetsGVR: "WidgetList", nodesGVR: "NodeList",
	})
	rec := &patchRecorder{errs: map[string]error{}}
	dyn.PrependReactor("patch", "*", rec.react)
	ctx := klog.NewContext(context.Background(), klog.Background())
	c := NewController(ctx, f.client, dyn, f.factory.Storagemigration().V1().StorageVersionMigrations(),
		"storage-version-migrator-controller", newTestMapper(), graph)
	f.client.ClearActions()
	return &migratorFixture{svmFixture: f, c: c, graph: graph, patches: rec, dyn: dyn}
}

func readyToMigrate(name string, gr metav1.GroupResource, rv string) *svmv1.StorageVersionMigration {
	return newSVM(name, gr, withConditions(running), withRV(rv))
}

func TestMigratorSkips(t *testing.T) {
	tests := []struct {
		name string
		svm  *svmv1.StorageVersionMigration
	}{
		{"succeeded", readyToMigrate("m", secretsGR, "10")},
		{"failed", readyToMigrate("m", secretsGR, "10")},
		{"no resourceVersion recorded yet", newSVM("m", secretsGR, withConditions(running))},
	}
	tests[0].svm.Status.Conditions = append(tests[0].svm.Status.Conditions, cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed"))
	tests[1].svm.Status.Conditions = append(tests[1].svm.Status.Conditions, cond(svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, "x"))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGraph{synced: true, monitor: newMonitor(t, "100", objMeta("ns", "a", "1"))}
			f := newMigratorFixture(t, g, tc.svm)
			if err := f.c.sync(context.Background(), "m"); err != nil {
				t.Fatal(err)
			}
			if len(f.client.Actions()) != 0 || len(f.patches.names()) != 0 || len(g.asked) != 0 {
				t.Fatalf("unexpected work: %v %v %v", f.client.Actions(), f.patches.names(), g.asked)
			}
		})
	}
}

func TestMigratorMissingSVM(t *testing.T) {
	f := newMigratorFixture(t, &fakeGraph{})
	if err := f.c.sync(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
}

func TestMigratorWaitsThenFails(t *testing.T) {
	unknown := metav1.GroupResource{Group: "nope.example.com", Resource: "things"}
	tests := []struct {
		name    string
		svm     *svmv1.StorageVersionMigration
		graph   *fakeGraph
		wantErr bool
		failed  string // Failed message, if failed
	}{
		{
			name:    "unknown resource, fresh migration: retried",
			svm:     readyToMigrate("m", unknown, "10"),
			graph:   &fakeGraph{},
			wantErr: true,
		},
		{
			name:   "unknown resource after a minute: failed",
			svm:    newSVM("m", unknown, withConditions(running), withRV("10"), createdAgo(2*time.Minute)),
			graph:  &fakeGraph{},
			failed: "migration encountered unhandled error: unable to obtain GVR from discovery",
		},
		{
			name:    "no monitor: retried even when old",
			svm:     newSVM("m", secretsGR, withConditions(running), withRV("10"), createdAgo(time.Hour)),
			graph:   &fakeGraph{err: errors.New("no monitor found for resource /v1, Resource=secrets")},
			wantErr: true,
		},
		{
			name:    "monitor not synced, fresh migration: retried",
			svm:     readyToMigrate("m", secretsGR, "10"),
			graph:   &fakeGraph{},
			wantErr: true,
		},
		{
			name:   "monitor not synced after a minute: failed",
			svm:    newSVM("m", secretsGR, withConditions(running), withRV("10"), createdAgo(2*time.Minute)),
			graph:  &fakeGraph{},
			failed: "migration encountered unhandled error: resource does not exist in GC: %!w(<nil>)",
		},
		{
			name:    "cache behind the recorded resourceVersion: retried",
			svm:     readyToMigrate("m", secretsGR, "10"),
			graph:   &fakeGraph{synced: true, monitor: newMonitor(t, "9", objMeta("ns", "a", "1"))},
			wantErr: true,
		},
		{
			name:   "cache resourceVersion not comparable: failed",
			svm:    readyToMigrate("m", secretsGR, "10"),
			graph:  &fakeGraph{synced: true, monitor: newMonitor(t, "abc")},
			failed: `migration encountered unhandled error: error comparing resource versions between GC and SVM resource: resource version is not well formed: abc`,
		},
		{
			name:   "object resourceVersion not comparable: failed",
			svm:    readyToMigrate("m", secretsGR, "10"),
			graph:  &fakeGraph{synced: true, monitor: newMonitor(t, "10", objMeta("ns", "a", "x1"))},
			failed: `migration encountered unhandled error: resource version is not well formed: x1`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newMigratorFixture(t, tc.graph, tc.svm)
			err := f.c.sync(context.Background(), "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error = %v, wantErr %v", err, tc.wantErr)
			}
			if len(f.patches.names()) != 0 {
				t.Fatalf("patched %v", f.patches.names())
			}
			if tc.failed == "" {
				if u := f.statusUpdates(); len(u) != 0 {
					t.Fatalf("status written: %+v", u[0].Status)
				}
				return
			}
			s := f.lastStatus(t)
			expectCondition(t, s, svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, tc.failed)
			if !isRunning(s) || meta0(s, svmv1.MigrationSucceeded) {
				t.Fatalf("conditions %+v", s.Status.Conditions)
			}
		})
	}
}

// meta0 reports whether svm has a condition of type t.
func meta0(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	for _, c := range svm.Status.Conditions {
		if c.Type == string(t) {
			return true
		}
	}
	return false
}

func TestMigratorPatchesEveryObjectOnce(t *testing.T) {
	g := &fakeGraph{synced: true, monitor: newMonitor(t, "12",
		objMeta("ns1", "a", "3"),
		objMeta("ns2", "b", "10"),
		objMeta("ns1", "newer", "11"), // written after the migration's start
	)}
	f := newMigratorFixture(t, g, readyToMigrate("m", secretsGR, "10"))
	if err := f.c.sync(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if g.asked[0] != secretsGVR {
		t.Fatalf("monitor asked for %v", g.asked)
	}
	got := f.patches.names()
	if strings.Join(sorted(got), ",") != "ns1/a,ns2/b" {
		t.Fatalf("patched %v, want ns1/a and ns2/b", got)
	}
	for _, p := range f.patches.patches {
		if p.GetPatchType() != types.MergePatchType {
			t.Errorf("patch type %s", p.GetPatchType())
		}
		if p.GetResource() != secretsGVR {
			t.Errorf("patched resource %v", p.GetResource())
		}
		rv := map[string]string{"a": "3", "b": "10"}[p.GetName()]
		want := fmt.Sprintf(`{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"%s"}}`, rv)
		if string(p.GetPatch()) != want {
			t.Errorf("patch body %s, want %s", p.GetPatch(), want)
		}
	}
	s := f.lastStatus(t)
	expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionTrue, "MigrationRunning", "The migration is running, 3 objects verified migrated")
	expectCondition(t, s, svmv1.MigrationSucceeded, metav1.ConditionTrue, "StorageVersionMigrationSucceeded", "Migration completed")
	if meta0(s, svmv1.MigrationFailed) {
		t.Fatal("Failed condition set")
	}
}

// The field manager of the writes is the controller's name.
func TestMigratorFieldManager(t *testing.T) {
	g := &fakeGraph{synced: true, monitor: newMonitor(t, "12", objMeta("", "node-1", "3"))}
	f := newMigratorFixture(t, g, readyToMigrate("m", metav1.GroupResource{Resource: "nodes"}, "10"))
	var opts []metav1.PatchOptions
	f.dyn.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts = append(opts, a.(clienttesting.PatchActionImpl).PatchOptions)
		return false, nil, nil
	})
	if err := f.c.sync(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if len(opts) != 1 || opts[0].FieldManager != "storage-version-migrator-controller" || len(opts[0].DryRun) != 0 || opts[0].Force != nil {
		t.Fatalf("patch options %+v", opts)
	}
	if p := f.patches.patches[0]; p.GetNamespace() != "" || string(p.GetPatch()) != `{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"3"}}` {
		t.Fatalf("cluster-scoped patch %s/%s %s", p.GetNamespace(), p.GetName(), p.GetPatch())
	}
}

// Custom resources are patched through their preferred version's kind.
func TestMigratorCustomResource(t *testing.T) {
	g := &fakeGraph{synced: true, monitor: newMonitor(t, "12", objMeta("ns", "w", "3"))}
	f := newMigratorFixture(t, g, readyToMigrate("m", widgetsGR, "10"))
	if err := f.c.sync(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	if p := f.patches.patches[0]; p.GetResource() != widgetsGVR || string(p.GetPatch()) != `{"kind":"Widget","apiVersion":"example.com/v2","metadata":{"resourceVersion":"3"}}` {
		t.Fatalf("patch %v %s", p.GetResource(), p.GetPatch())
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestMigratorPatchErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "secrets"}
	tests := []struct {
		name      string
		errs      map[string]error
		wantErr   bool
		running   string
		succeeded bool
		failed    string
	}{
		{
			name:      "conflict and not found count as migrated",
			errs:      map[string]error{"a": apierrors.NewConflict(gr, "a", errors.New("changed")), "b": apierrors.NewNotFound(gr, "b")},
			running:   "The migration is running, 2 objects verified migrated",
			succeeded: true,
		},
		{
			name:    "retriable error: progress reported, retried",
			errs:    map[string]error{"b": apierrors.NewTooManyRequests("slow down", 0)},
			wantErr: true,
			running: "The migration is running, 1/2 objects not yet migrated; transient error: slow down",
		},
		{
			name:    "other error: failed with progress",
			errs:    map[string]error{"b": apierrors.NewForbidden(gr, "b", errors.New("no"))},
			running: "The migration is running, 1/2 objects not yet migrated",
			failed:  `1/2 not yet migrated. migration encountered unhandled error: secrets "b" is forbidden: no`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGraph{synced: true, monitor: newMonitor(t, "12", objMeta("ns", "a", "3"), objMeta("ns", "b", "4"))}
			f := newMigratorFixture(t, g, readyToMigrate("m", secretsGR, "10"))
			f.patches.errs = tc.errs
			// Patch in a known order: a, then b.
			g.monitor.Store = orderedStore{g.monitor.Store}
			err := f.c.sync(context.Background(), "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error = %v, wantErr %v", err, tc.wantErr)
			}
			s := f.lastStatus(t)
			expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionTrue, migrationRunningReason, tc.running)
			if tc.succeeded {
				expectCondition(t, s, svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
			} else if meta0(s, svmv1.MigrationSucceeded) {
				t.Fatal("Succeeded set")
			}
			if tc.failed != "" {
				expectCondition(t, s, svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, tc.failed)
			} else if meta0(s, svmv1.MigrationFailed) {
				t.Fatal("Failed set")
			}
		})
	}
}

// orderedStore lists by key, so that tests know the patch order.
type orderedStore struct{ cache.Store }

func (s orderedStore) List() []interface{} {
	keys := sorted(s.ListKeys())
	out := make([]interface{}, 0, len(keys))
	for _, k := range keys {
		o, _, _ := s.GetByKey(k)
		out = append(out, o)
	}
	return out
}

// A resource without objects succeeds at once.
func TestMigratorNoObjects(t *testing.T) {
	g := &fakeGraph{synced: true, monitor: newMonitor(t, "12")}
	svm := readyToMigrate("m", secretsGR, "10")
	f := newMigratorFixture(t, g, svm)
	if err := f.c.sync(context.Background(), "m"); err != nil {
		t.Fatal(err)
	}
	s := f.lastStatus(t)
	// With no object, the message carries no count.
	expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionTrue, migrationRunningReason, "The migration is running")
	expectCondition(t, s, svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
}

// A server-suggested delay is honoured before the migration is retried.
func TestMigratorRetryAfter(t *testing.T) {
	g := &fakeGraph{synced: true, monitor: newMonitor(t, "12", objMeta("ns", "a", "3"))}
	f := newMigratorFixture(t, g, readyToMigrate("m", secretsGR, "10"))
	f.patches.errs["a"] = apierrors.NewTooManyRequests("slow down", 30)
	f.c.queue.Add("m")
	f.c.loop.ProcessNextWorkItem(context.Background())
	time.Sleep(200 * time.Millisecond)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("retried before the suggested delay (queue length %d)", n)
	}
	if n := f.c.queue.NumRequeues("m"); n != 1 {
		t.Fatalf("requeues %d, want 1", n)
	}

	// Other errors are retried with the queue's short initial backoff.
	behind := &fakeGraph{synced: true, monitor: newMonitor(t, "9")}
	f = newMigratorFixture(t, behind, readyToMigrate("m", secretsGR, "10"))
	f.c.queue.Add("m")
	f.c.loop.ProcessNextWorkItem(context.Background())
	testutil.WaitFor(t, "requeue with backoff", func() bool { return f.c.queue.Len() == 1 })
}
