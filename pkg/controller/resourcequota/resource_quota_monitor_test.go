package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakemetadata "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var (
	configMapsGVR  = v1.SchemeGroupVersion.WithResource("configmaps")
	eventsGVR      = v1.SchemeGroupVersion.WithResource("events")
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	widgetsGVR     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

func partialObject(gvr schema.GroupVersionResource, kind, ns, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: gvr.GroupVersion().String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
}

func newFakeMetadata(t *testing.T, objs ...runtime.Object) *fakemetadata.FakeMetadataClient {
	t.Helper()
	scheme := fakemetadata.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fakemetadata.NewSimpleMetadataClient(scheme, objs...)
}

// replenishments records replenishment calls.
type replenishments struct {
	mu    sync.Mutex
	calls []string
}

func (r *replenishments) record(_ context.Context, gr schema.GroupResource, ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s/%s", gr.String(), ns))
}

func (r *replenishments) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func set(gvrs ...schema.GroupVersionResource) map[schema.GroupVersionResource]struct{} {
	out := map[schema.GroupVersionResource]struct{}{}
	for _, g := range gvrs {
		out[g] = struct{}{}
	}
	return out
}

func monitored(qm *QuotaMonitor) []string {
	qm.monitorLock.RLock()
	defer qm.monitorLock.RUnlock()
	var out []string
	for r := range qm.monitors {
		out = append(out, r.Resource)
	}
	sort.Strings(out)
	return out
}

// countingFactory cannot provide informers for the resources in fail,
// and counts the handlers registered on the others.
type countingFactory struct {
	InformerFactory
	fail map[schema.GroupVersionResource]bool

	mu       sync.Mutex
	handlers map[schema.GroupVersionResource]int
}

func (f *countingFactory) ForResource(r schema.GroupVersionResource) (informers.GenericInformer, error) {
	if f.fail[r] {
		return nil, errors.New("no informer")
	}
	inf, err := f.InformerFactory.ForResource(r)
	if err != nil {
		return nil, err
	}
	return countingGeneric{GenericInformer: inf, informer: &countingInformer{SharedIndexInformer: inf.Informer(), f: f, gvr: r}}, nil
}

func (f *countingFactory) count(r schema.GroupVersionResource) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handlers[r]
}

func (f *countingFactory) add(r schema.GroupVersionResource, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handlers == nil {
		f.handlers = map[schema.GroupVersionResource]int{}
	}
	f.handlers[r] += n
}

type countingGeneric struct {
	informers.GenericInformer
	informer cache.SharedIndexInformer
}

func (g countingGeneric) Informer() cache.SharedIndexInformer { return g.informer }

type countingInformer struct {
	cache.SharedIndexInformer
	f   *countingFactory
	gvr schema.GroupVersionResource
}

func (c *countingInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, p time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	c.f.add(c.gvr, 1)
	return c.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, p)
}

func (c *countingInformer) RemoveEventHandler(r cache.ResourceEventHandlerRegistration) error {
	c.f.add(c.gvr, -1)
	return c.SharedIndexInformer.RemoveEventHandler(r)
}

