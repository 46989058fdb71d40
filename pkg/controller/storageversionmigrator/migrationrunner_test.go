package storageversionmigrator

import (
	"context"
	"encoding/json"
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
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// newCRD is the widgets.example.com CRD storing v2 (served: v1, v2).
func newCRD(generation int64, conditions ...interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "widgets.example.com", "generation": generation, "resourceVersion": "77"},
		"spec": map[string]interface{}{
			"group": "example.com",
			"versions": []interface{}{
				map[string]interface{}{"name": "v1", "served": true, "storage": false},
				map[string]interface{}{"name": "v2", "served": true, "storage": true},
			},
		},
		"status": map[string]interface{}{"storedVersions": []interface{}{"v1", "v2"}},
	}}
	if len(conditions) > 0 {
		_ = unstructured.SetNestedSlice(u.Object, conditions, "status", "conditions")
	}
	return u
}

func migratingCondition(generation int64) map[string]interface{} {
	return map[string]interface{}{"type": "StorageMigrating", "status": "True", "reason": "MigrationRunning", "observedGeneration": generation}
}

type runnerFixture struct {
	*svmFixture
	c   *MigrationRunnerController
	dyn *dynamicfake.FakeDynamicClient

	mu       sync.Mutex
	applies  []clienttesting.PatchActionImpl
	applyErr []error // returned by the first applies, in order
}

func newRunnerFixture(t *testing.T, crd *unstructured.Unstructured, svms ...*svmv1.StorageVersionMigration) *runnerFixture {
	t.Helper()
	objs := []runtime.Object{}
	if crd != nil {
		objs = append(objs, crd)
	}
	f := &runnerFixture{svmFixture: newSVMFixture(t, svms...)}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{CRDResource: "CustomResourceDefinitionList"}, objs...)
	f.dyn.PrependReactor("patch", "customresourcedefinitions", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.applies = append(f.applies, a.(clienttesting.PatchActionImpl))
		if len(f.applyErr) > 0 {
			err := f.applyErr[0]
			f.applyErr = f.applyErr[1:]
			return true, nil, err
		}
		return true, crd, nil
	})
	ctx := klog.NewContext(context.Background(), klog.Background())
	f.c = NewCustomResourceController(ctx, f.client, f.factory.Storagemigration().V1().StorageVersionMigrations(), f.dyn)
	f.client.ClearActions()
	return f
}

// applied decodes the i-th CRD status apply.
func (f *runnerFixture) applied(t *testing.T, i int) map[string]interface{} {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.applies) <= i {
		t.Fatalf("%d applies, want more than %d", len(f.applies), i)
	}
	a := f.applies[i]
	if a.GetPatchType() != types.ApplyPatchType || a.GetSubresource() != "status" || a.GetName() != "widgets.example.com" {
		t.Fatalf("apply %s %s/%s", a.GetPatchType(), a.GetName(), a.GetSubresource())
	}
	if a.PatchOptions.FieldManager != "migration-runner-controller" || a.PatchOptions.Force == nil || !*a.PatchOptions.Force {
		t.Fatalf("apply options %+v", a.PatchOptions)
	}
	var body map[string]interface{}
	if err := json.Unmarshal(a.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body["apiVersion"] != "apiextensions.k8s.io/v1" || body["kind"] != "CustomResourceDefinition" {
		t.Fatalf("apply type %v %v", body["apiVersion"], body["kind"])
	}
	md := body["metadata"].(map[string]interface{})
	if md["name"] != "widgets.example.com" || md["resourceVersion"] != "77" || len(md) != 2 {
		t.Fatalf("apply metadata %v", md)
	}
	return body["status"].(map[string]interface{})
}

// expectCRDCondition checks the only condition of an applied status.
func expectCRDCondition(t *testing.T, status map[string]interface{}, s, reason, message string, generation float64) {
	t.Helper()
	conds := status["conditions"].([]interface{})
	if len(conds) != 1 {
		t.Fatalf("conditions %v", conds)
	}
	c := conds[0].(map[string]interface{})
	if c["type"] != "StorageMigrating" || c["status"] != s || c["reason"] != reason || c["message"] != message || c["observedGeneration"] != generation {
		t.Fatalf("condition %v", c)
	}
	if _, err := time.Parse(time.RFC3339, c["lastTransitionTime"].(string)); err != nil {
		t.Fatalf("lastTransitionTime: %v", err)
	}
}

