package storageversionmigrator

import (
	"sync"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

var (
	secretsGR  = metav1.GroupResource{Resource: "secrets"}
	secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	widgetsGR  = metav1.GroupResource{Group: "example.com", Resource: "widgets"}
	widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	nodesGVR   = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// testMapper knows secrets, nodes and example.com widgets, and counts
// resets.
type testMapper struct {
	meta.RESTMapper
	mu     sync.Mutex
	resets int
}

func newTestMapper() *testMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v2", Kind: "Widget"}, meta.RESTScopeNamespace)
	return &testMapper{RESTMapper: m}
}

func (m *testMapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets++
}

func (m *testMapper) resetCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.resets
}

type svmOption func(*svmv1.StorageVersionMigration)

func withConditions(conds ...metav1.Condition) svmOption {
	return func(s *svmv1.StorageVersionMigration) { s.Status.Conditions = append(s.Status.Conditions, conds...) }
}

func withRV(rv string) svmOption {
	return func(s *svmv1.StorageVersionMigration) { s.Status.ResourceVersion = rv }
}

func createdAgo(d time.Duration) svmOption {
	return func(s *svmv1.StorageVersionMigration) { s.CreationTimestamp = metav1.NewTime(time.Now().Add(-d)) }
}

func newSVM(name string, gr metav1.GroupResource, opts ...svmOption) *svmv1.StorageVersionMigration {
	s := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now(), Generation: 1},
		Spec:       svmv1.StorageVersionMigrationSpec{Resource: gr},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func cond(t svmv1.MigrationConditionType, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

var running = cond(svmv1.MigrationRunning, metav1.ConditionTrue, migrationRunningReason, "The migration is running")

// svmFixture is a fake clientset holding svms and an informer whose cache
// holds them too (not running: tests call sync directly).
type svmFixture struct {
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

func newSVMFixture(t *testing.T, svms ...*svmv1.StorageVersionMigration) *svmFixture {
	t.Helper()
	objs := make([]runtime.Object, 0, len(svms))
	for _, s := range svms {
		objs = append(objs, s)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Storagemigration().V1().StorageVersionMigrations().Informer()
	for _, s := range svms {
		if err := informer.GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return &svmFixture{client: client, factory: factory, informer: informer}
}

// statusUpdates returns the migrations written through UpdateStatus.
func (f *svmFixture) statusUpdates() []*svmv1.StorageVersionMigration {
	var out []*svmv1.StorageVersionMigration
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "storageversionmigrations" {
			out = append(out, a.(clienttesting.UpdateAction).GetObject().(*svmv1.StorageVersionMigration))
		}
	}
	return out
}

// lastStatus is the only status write; it fails the test otherwise.
func (f *svmFixture) lastStatus(t *testing.T) *svmv1.StorageVersionMigration {
	t.Helper()
	u := f.statusUpdates()
	if len(u) != 1 {
		t.Fatalf("%d status updates, want 1: %v", len(u), f.client.Actions())
	}
	return u[0]
}

// expectCondition checks a condition's status, reason and message.
func expectCondition(t *testing.T, svm *svmv1.StorageVersionMigration, ct svmv1.MigrationConditionType, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	c := meta.FindStatusCondition(svm.Status.Conditions, string(ct))
	if c == nil {
		t.Fatalf("no %s condition in %+v", ct, svm.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason || c.Message != message {
		t.Fatalf("%s condition = %s/%s/%q, want %s/%s/%q", ct, c.Status, c.Reason, c.Message, status, reason, message)
	}
	if c.LastTransitionTime.IsZero() {
		t.Fatalf("%s condition without lastTransitionTime", ct)
	}
}