func TestSyncMonitors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	typed := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	md := metadatainformer.NewSharedInformerFactory(newFakeMetadata(t), 0)
	st := newStores()
	podEval := evaluator.NewPodEvaluator(st.lister, clock.RealClock{}, evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true})
	reg := evaluator.NewRegistry([]evaluator.Evaluator{podEval})
	factory := &countingFactory{InformerFactory: NewInformerFactory(typed, md), fail: map[schema.GroupVersionResource]bool{secretsGVR: true}}
	qm := NewMonitor(make(chan struct{}), factory, evaluator.DefaultIgnoredResources(), nil, (&replenishments{}).record, reg, nil)

	err := qm.SyncMonitors(ctx, set(podsGVR, configMapsGVR, deploymentsGVR, widgetsGVR, eventsGVR, secretsGVR))
	if err == nil {
		t.Error("a resource without an informer: no error")
	}
	// Ignored (events) and unavailable (secrets) resources are left out;
	// the rest are monitored regardless.
	if got, want := monitored(qm), []string{"configmaps", "deployments", "pods", "widgets"}; !reflect.DeepEqual(got, want) {
		t.Errorf("monitored %v, want %v", got, want)
	}
	// Resources without an evaluator get an object count; existing ones stay.
	if reg.Get(podsGVR.GroupResource()) != podEval {
		t.Error("the pod evaluator was replaced")
	}
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, deploymentsGVR, widgetsGVR} {
		e := reg.Get(gvr.GroupResource())
		if e == nil {
			t.Errorf("no evaluator for %v", gvr)
			continue
		}
		name := evaluator.ObjectCountQuotaResourceNameFor(gvr.GroupResource())
		if len(e.MatchingResources([]v1.ResourceName{name})) != 1 {
			t.Errorf("%v evaluator does not count %s", gvr, name)
		}
	}
	if reg.Get(eventsGVR.GroupResource()) != nil || reg.Get(secretsGVR.GroupResource()) != nil {
		t.Error("evaluator added for an unmonitored resource")
	}

	// Monitors not synced (never started) make IsSynced false.
	if qm.IsSynced(ctx) {
		t.Error("IsSynced before any informer ran")
	}

	kept := qm.monitors[podsGVR]
	if err := qm.SyncMonitors(ctx, set(podsGVR)); err != nil {
		t.Fatal(err)
	}
	if got := monitored(qm); !reflect.DeepEqual(got, []string{"pods"}) {
		t.Errorf("after shrinking: %v", got)
	}
	if qm.monitors[podsGVR] != kept {
		t.Error("an unchanged monitor was rebuilt")
	}
	// Dropped monitors detach their handlers; kept ones are not added twice.
	for gvr, want := range map[schema.GroupVersionResource]int{podsGVR: 1, configMapsGVR: 0, deploymentsGVR: 0, widgetsGVR: 0} {
		if got := factory.count(gvr); got != want {
			t.Errorf("%s: %d handlers, want %d", gvr.Resource, got, want)
		}
	}

	if err := qm.SyncMonitors(ctx, set()); err != nil {
		t.Fatal(err)
	}
	if qm.IsSynced(ctx) {
		t.Error("IsSynced with no monitors")
	}
}

func TestMonitorReplenishment(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	running := pod("a", "p", v1.PodRunning, nil)
	doomed := pod("a", "doomed", v1.PodRunning, nil)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "s"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort}}
	client := fake.NewClientset(running, doomed, svc)
	mdClient := newFakeMetadata(t, partialObject(configMapsGVR, "ConfigMap", "c", "cm"), partialObject(widgetsGVR, "Widget", "d", "w"))
	typed := informers.NewSharedInformerFactory(client, 0)
	md := metadatainformer.NewSharedInformerFactory(mdClient, 0)
	rec := &replenishments{}
	started := make(chan struct{})
	qm := NewMonitor(started, NewInformerFactory(typed, md), nil, nil, rec.record,
		evaluator.NewRegistry(nil), evaluator.DefaultUpdateFilter())
	if err := qm.SyncMonitors(ctx, set(podsGVR, servicesGVR, configMapsGVR, widgetsGVR)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		qm.Run(ctx)
	}()
	close(started)
	testutil.WaitFor(t, "monitors to sync", func() bool { return qm.IsSynced(ctx) })

	// An update that changes no usage is filtered out...
	relabelled := running.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	if _, err := client.CoreV1().Pods("a").Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ...a pod finishing is not, nor is a deletion.
	finished := relabelled.DeepCopy()
	finished.Status.Phase = v1.PodSucceeded
	if _, err := client.CoreV1().Pods("a").UpdateStatus(ctx, finished, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Pods("a").Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A service losing its node ports.
	clusterIP := svc.DeepCopy()
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	if _, err := client.CoreV1().Services("b").Update(ctx, clusterIP, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Metadata-only resources, built-in and custom.
	if err := mdClient.Resource(configMapsGVR).Namespace("c").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mdClient.Resource(widgetsGVR).Namespace("d").Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	testutil.WaitFor(t, "five replenishments", func() bool { return len(rec.get()) >= 5 })
	got := rec.get()
	sort.Strings(got)
	want := []string{"configmaps/c", "pods/a", "pods/a", "services/b", "widgets.example.com/d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("replenished %v, want %v", got, want)
	}

	cancel()
	<-done
	if qm.IsSynced(ctx) || len(monitored(qm)) != 0 {
		t.Error("monitors survived Run")
	}
}

func TestStartMonitorsWaitsForRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	typed := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	md := metadatainformer.NewSharedInformerFactory(newFakeMetadata(t), 0)
	started := make(chan struct{})
	close(started)
	qm := NewMonitor(started, NewInformerFactory(typed, md), nil, nil, (&replenishments{}).record, evaluator.NewRegistry(nil), nil)
	if err := qm.SyncMonitors(ctx, set(podsGVR)); err != nil {
		t.Fatal(err)
	}
	// Not running: no stop channel to run informers with.
	qm.StartMonitors(ctx)
	if qm.monitors[podsGVR].started {
		t.Error("monitor started before Run")
	}
}