func at(d time.Duration) svmOption {
	return func(s *svmv1.StorageVersionMigration) {
		s.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(d))
	}
}

func TestRunnerStartsOldestPending(t *testing.T) {
	f := newRunnerFixture(t, nil,
		newSVM("b-newer", secretsGR, at(time.Minute)),
		newSVM("c-oldest", secretsGR, at(0)),
		newSVM("a-oldest-too", metav1.GroupResource{Resource: "configmaps"}, at(-time.Minute)),
	)
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	s := f.lastStatus(t)
	if s.Name != "c-oldest" {
		t.Fatalf("started %s", s.Name)
	}
	expectCondition(t, s, svmv1.MigrationRunning, metav1.ConditionTrue, "MigrationRunning", "The migration is running")
}

func TestRunnerTieBrokenByName(t *testing.T) {
	f := newRunnerFixture(t, nil, newSVM("b", secretsGR, at(0)), newSVM("a", secretsGR, at(0)))
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	if s := f.lastStatus(t); s.Name != "a" {
		t.Fatalf("started %s", s.Name)
	}
}

func TestRunnerOneAtATime(t *testing.T) {
	f := newRunnerFixture(t, nil,
		newSVM("pending", secretsGR, at(0)),
		newSVM("running", secretsGR, at(time.Minute), withConditions(running)),
	)
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	if u := f.statusUpdates(); len(u) != 0 {
		t.Fatalf("wrote %s while another migration runs", u[0].Name)
	}
}

func TestRunnerSkipsFinished(t *testing.T) {
	done := cond(svmv1.MigrationRunning, metav1.ConditionFalse, migrationCompletedReason, migrationCompletedMessage)
	succeeded := cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	f := newRunnerFixture(t, nil, newSVM("old", secretsGR, at(0), withConditions(done, succeeded)))
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	if u := f.statusUpdates(); len(u) != 0 {
		t.Fatalf("wrote %s", u[0].Name)
	}
}

// A finished migration gets Running=False, and the next one starts.
func TestRunnerFinishesAndStartsNext(t *testing.T) {
	succeeded := cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	finished := newSVM("first", secretsGR, at(0), withConditions(running, succeeded))
	finished.Generation = 3
	f := newRunnerFixture(t, nil, finished, newSVM("second", secretsGR, at(time.Minute)))
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	u := f.statusUpdates()
	if len(u) != 2 || u[0].Name != "first" || u[1].Name != "second" {
		t.Fatalf("status updates %v", u)
	}
	expectCondition(t, u[0], svmv1.MigrationRunning, metav1.ConditionFalse, "MigrationCompleted", "Migration completed")
	for _, c := range u[0].Status.Conditions {
		if c.Type == string(svmv1.MigrationRunning) && c.ObservedGeneration != 3 {
			t.Fatalf("observedGeneration %d", c.ObservedGeneration)
		}
	}
	expectCondition(t, u[1], svmv1.MigrationRunning, metav1.ConditionTrue, "MigrationRunning", "The migration is running")
}

// Core resources have no CRD: it is looked up (as <resource>.<group>) and
// nothing is applied.
func TestRunnerCoreResourceNoCRD(t *testing.T) {
	f := newRunnerFixture(t, nil, newSVM("m", secretsGR))
	var gets []string
	f.dyn.PrependReactor("get", "customresourcedefinitions", func(a clienttesting.Action) (bool, runtime.Object, error) {
		gets = append(gets, a.(clienttesting.GetAction).GetName())
		return false, nil, nil
	})
	if err := f.c.sync(context.Background(), secretsGR); err != nil {
		t.Fatal(err)
	}
	if len(gets) != 1 || gets[0] != "secrets." || len(f.applies) != 0 {
		t.Fatalf("CRD gets %v, applies %d", gets, len(f.applies))
	}
	f.lastStatus(t)
}

