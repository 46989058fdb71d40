package attachdetach

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// attachedFixture has volume h1 attached to node n (per node status) with
// no pod needing it, and the node reporting it in use or not.
func attachedFixture(t *testing.T, disableForce bool, n *v1.Node, inUse bool) *fixture {
	t.Helper()
	_, pv := boundCSI("ns", "c", "h1")
	n.Status.VolumesAttached = []v1.AttachedVolume{{Name: csiName("h1")}}
	if inUse {
		n.Status.VolumesInUse = []v1.UniqueVolumeName{csiName("h1")}
	}
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: plugins.AttachmentName("h1", "d", n.Name)},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: n.Name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv.Name}},
		Status:     storagev1.VolumeAttachmentStatus{Attached: true},
	}
	f := newFixture(t, disableForce, n, pv, va)
	if err := f.adc.populateActualStateOfWorld(f.logger); err != nil {
		t.Fatal(err)
	}
	// The informer would drop the deleted attachment; the fake one does not.
	f.client.PrependReactor("delete", "volumeattachments", func(a core.Action) (bool, runtime.Object, error) {
		_ = f.factory.Storage().V1().VolumeAttachments().Informer().GetIndexer().Delete(va)
		return false, nil, nil
	})
	return f
}

func (f *fixture) attachmentDeleted() bool {
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "volumeattachments" {
			return true
		}
	}
	return false
}

// reconcileFor runs reconcile passes for d, letting operations finish.
func (f *fixture) reconcileFor(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		f.adc.reconciler.reconcile(f.ctx)
		f.adc.executor.Wait()
		time.Sleep(10 * time.Millisecond)
	}
}

func notReady(n *v1.Node) *v1.Node {
	n.Status.Conditions[0].Status = v1.ConditionFalse
	return n
}

func outOfService(n *v1.Node) *v1.Node {
	n.Spec.Taints = []v1.Taint{{Key: v1.TaintNodeOutOfService, Effect: v1.TaintEffectNoExecute}}
	return n
}

func TestReconcilerDetachDecisions(t *testing.T) {
	cases := []struct {
		name         string
		node         *v1.Node
		inUse        bool
		disableForce bool
		detach       bool
		forced       string
	}{
		{name: "not in use", node: node("n", true), detach: true},
		{name: "in use on a healthy node", node: node("n", true), inUse: true},
		{name: "in use on a NotReady node past the timeout", node: notReady(node("n", true)), inUse: true, detach: true, forced: forceDetachReasonTimeout},
		{name: "in use on a NotReady node, force detach disabled", node: notReady(node("n", true)), inUse: true, disableForce: true},
		{name: "in use on an out-of-service node", node: outOfService(node("n", true)), inUse: true, detach: true, forced: forceDetachReasonOutOfService},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := attachedFixture(t, c.disableForce, c.node, c.inUse)
			before := map[string]float64{}
			for _, r := range []string{forceDetachReasonTimeout, forceDetachReasonOutOfService} {
				before[r], _ = testutil.GetCounterMetricValue(forcedDetaches.WithLabelValues(r))
			}
			if c.detach {
				// Reconcile until done: a loaded machine may need longer.
				f.reconcileUntil(f.attachmentDeleted)
			} else {
				// Longer than the fixture's 50ms unmount timeout.
				f.reconcileFor(300 * time.Millisecond)
			}
			if got := f.attachmentDeleted(); got != c.detach {
				t.Fatalf("detached = %v, want %v", got, c.detach)
			}
			for _, r := range []string{forceDetachReasonTimeout, forceDetachReasonOutOfService} {
				after, _ := testutil.GetCounterMetricValue(forcedDetaches.WithLabelValues(r))
				want := before[r]
				if r == c.forced {
					want++
				}
				if after != want {
					t.Errorf("forced detaches %q: %v -> %v, want %v", r, before[r], after, want)
				}
			}
			if c.detach && f.adc.asw.GetAttachState(csiName("h1"), "n") != cache.AttachStateDetached {
				t.Error("detached volume still in the actual state")
			}
		})
	}
}

// TestDetachUpdatesNodeStatusFirst: the volume leaves node status before
// the VolumeAttachment is deleted, so the kubelet does not mount it.
func TestDetachUpdatesNodeStatusFirst(t *testing.T) {
	f := attachedFixture(t, false, node("n", true), false)
	f.reconcileUntil(f.attachmentDeleted)
	var order []string
	for _, a := range f.client.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetResource().Resource == "nodes":
			order = append(order, "patch node")
		case a.GetVerb() == "delete":
			order = append(order, "delete attachment")
		}
	}
	if len(order) < 2 || order[0] != "patch node" || order[1] != "delete attachment" {
		t.Errorf("order = %v", order)
	}
}

