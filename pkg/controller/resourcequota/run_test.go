package resourcequota

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakemetadata "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/resourcequota/evaluator"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var allVerbs = []string{"create", "delete", "get", "list", "watch", "update", "patch"}

func apiList(gv string, resources ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Namespaced: true, Verbs: allVerbs})
	}
	return l
}

// switchableDiscovery answers with lists that tests change.
type switchableDiscovery struct {
	mu    sync.Mutex
	lists []*metav1.APIResourceList
	err   error
}

func (d *switchableDiscovery) set(err error, lists ...*metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lists, d.err = lists, err
}

func (d *switchableDiscovery) get() ([]*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lists, d.err
}

func builtinLists() []*metav1.APIResourceList {
	return []*metav1.APIResourceList{
		apiList("v1", "pods", "services", "configmaps", "secrets", "resourcequotas", "persistentvolumeclaims", "replicationcontrollers", "events"),
		apiList("apps/v1", "deployments"),
	}
}

type running struct {
	client    *fake.Clientset
	md        *fakemetadata.FakeMetadataClient
	rq        *Controller
	discovery *switchableDiscovery
	ctx       context.Context
}

// runController runs the controller as the controller manager does
// (DefaultOptions, Run and Sync), with full resyncs off so that only
// replenishment can lower usage.
func runController(t *testing.T, objs []runtime.Object, mdObjs []runtime.Object) *running {
	t.Helper()
	return runControllerWithResync(t, 0, objs, mdObjs)
}

func runControllerWithResync(t *testing.T, resync time.Duration, objs []runtime.Object, mdObjs []runtime.Object) *running {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(objs...)
	md := newFakeMetadata(t, mdObjs...)
	typed := informers.NewSharedInformerFactory(client, 0)
	mdf := metadatainformer.NewSharedInformerFactory(md, 0)
	disc := &switchableDiscovery{}
	disc.set(nil, builtinLists()...)
	started := make(chan struct{})
	opts, err := DefaultOptions(client.CoreV1(), typed, mdf, disc.get, resync, nil, started, evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true})
	if err != nil {
		t.Fatal(err)
	}
	rq, err := NewController(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	typed.Start(ctx.Done())
	mdf.Start(ctx.Done())
	close(started)
	var wg sync.WaitGroup
	wg.Go(func() { rq.Run(ctx, 2) })
	wg.Go(func() { rq.Sync(ctx, disc.get, 50*time.Millisecond) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		typed.Shutdown()
		mdf.Shutdown()
	})
	return &running{client: client, md: md, rq: rq, discovery: disc, ctx: ctx}
}

