package ephemeral

import (
	"context"
	controllertest "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	ephemeralutil "k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const ns = "ns"

func newPod(name string, volumes ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid")},
		Spec:       v1.PodSpec{Volumes: volumes},
	}
}

// ephemeralVolume has a template with labels, annotations and a spec, so
// copying each of them is checked.
func ephemeralVolume(name string) v1.Volume {
	return v1.Volume{
		Name: name,
		VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{
			VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "db"},
					Annotations: map[string]string{"note": "scratch"},
				},
				Spec: v1.PersistentVolumeClaimSpec{
					AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
					StorageClassName: ptr.To("fast"),
					Resources: v1.VolumeResourceRequirements{
						Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			},
		}},
	}
}

func emptyDir(name string) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
}

func newPVC(namespace, name string, owner *v1.Pod) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if owner != nil {
		pvc.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
		}}
	}
	return pvc
}

type fixture struct {
	ctx      context.Context
	client   *fake.Clientset
	ec       *Controller
	recorder *record.FakeRecorder
	podStore cache.Store
	pvcStore cache.Store
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer := factory.Core().V1().Pods()
	pvcInformer := factory.Core().V1().PersistentVolumeClaims()
	ec, err := NewController(ctx, client, podInformer, pvcInformer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ec.queue.ShutDown)
	f := &fixture{ctx: ctx, client: client, ec: ec, recorder: record.NewFakeRecorder(10),
		podStore: podInformer.Informer().GetStore(), pvcStore: pvcInformer.Informer().GetStore()}
	ec.recorder = f.recorder
	for _, obj := range objs {
		var err error
		switch obj.(type) {
		case *v1.Pod:
			err = f.podStore.Add(obj)
		case *v1.PersistentVolumeClaim:
			err = f.pvcStore.Add(obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func counter(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSyncPod(t *testing.T) {
	withData := newPod("p", emptyDir("tmp"), ephemeralVolume("data"))
	deletingPod := withData.DeepCopy()
	deletingPod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	// Same pod name, other UID: a claim left over from an earlier pod.
	leftover := newPVC(ns, "p-data", newPod("p"))
	leftover.OwnerReferences[0].UID = "earlier"
	tests := []struct {
		name        string
		objs        []runtime.Object
		key         string
		failCreate  bool
		wantCreated []string
		wantErr     bool
		wantEvents  []string
		wantFailed  float64
	}{
		{name: "creates the claim", objs: []runtime.Object{withData}, key: "ns/p", wantCreated: []string{"p-data"}},
		{name: "one claim per ephemeral volume", key: "ns/p",
			objs:        []runtime.Object{newPod("p", ephemeralVolume("a"), ephemeralVolume("b"))},
			wantCreated: []string{"p-a", "p-b"}},
		{name: "pod gone", key: "ns/p"},
		{name: "pod being deleted", objs: []runtime.Object{deletingPod}, key: "ns/p"},
		{name: "no ephemeral volume", objs: []runtime.Object{newPod("p", emptyDir("tmp"))}, key: "ns/p"},
		{name: "claim already created", objs: []runtime.Object{withData, newPVC(ns, "p-data", withData)}, key: "ns/p"},
		{name: "same name in another namespace does not count",
			objs: []runtime.Object{withData, newPVC("other", "p-data", nil)}, key: "ns/p", wantCreated: []string{"p-data"}},
		{name: "claim of that name not owned by the pod", objs: []runtime.Object{withData, newPVC(ns, "p-data", nil)}, key: "ns/p",
			wantErr:    true,
			wantEvents: []string{"Warning FailedBinding ephemeral volume data: PVC ns/p-data was not created for pod ns/p (pod is not owner)"}},
		{name: "claim owned by an earlier pod of the same name",
			objs: []runtime.Object{withData, leftover}, key: "ns/p",
			wantErr:    true,
			wantEvents: []string{"Warning FailedBinding ephemeral volume data: PVC ns/p-data was not created for pod ns/p (pod is not owner)"}},
		{name: "create fails", objs: []runtime.Object{withData}, key: "ns/p", failCreate: true,
			wantCreated: []string{"p-data"}, wantErr: true, wantFailed: 1,
			wantEvents: []string{`Warning FailedBinding ephemeral volume data: create PVC p-data: persistentvolumeclaims "p-data" already exists`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			if tc.failCreate {
				f.client.PrependReactor("create", "persistentvolumeclaims", func(action clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewAlreadyExists(action.GetResource().GroupResource(), "p-data")
				})
			}
			registerMetrics()
			attempts0, failures0 := counter(t, createAttempts), counter(t, createFailures)

			err := f.ec.syncPod(f.ctx, tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error %v, want error %v", err, tc.wantErr)
			}
			var created []string
			for _, a := range f.client.Actions() {
				if a.GetVerb() != "create" {
					t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
					continue
				}
				created = append(created, a.(clienttesting.CreateAction).GetObject().(*v1.PersistentVolumeClaim).Name)
			}
			if !reflect.DeepEqual(created, tc.wantCreated) {
				t.Errorf("created %v, want %v", created, tc.wantCreated)
			}
			if got := f.events(); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events %q, want %q", got, tc.wantEvents)
			}
			if d := counter(t, createAttempts) - attempts0; d != float64(len(tc.wantCreated)) {
				t.Errorf("create_total grew by %v, want %d", d, len(tc.wantCreated))
			}
			if d := counter(t, createFailures) - failures0; d != tc.wantFailed {
				t.Errorf("create_failures_total grew by %v, want %v", d, tc.wantFailed)
			}
		})
	}
}

// The claim is the template, named <pod>-<volume>, controlled by the pod.
func TestCreatedClaim(t *testing.T) {
	pod := newPod("p", ephemeralVolume("data"))
	f := newFixture(t, pod)
	if err := f.ec.syncPod(f.ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	pvc, err := f.client.CoreV1().PersistentVolumeClaims(ns).Get(f.ctx, "p-data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	template := pod.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate
	if !reflect.DeepEqual(pvc.Labels, template.Labels) || !reflect.DeepEqual(pvc.Annotations, template.Annotations) {
		t.Errorf("labels %v annotations %v", pvc.Labels, pvc.Annotations)
	}
	if !reflect.DeepEqual(pvc.Spec, template.Spec) {
		t.Errorf("spec %+v, want %+v", pvc.Spec, template.Spec)
	}
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if !reflect.DeepEqual(pvc.OwnerReferences, want) {
		t.Errorf("owner references %+v", pvc.OwnerReferences)
	}
	if err := ephemeralutil.VolumeIsForPod(pod, pvc); err != nil {
		t.Error(err)
	}
	// The informer's pod must not share maps with the new claim.
	pvc.Labels["app"] = "changed"
	if template.Labels["app"] != "db" {
		t.Error("claim aliases the pod's template labels")
	}
}

func TestEventHandlers(t *testing.T) {
	withData := newPod("p", ephemeralVolume("data"))
	deletingPod := withData.DeepCopy()
	deletingPod.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	f := newFixture(t, withData, newPod("plain", emptyDir("tmp")), newPod("other", ephemeralVolume("x")))

	f.ec.enqueuePod(newPod("plain", emptyDir("tmp")))
	f.ec.enqueuePod(deletingPod)
	if f.ec.queue.Len() != 0 {
		t.Fatalf("queued a pod without ephemeral volumes or being deleted")
	}
	f.ec.enqueuePod(withData)
	if key, _ := f.ec.queue.Get(); key != "ns/p" {
		t.Fatalf("queued %q", key)
	} else {
		f.ec.queue.Done(key)
	}

	// Deleting a claim wakes the pods naming it, tombstone or not.
	f.ec.deletePVC(newPVC(ns, "p-data", withData))
	f.ec.deletePVC(cache.DeletedFinalStateUnknown{Key: "ns/other-x", Obj: newPVC(ns, "other-x", nil)})
	f.ec.deletePVC(newPVC(ns, "unrelated", nil))
	var got []string
	for f.ec.queue.Len() > 0 {
		key, _ := f.ec.queue.Get()
		got = append(got, key)
		f.ec.queue.Done(key)
	}
	if !reflect.DeepEqual(got, []string{"ns/p", "ns/other"}) {
		t.Errorf("queued %v after claim deletions", got)
	}
}

func TestPodPVCIndex(t *testing.T) {
	pod := newPod("p", ephemeralVolume("data"), emptyDir("tmp"), v1.Volume{
		Name: "claim", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}},
	})
	keys, err := podPVCKeys(pod)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ns/p-data", "ns/shared"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("index keys %v, want %v", keys, want)
	}
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	if err := AddPodPVCIndexer(informer); err != nil {
		t.Fatal(err)
	}
	if err := AddPodPVCIndexer(informer); err != nil {
		t.Fatalf("adding the index twice: %v", err)
	}
	if err := informer.GetStore().Add(pod); err != nil {
		t.Fatal(err)
	}
	pods, err := PodsForPVC(informer.GetIndexer(), ns, "shared")
	if err != nil || len(pods) != 1 || pods[0].Name != "p" {
		t.Errorf("PodsForPVC = %v, %v", pods, err)
	}
}

// Queue and metric names are upstream's: they are what dashboards query.
func TestNames(t *testing.T) {
	rec := controllertest.RecordQueueNames()
	newFixture(t)
	if !rec.Has("ephemeral_volume") {
		t.Errorf("no workqueue named ephemeral_volume (have %v)", rec.Names())
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, fam := range families {
		seen[fam.GetName()] = true
	}
	for _, name := range []string{"ephemeral_volume_controller_create_total", "ephemeral_volume_controller_create_failures_total"} {
		if !seen[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}

// Run with real informers: the claim is created, a conflicting claim is
// reported with an event from component ephemeral_volume, and Run returns
// once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	good := newPod("good", ephemeralVolume("data"))
	clash := newPod("clash", ephemeralVolume("data"))
	client := fake.NewClientset(good, clash, newPVC(ns, "clash-data", nil))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(ctx, client, factory.Core().V1().Pods(), factory.Core().V1().PersistentVolumeClaims())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 2)
	}()
	var event *v1.Event
	deadline := time.Now().Add(30 * time.Second)
	for event == nil {
		if time.Now().After(deadline) {
			t.Fatal("no claim or no event")
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "good-data", metav1.GetOptions{}); err != nil {
			continue
		}
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(events.Items) > 0 {
			event = &events.Items[0]
		}
	}
	if event.InvolvedObject.Name != "clash" || event.Type != v1.EventTypeWarning || event.Reason != EventReasonFailedBinding ||
		event.Source.Component != "ephemeral_volume" ||
		event.Message != "ephemeral volume data: PVC ns/clash-data was not created for pod ns/clash (pod is not owner)" {
		t.Errorf("event %+v", event)
	}
	cancel()
	<-done
	factory.Shutdown()
}
