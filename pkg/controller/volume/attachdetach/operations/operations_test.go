package operations

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/cache"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/volume/attachdetach/plugins"
)

// fakePlugin attaches volumes whose spec is a PV with a FlexVolume source
// (any source no real plugin here claims would do).
type fakePlugin struct {
	mu        sync.Mutex
	attachErr error
	detachErr error
	attached  []string
	detached  []string
	release   chan struct{}
}

func (p *fakePlugin) Name() string { return "example.com/fake" }
func (p *fakePlugin) CanSupport(s *plugins.Spec) bool {
	return s != nil && s.PersistentVolume != nil && s.PersistentVolume.Spec.FlexVolume != nil
}
func (p *fakePlugin) VolumeName(s *plugins.Spec) (string, error) {
	return s.PersistentVolume.Spec.FlexVolume.Driver, nil
}
func (p *fakePlugin) CanAttach(*plugins.Spec) (bool, error) { return true, nil }
func (p *fakePlugin) Attach(_ context.Context, s *plugins.Spec, n types.NodeName) (string, error) {
	if p.release != nil {
		<-p.release
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.attachErr != nil {
		return "", p.attachErr
	}
	p.attached = append(p.attached, s.Name()+"@"+string(n))
	return "/dev/fake", nil
}
func (p *fakePlugin) Detach(_ context.Context, name string, n types.NodeName) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detachErr != nil {
		return p.detachErr
	}
	p.detached = append(p.detached, name+"@"+string(n))
	return nil
}
func (p *fakePlugin) VolumesAreAttached(_ context.Context, specs []*plugins.Spec, _ types.NodeName) (map[*plugins.Spec]bool, error) {
	out := map[*plugins.Spec]bool{}
	for _, s := range specs {
		out[s] = s.Name() != "gone"
	}
	return out, nil
}

func fakeSpec(pvName, id string, modes ...v1.PersistentVolumeAccessMode) *plugins.Spec {
	return plugins.SpecFromPV(&v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            modes,
			PersistentVolumeSource: v1.PersistentVolumeSource{FlexVolume: &v1.FlexPersistentVolumeSource{Driver: id}},
		},
	}, false)
}

type fixture struct {
	plugin   *fakePlugin
	executor *Executor
	asw      *cache.ActualStateOfWorld
	recorder *record.FakeRecorder
	client   *fake.Clientset
}

func newFixture(objects ...*v1.Node) *fixture {
	f := &fixture{plugin: &fakePlugin{}, recorder: record.NewFakeRecorder(10), client: fake.NewClientset()}
	for _, n := range objects {
		_ = f.client.Tracker().Add(n)
	}
	pm := plugins.NewManager(f.plugin)
	f.asw = cache.NewActualStateOfWorld(pm)
	f.executor = NewExecutor(f.client, pm, f.recorder)
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

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
}

func TestAttachSuccess(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture()
	v := cache.VolumeToAttach{VolumeName: "example.com/fake/id", Spec: fakeSpec("pv-1", "id", v1.ReadWriteOnce), NodeName: "n1", ScheduledPods: []*v1.Pod{pod("a")}}
	if err := f.executor.AttachVolume(ctx, v, f.asw); err != nil {
		t.Fatal(err)
	}
	f.executor.Wait()
	if f.asw.GetAttachState(v.VolumeName, "n1") != cache.AttachStateAttached {
		t.Error("not marked attached")
	}
	if got := f.asw.GetAttachedVolumes()[0].DevicePath; got != "/dev/fake" {
		t.Errorf("device path %q", got)
	}
	want := []string{`Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "pv-1" `}
	if got := f.events(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("events = %q, want %q", got, want)
	}
}

func TestAttachFailureBacksOff(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture()
	f.plugin.attachErr = errors.New("boom")
	v := cache.VolumeToAttach{VolumeName: "example.com/fake/id", Spec: fakeSpec("pv-1", "id", v1.ReadWriteOnce), NodeName: "n1", ScheduledPods: []*v1.Pod{pod("a")}}
	if err := f.executor.AttachVolume(ctx, v, f.asw); err != nil {
		t.Fatal(err)
	}
	f.executor.Wait()
	if f.asw.GetAttachState(v.VolumeName, "n1") != cache.AttachStateUncertain {
		t.Error("a failed attach leaves the volume uncertain")
	}
	want := `Warning FailedAttachVolume AttachVolume.Attach failed for volume "pv-1" : boom`
	if got := f.events(); len(got) != 1 || got[0] != want {
		t.Errorf("events = %q, want %q", got, want)
	}
	err := f.executor.AttachVolume(ctx, v, f.asw)
	if !IsBackoff(err) {
		t.Fatalf("retry right away: got %v, want backoff", err)
	}
	if !strings.Contains(err.Error(), "No retries permitted until") {
		t.Errorf("backoff error %q", err)
	}
	// The volume is exclusive: any node is blocked, but a detach may go.
	if f.executor.IsOperationSafeToRetry(v.VolumeName, "", AttachOperationName) {
		t.Error("attach must be backing off")
	}
	if !f.executor.IsOperationSafeToRetry(v.VolumeName, "", DetachOperationName) {
		t.Error("a detach is a different operation and may start")
	}
}

