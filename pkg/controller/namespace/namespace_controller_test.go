package namespace

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/namespace/deletion"
)

// recordingQueue notes delayed adds and rate-limited requeues.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu          sync.Mutex
	after       map[string]time.Duration
	rateLimited []string
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	q.after[key] = d
	q.mu.Unlock()
	q.Add(key)
}

func (q *recordingQueue) AddRateLimited(key string) {
	q.mu.Lock()
	q.rateLimited = append(q.rateLimited, key)
	q.mu.Unlock()
	q.TypedRateLimitingInterface.AddRateLimited(key)
}

type fakeDeleter struct{ err error }

func (f *fakeDeleter) Delete(context.Context, string) error { return f.err }

func discoverCore() ([]*metav1.APIResourceList, error) {
	return []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Verbs: []string{"list", "delete", "deletecollection"}},
	}}}, nil
}

func newTestController(t *testing.T, objs ...*v1.Namespace) (*Controller, *recordingQueue, *fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	kube := fake.NewClientset()
	for _, o := range objs {
		_, _ = kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	nc := NewController(ctx, kube, md, discoverCore, factory.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
	q := &recordingQueue{TypedRateLimitingInterface: nc.queue, after: map[string]time.Duration{}}
	nc.queue = q
	t.Cleanup(nc.queue.ShutDown)
	return nc, q, kube, factory
}

func TestOnlyDeletingNamespacesAreQueued(t *testing.T) {
	now := metav1.Now()
	nc, q, _, _ := newTestController(t)
	ctx := context.Background()
	nc.enqueue(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}})
	nc.enqueue(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dying", DeletionTimestamp: &now}})
	if len(q.after) != 1 || q.after["dying"] != deletionGracePeriod {
		t.Errorf("queued %v, want only dying after %v", q.after, deletionGracePeriod)
	}
}

func TestRequeueAfterHalfTheEstimate(t *testing.T) {
	cases := []struct {
		name          string
		err           error
		wantAfter     time.Duration
		wantRateLimit bool
	}{
		{"content terminating", &deletion.ResourcesRemainingError{Estimate: 30}, 16 * time.Second, false},
		{"finalizers pending", &deletion.ResourcesRemainingError{Estimate: 15}, 8 * time.Second, false},
		{"failure", errors.New("boom"), 0, true},
		{"done", nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := metav1.Now()
			ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now}}
			nc, q, _, factory := newTestController(t)
			_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns)
			nc.deleter = &fakeDeleter{err: tc.err}
			q.Add("ns")
			if !nc.workLoop().ProcessNextWorkItem(context.Background()) {
				t.Fatal("queue shut down")
			}
			if got := q.after["ns"]; got != tc.wantAfter {
				t.Errorf("AddAfter %v, want %v", got, tc.wantAfter)
			}
			if (len(q.rateLimited) > 0) != tc.wantRateLimit {
				t.Errorf("rate-limited requeues %v, want %v", q.rateLimited, tc.wantRateLimit)
			}
		})
	}
}

// Content still terminating is looked at again later without resetting
// the backoff earlier failures built up (upstream only adds it back).
func TestContentRemainingKeepsBackoff(t *testing.T) {
	now := metav1.Now()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", DeletionTimestamp: &now}}
	nc, q, _, factory := newTestController(t)
	_ = factory.Core().V1().Namespaces().Informer().GetIndexer().Add(ns)
	deleter := &fakeDeleter{err: errors.New("boom")}
	nc.deleter = deleter
	loop := nc.workLoop()
	q.Add("ns")
	loop.ProcessNextWorkItem(context.Background())
	if n := q.NumRequeues("ns"); n != 1 {
		t.Fatalf("NumRequeues after a failure = %d, want 1", n)
	}
	deleter.err = &deletion.ResourcesRemainingError{Estimate: 30}
	loop.ProcessNextWorkItem(context.Background()) // the rate-limited retry
	if n := q.NumRequeues("ns"); n != 1 {
		t.Errorf("NumRequeues after content remained = %d, want 1", n)
	}
	if got := q.after["ns"]; got != 16*time.Second {
		t.Errorf("AddAfter %v, want 16s", got)
	}
}

// TestEndToEndWithFakes runs the controller against fakes: a deleted, empty
// namespace gets finalized; a live one is never touched.
func TestEndToEndWithFakes(t *testing.T) {
	now := metav1.Now()
	dying := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dying", DeletionTimestamp: &now},
		Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}}
	live := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"},
		Spec: v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}}}
	nc, q, kube, factory := newTestController(t, dying, live)
	nc.queue = q.TypedRateLimitingInterface // real delays
	nc.gracePeriod = 0
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() { nc.Run(ctx, 2); close(done) }()
	defer func() { cancel(); <-done; factory.Shutdown() }()

	for {
		var finalized []string
		for _, a := range kube.Actions() {
			if a.GetVerb() == "create" && a.GetSubresource() == "finalize" {
				finalized = append(finalized, a.(clienttesting.CreateAction).GetObject().(*v1.Namespace).Name)
			}
		}
		if len(finalized) > 0 {
			if len(finalized) != 1 || finalized[0] != "dying" {
				t.Fatalf("finalized %v, want only dying", finalized)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}
