package garbagecollector

import (
	"context"
	"errors"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakemetadata "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// staticMapper is a RESTMapper over a fixed set of kinds.
type staticMapper struct{ meta.RESTMapper }

func (staticMapper) Reset() {}

var (
	configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	podGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodeGVR      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func newStaticMapper() staticMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	return staticMapper{m}
}

// obj builds the metadata of an object as the metadata client sees it.
func obj(apiVersion, kind, ns, name string, uid types.UID, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: uid, ResourceVersion: "1", OwnerReferences: owners,
		},
	}
}

func cm(ns, name string, uid types.UID, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return obj("v1", "ConfigMap", ns, name, uid, owners...)
}

func ref(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: kind, Name: name, UID: uid}
}

func blocking(r metav1.OwnerReference) metav1.OwnerReference {
	t := true
	r.BlockOwnerDeletion = &t
	return r
}

type testGC struct {
	*GarbageCollector
	client   *fakemetadata.FakeMetadataClient
	recorder *record.FakeRecorder
	ctx      context.Context
	logger   klog.Logger
}

// newTestGC builds a collector over a fake metadata client holding objs,
// without running it: tests drive the graph and workers by hand.
func newTestGC(t *testing.T, objs ...runtime.Object) *testGC {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	scheme := fakemetadata.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := fakemetadata.NewSimpleMetadataClient(scheme, objs...)
	started := make(chan struct{})
	close(started)
	factory := NewInformerFactory(nil, metadatainformer.NewSharedInformerFactory(client, 0))
	gc, err := NewGarbageCollector(ctx, nil, client, newStaticMapper(), DefaultIgnoredResources(), factory, started)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	gc.dependencyGraphBuilder.eventRecorder = rec
	t.Cleanup(func() {
		gc.attemptToDelete.ShutDown()
		gc.attemptToOrphan.ShutDown()
		gc.dependencyGraphBuilder.graphChanges.ShutDown()
	})
	return &testGC{GarbageCollector: gc, client: client, recorder: rec, ctx: ctx, logger: logger}
}

// observe feeds an informer event for o straight into the graph.
func (g *testGC) observe(typ eventType, o *metav1.PartialObjectMetadata, old *metav1.PartialObjectMetadata) {
	ev := &event{eventType: typ, obj: o, gvk: o.GroupVersionKind()}
	if old != nil {
		ev.oldObj = old
	}
	g.dependencyGraphBuilder.applyEvent(g.logger, ev)
}

// drainGraph applies queued graph changes (virtual deletes).
func (g *testGC) drainGraph() {
	q := g.dependencyGraphBuilder.graphChanges
	for q.Len() > 0 {
		g.dependencyGraphBuilder.processGraphChanges(g.logger)
	}
}

func (g *testGC) node(uid types.UID) *node {
	n, _ := g.dependencyGraphBuilder.uidToNode.Read(uid)
	return n
}

// queued lists the UIDs waiting in q, emptying it.
func queued(q interface {
	Len() int
	Get() (*node, bool)
	Done(*node)
	Forget(*node)
}) map[types.UID]bool {
	out := map[types.UID]bool{}
	for q.Len() > 0 {
		n, _ := q.Get()
		out[n.identity.UID] = true
		q.Forget(n)
		q.Done(n)
	}
	return out
}

func logger(t *testing.T) klog.Logger {
	l, _ := ktesting.NewTestContext(t)
	return l
}

// switchableDiscovery is a fakeDiscovery whose answer can change while Sync
// polls it.
type switchableDiscovery struct {
	mu sync.Mutex
	fakeDiscovery
}

func (s *switchableDiscovery) set(lists []*metav1.APIResourceList) {
	s.mu.Lock()
	s.lists = lists
	s.mu.Unlock()
}

func (s *switchableDiscovery) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, nil
}

// cache puts objs in the monitor cache of gvr, as its informer would.
func (g *testGC) cache(gvr schema.GroupVersionResource, objs ...*metav1.PartialObjectMetadata) {
	gb := g.dependencyGraphBuilder
	gb.monitorLock.Lock()
	defer gb.monitorLock.Unlock()
	m := gb.monitors[gvr]
	if m == nil {
		m = &monitor{store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
		gb.monitors[gvr] = m
	}
	for _, o := range objs {
		if err := m.store.Update(o); err != nil {
			panic(err)
		}
	}
}

// refuseStaleDeletes makes the fake client honour a delete's
// resourceVersion precondition, as the API server does.
func (g *testGC) refuseStaleDeletes() {
	g.client.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteActionImpl)
		pre := d.DeleteOptions.Preconditions
		if pre == nil || pre.ResourceVersion == nil {
			return false, nil, nil
		}
		live, err := g.client.Tracker().Get(a.GetResource(), d.Namespace, d.Name)
		if err != nil {
			return false, nil, nil
		}
		if acc, _ := meta.Accessor(live); acc.GetResourceVersion() != *pre.ResourceVersion {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.Name, errors.New("precondition failed"))
		}
		return false, nil, nil
	})
}
