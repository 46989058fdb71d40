package vacprotection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

const ns = "default"

func newVAC(name string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: "csi.example.com"}
}

func protected(vac *storagev1.VolumeAttributesClass) *storagev1.VolumeAttributesClass {
	vac.Finalizers = append(vac.Finalizers, Finalizer)
	return vac
}

func deleting(vac *storagev1.VolumeAttributesClass) *storagev1.VolumeAttributesClass {
	vac.DeletionTimestamp = &metav1.Time{Time: time.Unix(123, 0)}
	return vac
}

func withFinalizer(f string, vac *storagev1.VolumeAttributesClass) *storagev1.VolumeAttributesClass {
	vac.Finalizers = append(vac.Finalizers, f)
	return vac
}

// newPVC returns a claim referencing classes through spec, status and the
// modification target; "" leaves a field unset.
func newPVC(name, spec, current, target string) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if spec != "" {
		pvc.Spec.VolumeAttributesClassName = ptr.To(spec)
	}
	if current != "" {
		pvc.Status.CurrentVolumeAttributesClassName = ptr.To(current)
	}
	if target != "" {
		pvc.Status.ModifyVolumeStatus = &v1.ModifyVolumeStatus{TargetVolumeAttributesClassName: target}
	}
	return pvc
}

func newPV(name, vac string) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if vac != "" {
		pv.Spec.VolumeAttributesClassName = ptr.To(vac)
	}
	return pv
}

type fixture struct {
	c      *Controller
	client *fake.Clientset
	logger klog.Logger
	ctx    context.Context
}

// newFixture builds a controller whose caches hold objs; nothing runs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcInformer := factory.Core().V1().PersistentVolumeClaims()
	pvInformer := factory.Core().V1().PersistentVolumes()
	vacInformer := factory.Storage().V1().VolumeAttributesClasses()
	c, err := NewController(logger, client, pvcInformer, pvInformer, vacInformer)
	if err != nil {
		t.Fatal(err)
	}
	// Retry without delay so the test needs no clock.
	c.queue = workqueue.NewTypedRateLimitingQueue[string](workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0))
	c.loop.Queue = c.queue
	t.Cleanup(c.queue.ShutDown)
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.PersistentVolumeClaim:
			err = pvcInformer.Informer().GetStore().Add(o)
		case *v1.PersistentVolume:
			err = pvInformer.Informer().GetStore().Add(o)
		case *storagev1.VolumeAttributesClass:
			err = vacInformer.Informer().GetStore().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{c: c, client: client, logger: logger, ctx: ctx}
}

func (f *fixture) drain(t *testing.T) {
	t.Helper()
	for i := 0; f.c.queue.Len() > 0; i++ {
		if i > 10 {
			t.Fatal("queue does not drain")
		}
		f.c.loop.ProcessNextWorkItem(f.ctx)
	}
}

func (f *fixture) queued() []string {
	out := testutil.Drain[string](f.c.queue)
	slices.Sort(out)
	return out
}