// TestDetachRechecksNodeFromAPIServer: a stale cache saying "not in use"
// does not detach a volume the API server's node still lists in use.
func TestDetachRechecksNodeFromAPIServer(t *testing.T) {
	f := attachedFixture(t, false, node("n", true), false)
	apiNode, err := f.client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiNode.Status.VolumesInUse = []v1.UniqueVolumeName{csiName("h1")}
	if _, err := f.client.CoreV1().Nodes().UpdateStatus(context.Background(), apiNode, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcileFor(50 * time.Millisecond)
	if f.attachmentDeleted() {
		t.Error("detached a volume in use according to the API server")
	}
}

func TestReconcilerAttaches(t *testing.T) {
	pvc, pv := boundCSI("ns", "c", "h1")
	pod := claimPod("ns", "p", "n", "c")
	f := newFixture(t, false, node("n", true), pvc, pv, pod)
	f.adc.nodeAdd(f.logger, node("n", true))
	f.adc.podAdd(f.logger, pod)
	name := plugins.AttachmentName("h1", "d", "n")
	// The external-attacher answers once the attachment exists.
	f.client.PrependReactor("create", "volumeattachments", func(a core.Action) (bool, runtime.Object, error) {
		va := a.(core.CreateAction).GetObject().(*storagev1.VolumeAttachment).DeepCopy()
		va.Status.Attached = true
		f.cache(va)
		return false, nil, nil
	})
	f.reconcileUntil(func() bool {
		n, err := f.client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
		return err == nil && len(n.Status.VolumesAttached) != 0
	})
	if f.adc.asw.GetAttachState(csiName("h1"), "n") != cache.AttachStateAttached {
		t.Fatal("not attached")
	}
	got, err := f.client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []v1.AttachedVolume{{Name: csiName("h1")}}; len(got.Status.VolumesAttached) != 1 || got.Status.VolumesAttached[0] != want[0] {
		t.Errorf("volumesAttached = %v, want %v", got.Status.VolumesAttached, want)
	}
	if _, err := f.client.StorageV1().VolumeAttachments().Get(context.Background(), name, metav1.GetOptions{}); err != nil {
		t.Errorf("VolumeAttachment %s: %v", name, err)
	}
	evs := f.events()
	if len(evs) != 1 || evs[0] != `Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "pv-h1" ` {
		t.Errorf("events = %q", evs)
	}
}

func TestMultiAttachEvents(t *testing.T) {
	pvc, pv := boundCSI("ns", "c", "h1")
	pvcOther, _ := boundCSI("other", "c", "h1")
	f := newFixture(t, false, pvc, pv, pvcOther)
	for _, n := range []string{"a", "b", "c"} {
		f.adc.nodeAdd(f.logger, node(n, true))
	}
	holder := claimPod("ns", "holder", "a", "c")
	holder2 := claimPod("ns", "holder2", "a", "c")
	foreign := claimPod("other", "foreign", "a", "c")
	waiting := claimPod("ns", "waiting", "b", "c")
	for _, p := range []*v1.Pod{holder, holder2, foreign, waiting} {
		f.cache(p)
	}
	spec := plugins.SpecFromPV(pv, false)
	if err := f.adc.asw.MarkVolumeAsAttached(f.logger, csiName("h1"), spec, "a", ""); err != nil {
		t.Fatal(err)
	}
	v := cache.VolumeToAttach{VolumeName: csiName("h1"), Spec: spec, NodeName: "b", ScheduledPods: []*v1.Pod{waiting}}
	prefix := `Warning FailedAttachVolume Waiting for detach for volume "pv-h1" `

	// Only in another namespace's pods.
	if _, err := f.adc.dsw.AddPod(foreign, spec, "a"); err != nil {
		t.Fatal(err)
	}
	f.adc.reconciler.reportMultiAttachError(f.logger, v, []types.NodeName{"a"})
	// Plus pods in the waiting pod's namespace.
	for _, p := range []*v1.Pod{holder} {
		if _, err := f.adc.dsw.AddPod(p, spec, "a"); err != nil {
			t.Fatal(err)
		}
	}
	f.adc.reconciler.reportMultiAttachError(f.logger, v, []types.NodeName{"a"})
	want := []string{
		prefix + "Volume is already used by 1 pod(s) in different namespaces",
		prefix + "Volume is already used by pod(s) holder and 1 pod(s) in different namespaces",
	}
	// No pods left: only waiting for detach.
	f.adc.dsw.DeletePod(foreign.UID, csiName("h1"), "a")
	f.adc.dsw.DeletePod(holder.UID, csiName("h1"), "a")
	f.adc.reconciler.reportMultiAttachError(f.logger, v, []types.NodeName{"a"})
	want = append(want, prefix+"Volume is already exclusively attached to one node, waiting on detach before it can be attached to another node")
	if _, err := f.adc.dsw.AddPod(holder2, spec, "a"); err != nil {
		t.Fatal(err)
	}
	f.adc.reconciler.reportMultiAttachError(f.logger, v, []types.NodeName{"a", "b"})
	want = append(want, prefix+"Volume is already used by pod(s) holder2")

	got := f.events()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events:\n%q\nwant:\n%q", got, want)
	}

	// Through the reconciler: reported once, and no attach started.
	f.adc.podAdd(f.logger, waiting)
	f.reconcileFor(50 * time.Millisecond)
	if got := f.events(); len(got) != 1 || got[0] != prefix+"Volume is already used by pod(s) holder2" {
		t.Errorf("reconciler events = %q", got)
	}
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" {
			t.Errorf("unexpected %v", a)
		}
	}
}