func TestPendingOperationsExclusive(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture()
	f.plugin.release = make(chan struct{})
	rwo := cache.VolumeToAttach{VolumeName: "example.com/fake/rwo", Spec: fakeSpec("pv", "rwo", v1.ReadWriteOnce), NodeName: "n1"}
	if err := f.executor.AttachVolume(ctx, rwo, f.asw); err != nil {
		t.Fatal(err)
	}
	if !f.executor.IsOperationPending(rwo.VolumeName, "") || !f.executor.IsOperationPending(rwo.VolumeName, "n2") {
		t.Error("an exclusive volume's operation blocks every node")
	}
	other := rwo
	other.NodeName = "n2"
	if err := f.executor.AttachVolume(ctx, other, f.asw); err == nil {
		t.Error("second attach of an exclusive volume must not start")
	}

	rwx := cache.VolumeToAttach{VolumeName: "example.com/fake/rwx", Spec: fakeSpec("pv", "rwx", v1.ReadWriteMany), NodeName: "n1"}
	rwx2 := rwx
	rwx2.NodeName = "n2"
	if err := f.executor.AttachVolume(ctx, rwx, f.asw); err != nil {
		t.Fatal(err)
	}
	if err := f.executor.AttachVolume(ctx, rwx2, f.asw); err != nil {
		t.Errorf("a multi-attach volume may attach to two nodes at once: %v", err)
	}
	if f.executor.IsOperationPending(rwx.VolumeName, "n3") {
		t.Error("nothing runs on n3")
	}
	close(f.plugin.release)
	f.executor.Wait()
	if f.executor.IsOperationPending(rwo.VolumeName, "") {
		t.Error("finished operations are not pending")
	}
}

func TestDetach(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	logger, _ := ktesting.NewTestContext(t)
	inUse := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Status: v1.NodeStatus{VolumesInUse: []v1.UniqueVolumeName{"example.com/fake/id"}}}
	idle := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	f := newFixture(inUse, idle)
	spec := fakeSpec("pv-1", "id", v1.ReadWriteOnce)
	if err := f.asw.MarkVolumeAsAttached(logger, "example.com/fake/id", spec, "busy", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.asw.MarkVolumeAsAttached(logger, "example.com/fake/idle-id", nil, "idle", ""); err != nil {
		t.Fatal(err)
	}
	busy := cache.AttachedVolume{VolumeName: "example.com/fake/id", Spec: spec, NodeName: "busy"}
	if err := f.executor.DetachVolume(ctx, busy, true, f.asw); err != nil {
		t.Fatal(err)
	}
	f.executor.Wait()
	if len(f.plugin.detached) != 0 {
		t.Errorf("detached a volume the node has in use: %v", f.plugin.detached)
	}
	if f.asw.GetAttachState(busy.VolumeName, "busy") != cache.AttachStateUncertain {
		t.Error("a failed detach leaves the volume uncertain")
	}

	// Without a spec (known from node status only) the unique name is used.
	noSpec := cache.AttachedVolume{VolumeName: "example.com/fake/idle-id", NodeName: "idle"}
	if err := f.executor.DetachVolume(ctx, noSpec, true, f.asw); err != nil {
		t.Fatal(err)
	}
	f.executor.Wait()
	if len(f.plugin.detached) != 1 || f.plugin.detached[0] != "idle-id@idle" {
		t.Errorf("detached = %v", f.plugin.detached)
	}
	if f.asw.GetAttachState(noSpec.VolumeName, "idle") != cache.AttachStateDetached {
		t.Error("not marked detached")
	}
	if len(f.events()) != 0 {
		t.Error("detach records no events")
	}

	// Forced: no node check.
	if err := f.executor.DetachVolume(ctx, cache.AttachedVolume{VolumeName: "example.com/fake/other", Spec: fakeSpec("pv-2", "other"), NodeName: "busy"}, false, f.asw); err != nil {
		t.Fatal(err)
	}
	f.executor.Wait()
	if len(f.plugin.detached) != 2 {
		t.Errorf("forced detach did not run: %v", f.plugin.detached)
	}
	if err := f.executor.DetachVolume(ctx, cache.AttachedVolume{VolumeName: "unknown/plugin/x", NodeName: "idle"}, false, f.asw); err == nil {
		t.Error("unknown plugin must fail to start")
	}
}

func TestVerifyVolumesAreAttached(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	logger, _ := ktesting.NewTestContext(t)
	f := newFixture()
	kept, gone := fakeSpec("kept", "kept"), fakeSpec("gone", "gone")
	_ = f.asw.MarkVolumeAsAttached(logger, "example.com/fake/kept", kept, "n", "")
	_ = f.asw.MarkVolumeAsAttached(logger, "example.com/fake/gone", gone, "n", "")
	_ = f.asw.MarkVolumeAsAttached(logger, "example.com/fake/nospec", nil, "n", "")
	f.executor.VerifyVolumesAreAttached(ctx, f.asw.GetAttachedVolumesPerNode(), f.asw)
	f.executor.Wait()
	if f.asw.GetAttachState("example.com/fake/gone", "n") != cache.AttachStateDetached {
		t.Error("volume no longer attached must be forgotten")
	}
	for _, n := range []v1.UniqueVolumeName{"example.com/fake/kept", "example.com/fake/nospec"} {
		if f.asw.GetAttachState(n, "n") != cache.AttachStateAttached {
			t.Errorf("%s must stay", n)
		}
	}
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &pending{now: func() time.Time { return now }}
	k := opKey{volume: "v"}
	fail := errors.New("x")
	var last time.Duration
	for i := 0; i < 12; i++ {
		done := make(chan struct{})
		if err := p.start(k, "op", func() error { return fail }, func(error) { close(done) }); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		<-done
		op := p.findLocked(k)
		if i == 0 && op.backoff != initialBackoff {
			t.Errorf("first backoff %v", op.backoff)
		}
		if op.backoff < last || op.backoff > maxBackoff {
			t.Errorf("round %d: backoff %v after %v", i, op.backoff, last)
		}
		last = op.backoff
		now = now.Add(op.backoff + time.Millisecond)
	}
	if last != maxBackoff {
		t.Errorf("backoff capped at %v, want %v", last, maxBackoff)
	}
	p.wg.Wait()
}