func TestRunnerMarksCRDMigrating(t *testing.T) {
	f := newRunnerFixture(t, newCRD(4), newSVM("mig", widgetsGR))
	// A conflicting apply is retried with a fresh read.
	f.applyErr = []error{apierrors.NewConflict(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "widgets.example.com", nil)}
	if err := f.c.sync(context.Background(), widgetsGR); err != nil {
		t.Fatal(err)
	}
	if len(f.applies) != 2 {
		t.Fatalf("%d applies, want 2", len(f.applies))
	}
	status := f.applied(t, 1)
	expectCRDCondition(t, status, "True", "MigrationRunning", "Migration mig is running", 4)
	if _, ok := status["storedVersions"]; ok {
		t.Fatal("storedVersions applied at start")
	}
	expectCondition(t, f.lastStatus(t), svmv1.MigrationRunning, metav1.ConditionTrue, "MigrationRunning", "The migration is running")
}

func TestRunnerFinishesCRD(t *testing.T) {
	succeeded := cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	failed := cond(svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, "x")
	for _, tc := range []struct {
		name    string
		outcome metav1.Condition
		crd     *unstructured.Unstructured
		reason  string
		message string
		trimmed bool
	}{
		{"succeeded, CRD unchanged: stored versions trimmed", succeeded, newCRD(4, migratingCondition(4)),
			"MigrationSucceeded", "The migration has succeeded and the stored versions have been updated", true},
		{"succeeded, CRD changed meanwhile", succeeded, newCRD(5, migratingCondition(4)),
			"MigrationSucceeded", "The migration has succeeded but the stored versions have not been updated due to a generation mismatch", false},
		{"succeeded, no migrating condition", succeeded, newCRD(4),
			"MigrationSucceeded", "The migration has succeeded but the stored versions have not been updated due to a generation mismatch", false},
		{"failed, CRD unchanged: trimmed all the same (as upstream)", failed, newCRD(4, migratingCondition(4)),
			"MigrationFailed", "The migration has failed", true},
		{"failed, CRD changed", failed, newCRD(5, migratingCondition(4)),
			"MigrationFailed", "The migration has failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRunnerFixture(t, tc.crd, newSVM("mig", widgetsGR, withConditions(running, tc.outcome)))
			if err := f.c.sync(context.Background(), widgetsGR); err != nil {
				t.Fatal(err)
			}
			status := f.applied(t, 0)
			expectCRDCondition(t, status, "False", tc.reason, tc.message, float64(tc.crd.GetGeneration()))
			sv, ok := status["storedVersions"].([]interface{})
			if tc.trimmed != ok || (ok && (len(sv) != 1 || sv[0] != "v2")) {
				t.Fatalf("storedVersions %v", status["storedVersions"])
			}
			expectCondition(t, f.lastStatus(t), svmv1.MigrationRunning, metav1.ConditionFalse, "MigrationCompleted", "Migration completed")
		})
	}
}

// A failed CRD write leaves the migration Running, to be retried.
func TestRunnerCRDErrorRetried(t *testing.T) {
	succeeded := cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	f := newRunnerFixture(t, newCRD(4, migratingCondition(4)), newSVM("mig", widgetsGR, withConditions(running, succeeded)))
	f.applyErr = []error{apierrors.NewForbidden(schema.GroupResource{Resource: "customresourcedefinitions"}, "x", nil)}
	if err := f.c.sync(context.Background(), widgetsGR); err == nil {
		t.Fatal("expected an error")
	}
	if u := f.statusUpdates(); len(u) != 0 {
		t.Fatal("status written")
	}
}

// Deleting a migration lets the next of its resource start.
func TestRunnerQueuesByResource(t *testing.T) {
	f := newRunnerFixture(t, nil)
	svm := newSVM("m", widgetsGR)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	if _, err := f.client.StoragemigrationV1().StorageVersionMigrations().Create(ctx, svm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "resource queued", func() bool { return f.c.queue.Len() == 1 })
	key, _ := f.c.queue.Get()
	if key != widgetsGR {
		t.Fatalf("queued %v", key)
	}
	f.c.queue.Done(key)
	if err := f.client.StoragemigrationV1().StorageVersionMigrations().Delete(ctx, "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "resource queued on delete", func() bool { return f.c.queue.Len() == 1 })
}
