package resourcequota

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func rl(pairs ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[v1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func show(l v1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, fmt.Sprintf("%s=%s", name, q.String()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func quota(ns, name string, hard v1.ResourceList) *v1.ResourceQuota {
	return &v1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Spec: v1.ResourceQuotaSpec{Hard: hard}}
}

func pod(ns, name string, phase v1.PodPhase, requests v1.ResourceList) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: requests}}}},
		Status:     v1.PodStatus{Phase: phase},
	}
}

// stores serves listers from indexers, as synced informers would. A
// resource named in failing answers with an error instead.
type stores struct {
	mu      sync.Mutex
	indexes map[schema.GroupVersionResource]cache.Indexer
	failing map[schema.GroupVersionResource]bool
}

func newStores() *stores {
	return &stores{indexes: map[schema.GroupVersionResource]cache.Indexer{}, failing: map[schema.GroupVersionResource]bool{}}
}

func (s *stores) index(gvr schema.GroupVersionResource) cache.Indexer {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.indexes[gvr]
	if !ok {
		idx = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		s.indexes[gvr] = idx
	}
	return idx
}

func (s *stores) add(t *testing.T, gvr schema.GroupVersionResource, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if err := s.index(gvr).Add(o); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *stores) lister(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	s.mu.Lock()
	failing := s.failing[gvr]
	s.mu.Unlock()
	if failing {
		return nil, errors.New(gvr.Resource + " not yet synced")
	}
	return cache.NewGenericLister(s.index(gvr), gvr.GroupResource()), nil
}

var (
	podsGVR     = v1.SchemeGroupVersion.WithResource("pods")
	servicesGVR = v1.SchemeGroupVersion.WithResource("services")
	secretsGVR  = v1.SchemeGroupVersion.WithResource("secrets")
)

// testController is a controller over a fake clientset, not running:
// tests call its sync functions and inspect its queues.
type testController struct {
	*Controller
	client  *fake.Clientset
	stores  *stores
	factory informers.SharedInformerFactory
}

// newTestController builds a controller without discovery. quotas are put
// both in the fake clientset and in the quota informer's store.
func newTestController(t *testing.T, quotas ...*v1.ResourceQuota) *testController {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	objs := make([]runtime.Object, 0, len(quotas))
	for _, q := range quotas {
		objs = append(objs, q)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	st := newStores()
	reg := evaluator.NewRegistry([]evaluator.Evaluator{
		evaluator.NewPodEvaluator(st.lister, clock.RealClock{}, evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true}),
		evaluator.NewServiceEvaluator(st.lister),
		evaluator.NewObjectCountEvaluator(secretsGVR.GroupResource(), evaluator.ListResourceUsingListerFunc(st.lister, secretsGVR), v1.ResourceSecrets),
	})
	rq, err := NewController(ctx, &ControllerOptions{
		QuotaClient:           client.CoreV1(),
		ResourceQuotaInformer: factory.Core().V1().ResourceQuotas(),
		ResyncPeriod:          func() time.Duration { return 0 },
		Registry:              reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rq.queue.ShutDown()
		rq.missingUsageQueue.ShutDown()
	})
	idx := factory.Core().V1().ResourceQuotas().Informer().GetIndexer()
	for _, q := range quotas {
		if err := idx.Add(q); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return &testController{Controller: rq, client: client, stores: st, factory: factory}
}

// statusUpdates returns the quotas written with UpdateStatus.
func (tc *testController) statusUpdates() []*v1.ResourceQuota {
	var out []*v1.ResourceQuota
	for _, a := range tc.client.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" && a.GetResource().Resource == "resourcequotas" {
			out = append(out, u.GetObject().(*v1.ResourceQuota))
		}
	}
	return out
}

// drain returns the keys queued on q, in order, and empties it.
func drain(q interface {
	Len() int
	Get() (string, bool)
	Done(string)
}) []string {
	return testutil.Drain[string](q)
}