func (r *running) waitUsed(t *testing.T, ns, name string, want v1.ResourceList) {
	t.Helper()
	var last v1.ResourceList
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		q, err := r.client.CoreV1().ResourceQuotas(ns).Get(r.ctx, name, metav1.GetOptions{})
		if err == nil {
			last = q.Status.Used
			if evaluator.Equals(q.Status.Used, want) && evaluator.Equals(q.Status.Hard, q.Spec.Hard) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s/%s: status.used = %s, want %s", ns, name, show(last), show(want))
}

func TestRunKeepsUsageCurrent(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10", "requests.cpu", "10", "count/configmaps", "10", "configmaps", "10",
		"services.nodeports", "10", "count/deployments.apps", "10", "persistentvolumeclaims", "10", "requests.storage", "10Gi"))
	q.ResourceVersion = ""
	a := pod("ns", "a", v1.PodRunning, rl("cpu", "1"))
	b := pod("ns", "b", v1.PodRunning, rl("cpu", "2"))
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{{Port: 80}, {Port: 81}}}}
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: v1.PersistentVolumeClaimSpec{Resources: v1.VolumeResourceRequirements{Requests: rl("storage", "1Gi")}}}
	r := runController(t, []runtime.Object{q, a, b, svc, claim}, []runtime.Object{
		partialObject(configMapsGVR, "ConfigMap", "ns", "cm"),
		partialObject(deploymentsGVR, "Deployment", "ns", "d1"),
		partialObject(deploymentsGVR, "Deployment", "ns", "d2"),
	})

	r.waitUsed(t, "ns", "q", rl("pods", "2", "requests.cpu", "3", "count/configmaps", "1", "configmaps", "1",
		"services.nodeports", "2", "count/deployments.apps", "2", "persistentvolumeclaims", "1", "requests.storage", "1Gi"))

	// Each change below lowers usage; with resyncs off only replenishment
	// can notice it.
	done := b.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	if _, err := r.client.CoreV1().Pods("ns").UpdateStatus(r.ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitUsed(t, "ns", "q", rl("pods", "1", "requests.cpu", "1", "count/configmaps", "1", "configmaps", "1",
		"services.nodeports", "2", "count/deployments.apps", "2", "persistentvolumeclaims", "1", "requests.storage", "1Gi"))

	if err := r.client.CoreV1().Pods("ns").Delete(r.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clusterIP := svc.DeepCopy()
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	if _, err := r.client.CoreV1().Services("ns").Update(r.ctx, clusterIP, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.md.Resource(configMapsGVR).Namespace("ns").Delete(r.ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.md.Resource(deploymentsGVR).Namespace("ns").Delete(r.ctx, "d1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.client.CoreV1().PersistentVolumeClaims("ns").Delete(r.ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitUsed(t, "ns", "q", rl("pods", "0", "requests.cpu", "0", "count/configmaps", "0", "configmaps", "0",
		"services.nodeports", "0", "count/deployments.apps", "1", "persistentvolumeclaims", "0", "requests.storage", "0"))
}

func TestRunResyncsAllQuotasPeriodically(t *testing.T) {
	q := quota("ns", "q", rl("pods", "10"))
	q.ResourceVersion = ""
	r := runControllerWithResync(t, 100*time.Millisecond, []runtime.Object{q}, nil)
	r.waitUsed(t, "ns", "q", rl("pods", "0"))
	// Creations trigger no replenishment (admission charges them); without
	// admission here, only the full resync can count this pod.
	if _, err := r.client.CoreV1().Pods("ns").Create(r.ctx, pod("ns", "a", v1.PodRunning, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitUsed(t, "ns", "q", rl("pods", "1"))
}

func TestSyncPicksUpNewResources(t *testing.T) {
	q := quota("ns", "q", rl("count/widgets.example.com", "5"))
	q.ResourceVersion = ""
	r := runController(t, []runtime.Object{q}, []runtime.Object{
		partialObject(widgetsGVR, "Widget", "ns", "w1"),
		partialObject(widgetsGVR, "Widget", "ns", "w2"),
	})
	// Nothing measures widgets yet: the status has hard but no usage.
	testutil.WaitFor(t, "the first status", func() bool {
		got, err := r.client.CoreV1().ResourceQuotas("ns").Get(r.ctx, "q", metav1.GetOptions{})
		return err == nil && got.Status.Hard != nil && got.Status.Used != nil
	})
	if got, _ := r.client.CoreV1().ResourceQuotas("ns").Get(r.ctx, "q", metav1.GetOptions{}); len(got.Status.Used) != 0 {
		t.Fatalf("used = %s before widgets were discovered", show(got.Status.Used))
	}

	r.discovery.set(nil, append(builtinLists(), apiList("example.com/v1", "widgets"))...)
	testutil.WaitFor(t, "a widgets monitor", func() bool {
		return r.rq.registry.Get(widgetsGVR.GroupResource()) != nil && r.rq.quotaMonitor.IsSynced(r.ctx)
	})
	// As the e2e test does: edit the quota so it is recalculated now.
	edited, err := r.client.CoreV1().ResourceQuotas("ns").Get(r.ctx, "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edited.Spec.Hard = rl("count/widgets.example.com", "6")
	if _, err := r.client.CoreV1().ResourceQuotas("ns").Update(r.ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitUsed(t, "ns", "q", rl("count/widgets.example.com", "2"))

	if err := r.md.Resource(widgetsGVR).Namespace("ns").Delete(r.ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitUsed(t, "ns", "q", rl("count/widgets.example.com", "1"))

	// A group failing discovery keeps its monitor; one gone loses it.
	failed := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{widgetsGVR.GroupVersion(): errors.New("unavailable")}}
	r.discovery.set(failed, apiList("v1", "pods", "services", "configmaps", "secrets", "resourcequotas", "persistentvolumeclaims", "replicationcontrollers"))
	testutil.WaitFor(t, "deployments to be dropped", func() bool {
		return !slices.Contains(monitored(r.rq.quotaMonitor), "deployments")
	})
	if got := monitored(r.rq.quotaMonitor); !slices.Contains(got, "widgets") || !slices.Contains(got, "pods") {
		t.Errorf("after a partial discovery failure: %v", got)
	}
}

func TestQueueNamesMatchUpstream(t *testing.T) {
	rec := testutil.RecordQueueNames()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	typed := informers.NewSharedInformerFactory(client, 0)
	disc := &switchableDiscovery{}
	disc.set(nil, builtinLists()...)
	opts, err := DefaultOptions(client.CoreV1(), typed, metadatainformer.NewSharedInformerFactory(newFakeMetadata(t), 0), disc.get, time.Minute, nil, make(chan struct{}), evaluator.Features{PodLevelResources: true, PodLevelResourcesFixKubeletQOSClass: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewController(ctx, opts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"resourcequota_primary", "resourcequota_priority", "resource_quota_controller_resource_changes"} {
		if !rec.Has(name) {
			t.Errorf("no workqueue named %q (have %v)", name, rec.Names())
		}
	}
}