func describe(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if u, ok := a.(clienttesting.UpdateAction); ok {
			vac := u.GetObject().(*storagev1.VolumeAttributesClass)
			out = append(out, fmt.Sprintf("update %s [%s]", vac.Name, strings.Join(vac.Finalizers, ",")))
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

func TestSync(t *testing.T) {
	tests := []struct {
		name   string
		vac    *storagev1.VolumeAttributesClass
		others []runtime.Object
		failN  int
		queued bool
		want   []string
	}{
		{name: "class without finalizer gets it", vac: newVAC("c"), queued: true,
			want: []string{"update c [kubernetes.io/vac-protection]"}},
		{name: "other finalizers are kept when adding", vac: withFinalizer("x/y", newVAC("c")), queued: true,
			want: []string{"update c [x/y,kubernetes.io/vac-protection]"}},
		{name: "class with finalizer is left alone", vac: protected(newVAC("c"))},
		{name: "failed add is retried", vac: newVAC("c"), queued: true, failN: 2,
			want: []string{"update c [kubernetes.io/vac-protection]", "update c [kubernetes.io/vac-protection]", "update c [kubernetes.io/vac-protection]"}},
		{name: "deleted unused class loses it", vac: deleting(protected(newVAC("c"))), queued: true,
			others: []runtime.Object{newPV("pv", "other"), newPVC("pvc", "other", "other", "other")},
			want:   []string{"update c []"}},
		{name: "deleted class loses only our finalizer", vac: deleting(withFinalizer("x/y", protected(newVAC("c")))), queued: true,
			want: []string{"update c [x/y]"}},
		{name: "failed removal is retried", vac: deleting(protected(newVAC("c"))), queued: true, failN: 1,
			want: []string{"update c []", "update c []"}},
		{name: "deleted class used by a PV is kept", vac: deleting(protected(newVAC("c"))), queued: true,
			others: []runtime.Object{newPV("pv", "c")}},
		{name: "deleted class asked for by a PVC is kept", vac: deleting(protected(newVAC("c"))), queued: true,
			others: []runtime.Object{newPVC("pvc", "c", "", "")}},
		{name: "deleted class a PVC's volume has is kept", vac: deleting(protected(newVAC("c"))), queued: true,
			others: []runtime.Object{newPVC("pvc", "other", "c", "")}},
		{name: "deleted class a PVC is being modified to is kept", vac: deleting(protected(newVAC("c"))), queued: true,
			others: []runtime.Object{newPVC("pvc", "other", "other", "c")}},
		{name: "deleted class without our finalizer is not queued", vac: deleting(withFinalizer("x/y", newVAC("c")))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append([]runtime.Object{tc.vac}, tc.others...)...)
			calls := 0
			f.client.PrependReactor("update", "volumeattributesclasses", func(a clienttesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls <= tc.failN {
					return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), "c", errors.New("injected"))
				}
				return false, nil, nil
			})
			f.client.ClearActions()
			f.c.vacAddedUpdated(f.logger, tc.vac)
			if got := f.c.queue.Len() == 1; got != tc.queued {
				t.Fatalf("queued %v, want %v", got, tc.queued)
			}
			f.drain(t)
			if got := describe(f.client.Actions()); !slices.Equal(got, tc.want) {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSyncMissingClass(t *testing.T) {
	f := newFixture(t)
	if err := f.c.syncVAC(f.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if a := f.client.Actions(); len(a) != 0 {
		t.Errorf("actions %v", describe(a))
	}
}

func TestPVCNames(t *testing.T) {
	tests := []struct {
		pvc  *v1.PersistentVolumeClaim
		want []string
	}{
		{newPVC("p", "", "", ""), nil},
		{newPVC("p", "a", "", ""), []string{"a"}},
		{newPVC("p", "", "b", ""), []string{"b"}},
		{newPVC("p", "", "", "c"), []string{"c"}},
		{newPVC("p", "a", "a", "a"), []string{"a"}},
		{newPVC("p", "c", "b", "a"), []string{"a", "b", "c"}},
	}
	for _, tc := range tests {
		if got := pvcVACNames(tc.pvc); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.pvc.Spec, got, tc.want)
		}
	}
	// An empty name is no reference.
	empty := newPVC("p", "", "", "")
	empty.Spec.VolumeAttributesClassName = ptr.To("")
	empty.Status.CurrentVolumeAttributesClassName = ptr.To("")
	if got := pvcVACNames(empty); len(got) != 0 {
		t.Errorf("empty names: %v", got)
	}
	if got := pvVACNames(newPV("pv", "a")); !slices.Equal(got, []string{"a"}) {
		t.Errorf("PV: %v", got)
	}
	if got := pvVACNames(newPV("pv", "")); len(got) != 0 {
		t.Errorf("PV without class: %v", got)
	}
}

// Only references that go away wake a class.
func TestPVCAndPVHandlers(t *testing.T) {
	f := newFixture(t)
	check := func(what string, want ...string) {
		t.Helper()
		if got := f.queued(); !slices.Equal(got, want) {
			t.Errorf("%s queued %v, want %v", what, got, want)
		}
	}
	f.c.pvcUpdated(f.logger, newPVC("p", "a", "a", ""), newPVC("p", "b", "a", "b"))
	check("PVC spec change with status still on a")
	f.c.pvcUpdated(f.logger, newPVC("p", "b", "a", "b"), newPVC("p", "b", "b", ""))
	check("PVC modification done", "a")
	f.c.pvcUpdated(f.logger, newPVC("p", "", "", ""), newPVC("p", "a", "", ""))
	check("PVC gaining a reference")
	f.c.pvcDeleted(f.logger, newPVC("p", "a", "b", "c"))
	check("PVC deleted", "a", "b", "c")
	f.c.pvcDeleted(f.logger, cache.DeletedFinalStateUnknown{Key: ns + "/p", Obj: newPVC("p", "a", "", "")})
	check("PVC tombstone", "a")

	f.c.pvUpdated(f.logger, newPV("pv", "a"), newPV("pv", "a"))
	check("PV unchanged")
	f.c.pvUpdated(f.logger, newPV("pv", "a"), newPV("pv", "b"))
	check("PV class change", "a")
	f.c.pvDeleted(f.logger, newPV("pv", "b"))
	check("PV deleted", "b")
	f.c.pvDeleted(f.logger, cache.DeletedFinalStateUnknown{Key: "pv", Obj: newPV("pv", "c")})
	check("PV tombstone", "c")
}

func TestNewController(t *testing.T) {
	rec := testutil.RecordQueueNames()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pvcInformer := factory.Core().V1().PersistentVolumeClaims()
	pvInformer := factory.Core().V1().PersistentVolumes()
	if _, err := NewController(klog.Background(), client, pvcInformer, pvInformer, factory.Storage().V1().VolumeAttributesClasses()); err != nil {
		t.Fatal(err)
	}
	if !rec.Has("vacprotection") {
		t.Errorf("no workqueue named vacprotection (have %v)", rec.Names())
	}
	for name, inf := range map[string]cache.SharedIndexInformer{"PVC": pvcInformer.Informer(), "PV": pvInformer.Informer()} {
		if _, ok := inf.GetIndexer().GetIndexers()["volumeAttributesClassName"]; !ok {
			t.Errorf("%s informer lacks the volumeAttributesClassName index", name)
		}
	}
}

// Run with real informers: a new class gets the finalizer, a deleted class
// keeps it while a PVC uses it and loses it once the PVC is gone, and Run
// returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(newVAC("new"), deleting(protected(newVAC("used"))), newPVC("pvc", "used", "", ""))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(klog.FromContext(ctx), client,
		factory.Core().V1().PersistentVolumeClaims(), factory.Core().V1().PersistentVolumes(), factory.Storage().V1().VolumeAttributesClasses())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, 1)
	}()
	finalizers := func(name string) []string {
		v, err := client.StorageV1().VolumeAttributesClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return v.Finalizers
	}
	testutil.WaitFor(t, "the new class to get the finalizer", func() bool { return slices.Contains(finalizers("new"), Finalizer) })
	if !slices.Contains(finalizers("used"), Finalizer) {
		t.Fatal("the class in use lost its finalizer")
	}
	if err := client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "pvc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the unused class to lose the finalizer", func() bool { return !slices.Contains(finalizers("used"), Finalizer) })
	cancel()
	<-done
	factory.Shutdown()
}