func TestNodeStatusUpdater(t *testing.T) {
	n := node("n", true)
	n.Status.VolumesInUse = []v1.UniqueVolumeName{"x"}
	f := newFixture(t, false, n)
	for _, name := range []v1.UniqueVolumeName{csiName("b"), csiName("a")} {
		if err := f.adc.asw.MarkVolumeAsAttached(f.logger, name, nil, "n", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.adc.asw.MarkVolumeAsAttached(f.logger, csiName("z"), nil, "missing-node", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.adc.statusUpdater.UpdateNodeStatuses(f.ctx); err != nil {
		t.Fatal(err)
	}
	var patches []core.PatchAction
	for _, a := range f.client.Actions() {
		if p, ok := a.(core.PatchAction); ok {
			patches = append(patches, p)
		}
	}
	if len(patches) != 1 || patches[0].GetSubresource() != "status" || patches[0].GetName() != "n" || patches[0].GetPatchType() != types.StrategicMergePatchType {
		t.Fatalf("patches = %+v", patches)
	}
	var body map[string]interface{}
	if err := json.Unmarshal(patches[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	want := `map[status:map[volumesAttached:[map[devicePath: name:kubernetes.io/csi/d^a] map[devicePath: name:kubernetes.io/csi/d^b]]]]`
	if fmt.Sprint(body) != want {
		t.Errorf("patch = %s", patches[0].GetPatch())
	}
	got, _ := f.client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
	if len(got.Status.VolumesAttached) != 2 || len(got.Status.VolumesInUse) != 1 {
		t.Errorf("node status = %+v", got.Status)
	}

	// A failed patch is retried on the next pass.
	f.client.ClearActions()
	f.adc.asw.SetNodeStatusUpdateNeeded(f.logger, "n")
	f.client.PrependReactor("patch", "nodes", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("conflict")
	})
	if err := f.adc.statusUpdater.UpdateNodeStatuses(f.ctx); err == nil {
		t.Error("expected an error")
	}
	if ok, _ := f.adc.asw.GetVolumesToReportAttachedForNode(f.logger, "n"); !ok {
		t.Error("node not marked for another update")
	}
}

// TestReconcilerSync: every sync period the attachments are checked with
// the plugins (here: the VolumeAttachment is gone, so the volume is
// forgotten), unless the sync is disabled or shorter than a second.
func TestReconcilerSync(t *testing.T) {
	cases := []struct {
		name     string
		disabled bool
		period   time.Duration
		verified bool
	}{
		{name: "enabled", period: time.Minute, verified: true},
		{name: "disabled", disabled: true, period: time.Minute},
		{name: "under a second", period: 500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, pv := boundCSI("ns", "c", "h1")
			n := node("n", true)
			n.Status.VolumesInUse = []v1.UniqueVolumeName{csiName("h1")}
			f := newFixture(t, false, n, pv)
			f.adc.nodeAdd(f.logger, n)
			if err := f.adc.asw.MarkVolumeAsAttached(f.logger, csiName("h1"), plugins.SpecFromPV(pv, false), "n", ""); err != nil {
				t.Fatal(err)
			}
			f.adc.asw.SetVolumesMountedByNode(f.logger, n.Status.VolumesInUse, "n")
			rc := f.adc.reconciler
			rc.disableReconciliationSync, rc.syncDuration = c.disabled, c.period
			lastSync := time.Now().Add(-2 * time.Minute)
			rc.timeOfLastSync = lastSync
			rc.loop(f.ctx)
			f.adc.executor.Wait()
			detached := f.adc.asw.GetAttachState(csiName("h1"), "n") == cache.AttachStateDetached
			if detached != c.verified {
				t.Errorf("verified = %v, want %v", detached, c.verified)
			}
			if c.verified && !rc.timeOfLastSync.After(lastSync) {
				t.Error("sync time not updated")
			}
		})
	}
}

func TestNodeDelete(t *testing.T) {
	f := newFixture(t, false)
	n := node("n", true)
	n.Status.VolumesInUse = []v1.UniqueVolumeName{"x"}
	f.adc.nodeAdd(f.logger, n)
	f.adc.nodeDelete(f.logger, cacheTombstone(n))
	if f.adc.dsw.NodeExists("n") {
		t.Error("deleted node still managed")
	}
}
