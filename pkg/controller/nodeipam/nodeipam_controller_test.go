package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/nodeipam/ipam/cidrset"
)

func cidr(t testing.TB, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func cidrString(n *net.IPNet) string {
	if n == nil {
		return ""
	}
	return n.String()
}

func newNode(name string, podCIDRs ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
		n.Spec.PodCIDRs = podCIDRs
	}
	return n
}

func config(t testing.TB, clusterCIDRs string, masks ...int) Config {
	t.Helper()
	cfg := Config{AllocatorType: RangeAllocatorType, NodeCIDRMaskSizes: masks}
	for _, s := range strings.Split(clusterCIDRs, ",") {
		cfg.ClusterCIDRs = append(cfg.ClusterCIDRs, cidr(t, s))
	}
	return cfg
}

// fixture is a controller over a fake client whose node cache the test
// fills by hand; nothing runs unless the test calls it.
type fixture struct {
	c        *Controller
	client   *fake.Clientset
	store    cache.Store
	recorder *record.FakeRecorder
	ctx      context.Context
	logger   klog.Logger
}

func newFixture(t *testing.T, cfg Config, existing ...*v1.Node) *fixture {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, n := range existing {
		objs = append(objs, n)
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := factory.Core().V1().Nodes()
	c, err := NewController(ctx, nodeInformer, client, cfg)
	if err != nil {
		t.Fatalf("NewNodeIpamController: %v", err)
	}
	rec := record.NewFakeRecorder(10)
	c.recorder = rec
	store := nodeInformer.Informer().GetStore()
	for _, n := range existing {
		if err := store.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	return &fixture{c: c, client: client, store: store, recorder: rec, ctx: ctx, logger: logger}
}

// addNode puts a node in the cache and the fake apiserver.
func (f *fixture) addNode(t *testing.T, n *v1.Node) {
	t.Helper()
	if err := f.store.Add(n); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Tracker().Add(n); err != nil {
		t.Fatal(err)
	}
}

// sync syncs one node the way a worker does and returns the CIDRs the
// node has in the fake apiserver afterwards.
func (f *fixture) sync(t *testing.T, name string) ([]string, error) {
	t.Helper()
	err := f.c.syncNode(f.ctx, name)
	n, getErr := f.client.CoreV1().Nodes().Get(f.ctx, name, metav1.GetOptions{})
	if getErr != nil {
		return nil, err
	}
	if len(n.Spec.PodCIDRs) > 0 && n.Spec.PodCIDR != n.Spec.PodCIDRs[0] {
		t.Errorf("node %s: podCIDR %s is not podCIDRs[0] of %v", name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
	}
	return n.Spec.PodCIDRs, err
}

// allocateNew adds a node without CIDRs, syncs it and returns its CIDRs.
func (f *fixture) allocateNew(t *testing.T, name string) []string {
	t.Helper()
	f.addNode(t, newNode(name))
	got, err := f.sync(t, name)
	if err != nil {
		t.Fatalf("sync %s: %v", name, err)
	}
	return got
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

func patches(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		if p, ok := a.(clienttesting.PatchAction); ok {
			out = append(out, fmt.Sprintf("%s %s %s", p.GetName(), p.GetPatchType(), p.GetPatch()))
		}
	}
	return out
}

func TestNewNodeIpamControllerErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		nodes   []*v1.Node
		wantErr string
	}{
		{name: "no cluster CIDR", cfg: Config{AllocatorType: RangeAllocatorType},
			wantErr: "Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set"},
		{name: "node mask shorter than cluster mask", cfg: config(t, "10.0.0.0/16", 8),
			wantErr: "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family"},
		{name: "IPv6 node mask too long", cfg: config(t, "fd00::/32", 64),
			wantErr: cidrset.ErrCIDRSetSubNetTooBig.Error()},
		{name: "legacy IPAMFromCluster", cfg: func() Config {
			c := config(t, "10.0.0.0/16", 24)
			c.AllocatorType = IPAMFromClusterAllocatorType
			return c
		}(),
			wantErr: "Error trying to Init(): legacy cloud provider support disabled at build time"},
		{name: "legacy IPAMFromCloud", cfg: func() Config {
			c := config(t, "10.0.0.0/16", 24)
			c.AllocatorType = IPAMFromCloudAllocatorType
			return c
		}(),
			wantErr: "Error trying to Init(): legacy cloud provider support disabled at build time"},
		{name: "unknown allocator", cfg: func() Config { c := config(t, "10.0.0.0/16", 24); c.AllocatorType = "Bogus"; return c }(),
			wantErr: "invalid CIDR allocator type: Bogus"},
		{name: "cloud allocator", cfg: Config{AllocatorType: CloudAllocatorType},
			wantErr: "invalid CIDR allocator type: CloudAllocator"},
		{name: "existing node outside the cluster CIDR", cfg: config(t, "10.0.0.0/16", 24), nodes: []*v1.Node{newNode("a", "10.9.0.0/24")},
			wantErr: "failed to mark cidr[10.9.0.0/24] at idx [0] as occupied for node: a: cidr 10.9.0.0/24 is out the range of cluster cidr 10.0.0.0/16"},
		{name: "existing node with more CIDRs than the cluster", cfg: config(t, "10.0.0.0/16", 24), nodes: []*v1.Node{newNode("a", "10.0.0.0/24", "fd00::/64")},
			wantErr: "node:a has an allocated cidr: fd00::/64 at index:1 that does not exist in cluster cidrs configuration"},
		{name: "existing node with garbage", cfg: config(t, "10.0.0.0/16", 24), nodes: []*v1.Node{newNode("a", "garbage")},
			wantErr: "failed to parse node a, CIDR garbage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var objs []runtime.Object
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			client := fake.NewClientset(objs...)
			factory := informers.NewSharedInformerFactory(client, 0)
			_, err := NewController(ctx, factory.Core().V1().Nodes(), client, tc.cfg)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewNodeIpamControllerNilClient(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	_, err := NewController(ctx, factory.Core().V1().Nodes(), nil, config(t, "10.0.0.0/16", 24))
	if err == nil || err.Error() != "kubeClient is nil when starting Controller" {
		t.Fatalf("err %v", err)
	}
}

// A node list that keeps failing ends the constructor with upstream's
// error once its context ends.
func TestNewNodeIpamControllerListFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		cancel()
		return true, nil, errors.New("injected")
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	_, err := NewController(ctx, factory.Core().V1().Nodes(), client, config(t, "10.0.0.0/16", 24))
	if err == nil || err.Error() != "failed to list all nodes in 10m0s, cannot proceed without updating CIDR map" {
		t.Fatalf("err %v", err)
	}
}

func TestAllocate(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		svc      string
		svc2     string
		existing []*v1.Node
		want     [][]string
	}{
		{name: "first blocks in order", cfg: config(t, "10.0.0.0/16", 24),
			want: [][]string{{"10.0.0.0/24"}, {"10.0.1.0/24"}}},
		{name: "IPv6", cfg: config(t, "fd00:1::/48", 64),
			want: [][]string{{"fd00:1::/64"}, {"fd00:1:0:1::/64"}}},
		{name: "dual stack follows the cluster CIDR order", cfg: config(t, "fd00:1::/48,10.0.0.0/16", 64, 24),
			want: [][]string{{"fd00:1::/64", "10.0.0.0/24"}, {"fd00:1:0:1::/64", "10.0.1.0/24"}}},
		{name: "service range inside is skipped", cfg: config(t, "10.0.0.0/16", 24), svc: "10.0.0.0/23",
			want: [][]string{{"10.0.2.0/24"}, {"10.0.3.0/24"}}},
		{name: "service range outside is ignored", cfg: config(t, "10.0.0.0/16", 24), svc: "10.96.0.0/12",
			want: [][]string{{"10.0.0.0/24"}}},
		{name: "secondary service range in the other family", cfg: config(t, "10.0.0.0/16,fd00:1::/48", 24, 64), svc: "10.0.0.0/24", svc2: "fd00:1::/63",
			want: [][]string{{"10.0.1.0/24", "fd00:1:0:2::/64"}}},
		{name: "existing nodes' CIDRs are not handed out", cfg: config(t, "10.0.0.0/16", 24),
			existing: []*v1.Node{newNode("old1", "10.0.0.0/24"), newNode("old2", "10.0.2.0/24"), newNode("bare")},
			want:     [][]string{{"10.0.1.0/24"}, {"10.0.3.0/24"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if tc.svc != "" {
				cfg.ServiceCIDR = cidr(t, tc.svc)
			}
			if tc.svc2 != "" {
				cfg.SecondaryServiceCIDR = cidr(t, tc.svc2)
			}
			f := newFixture(t, cfg, tc.existing...)
			for i, want := range tc.want {
				if got := f.allocateNew(t, fmt.Sprintf("n%d", i)); !slices.Equal(got, want) {
					t.Errorf("node %d got %v, want %v", i, got, want)
				}
			}
			if ev := f.events(); len(ev) != 0 {
				t.Errorf("events %v", ev)
			}
		})
	}
}

// The patch sets podCIDR and podCIDRs the way upstream's helper does.
func TestPatchBody(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/16,fd00::/48", 24, 64))
	f.allocateNew(t, "n")
	want := []string{`n application/strategic-merge-patch+json {"spec":{"podCIDR":"10.0.0.0/24","podCIDRs":["10.0.0.0/24","fd00::/64"]}}`}
	if got := patches(f.client.Actions()); !slices.Equal(got, want) {
		t.Errorf("patches %q, want %q", got, want)
	}
}

// A node that already has CIDRs is synced by occupying them, not writing.
func TestSyncOccupiesPresetCIDRs(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/16", 24))
	f.addNode(t, newNode("preset", "10.0.0.0/24"))
	if _, err := f.sync(t, "preset"); err != nil {
		t.Fatal(err)
	}
	if p := patches(f.client.Actions()); len(p) != 0 {
		t.Errorf("patched a node that has CIDRs: %v", p)
	}
	if got := f.allocateNew(t, "next"); !slices.Equal(got, []string{"10.0.1.0/24"}) {
		t.Errorf("next node got %v, want the block after the preset one", got)
	}
	// A preset CIDR outside the cluster CIDR is an error to retry.
	f.addNode(t, newNode("stray", "192.168.0.0/24"))
	if _, err := f.sync(t, "stray"); err == nil {
		t.Error("no error for a CIDR outside the cluster CIDR")
	}
}

func TestSyncSkips(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/16", 24))
	n := newNode("leaving")
	n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	f.addNode(t, n)
	if _, err := f.sync(t, "leaving"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncNode(f.ctx, "absent"); err != nil {
		t.Fatal(err)
	}
	if p := patches(f.client.Actions()); len(p) != 0 {
		t.Errorf("patches %v", p)
	}
	// Nothing was taken from the set.
	if got := f.allocateNew(t, "n"); !slices.Equal(got, []string{"10.0.0.0/24"}) {
		t.Errorf("got %v", got)
	}
}

func TestDeletedNodeReleasesCIDRs(t *testing.T) {
	for _, tombstone := range []bool{false, true} {
		t.Run(fmt.Sprintf("tombstone=%v", tombstone), func(t *testing.T) {
			f := newFixture(t, config(t, "10.0.0.0/22,fd00::/62", 24, 64))
			first := f.allocateNew(t, "a")
			f.allocateNew(t, "b")
			n, err := f.client.CoreV1().Nodes().Get(f.ctx, "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var obj interface{} = n
			if tombstone {
				obj = cache.DeletedFinalStateUnknown{Key: "a", Obj: n}
			}
			f.c.nodeDeleted(f.ctx, obj)
			// Allocation runs on: the range wraps before reusing a's CIDRs.
			for i := range 2 {
				f.allocateNew(t, fmt.Sprintf("fill%d", i))
			}
			if got := f.allocateNew(t, "c"); !slices.Equal(got, first) {
				t.Errorf("got %v, want the released %v", got, first)
			}
		})
	}
}

func TestExhaustion(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/24,fd00::/64", 24, 64))
	f.allocateNew(t, "a")
	f.addNode(t, newNode("b"))
	_, err := f.sync(t, "b")
	if err == nil || err.Error() != "failed to allocate cidr from cluster cidr at idx:0: "+cidrset.ErrCIDRRangeNoCIDRsRemaining.Error() {
		t.Fatalf("err %v", err)
	}
	if ev := f.events(); !slices.Equal(ev, []string{"Normal CIDRNotAvailable Node b status is now: CIDRNotAvailable"}) {
		t.Errorf("events %q", ev)
	}
}

// When only the second family is exhausted, the block taken from the first
// is given back so retries do not drain it.
func TestExhaustionOfSecondFamilyReleasesFirst(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/23,fd00::/64", 24, 64))
	f.allocateNew(t, "a")
	f.addNode(t, newNode("b"))
	for range 3 {
		_, err := f.sync(t, "b")
		if err == nil || !strings.HasPrefix(err.Error(), "failed to allocate cidr from cluster cidr at idx:1:") {
			t.Fatalf("err %v", err)
		}
	}
	if n, err := f.c.cidrSets[0].AllocateNext(); err != nil || n.String() != "10.0.1.0/24" {
		t.Errorf("IPv4 block leaked by the failed attempts: %v, %v", n, err)
	}
}

func TestPatchFailure(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantRelease bool
	}{
		{name: "conflict releases", err: apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n", errors.New("injected")), wantRelease: true},
		{name: "timeout keeps", err: apierrors.NewServerTimeout(schema.GroupResource{Resource: "nodes"}, "patch", 1), wantRelease: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One block only, so whether it was released shows directly.
			f := newFixture(t, config(t, "10.0.0.0/24", 24))
			f.addNode(t, newNode("n"))
			f.client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tc.err
			})
			if _, err := f.sync(t, "n"); err == nil {
				t.Fatal("no error")
			}
			if got := len(patches(f.client.Actions())); got != cidrUpdateRetries {
				t.Errorf("%d patches, want %d", got, cidrUpdateRetries)
			}
			if ev := f.events(); !slices.Equal(ev, []string{"Normal CIDRAssignmentFailed Node n status is now: CIDRAssignmentFailed"}) {
				t.Errorf("events %q", ev)
			}
			_, err := f.c.cidrSets[0].AllocateNext()
			if released := err == nil; released != tc.wantRelease {
				t.Errorf("released %v, want %v", released, tc.wantRelease)
			}
		})
	}
}

// The write is skipped when the cache shows the node got CIDRs between the
// allocation and the write.
func TestNodeGotCIDRsMeanwhile(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/23", 24))
	// The node object handed in has no CIDRs; the cache has some.
	if err := f.store.Add(newNode("n", "10.0.1.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := f.c.AllocateOrOccupyCIDR(f.ctx, newNode("n")); err != nil {
		t.Fatal(err)
	}
	if p := patches(f.client.Actions()); len(p) != 0 {
		t.Errorf("patches %v", p)
	}
	// The block taken for it was given back: both are free.
	for i := range 2 {
		if _, err := f.c.cidrSets[0].AllocateNext(); err != nil {
			t.Errorf("block %d: %v", i, err)
		}
	}
}

// A lost write acknowledgement: the cache already shows exactly the CIDRs
// just allocated, so there is nothing to write.
func TestNodeAlreadyHasProposedCIDRs(t *testing.T) {
	f := newFixture(t, config(t, "10.0.0.0/16", 24))
	if err := f.store.Add(newNode("n", "10.0.0.0/24")); err != nil {
		t.Fatal(err)
	}
	if err := f.c.AllocateOrOccupyCIDR(f.ctx, newNode("n")); err != nil {
		t.Fatal(err)
	}
	if p := patches(f.client.Actions()); len(p) != 0 {
		t.Errorf("patches %v", p)
	}
	// And the block stays taken.
	if got := f.allocateNew(t, "m"); !slices.Equal(got, []string{"10.0.1.0/24"}) {
		t.Errorf("got %v", got)
	}
}

func TestQueueName(t *testing.T) {
	rec := testutil.RecordQueueNames()
	newFixture(t, config(t, "10.0.0.0/16", 24))
	if !rec.Has("cidrallocator_node") {
		t.Errorf("no workqueue named cidrallocator_node (have %v)", rec.Names())
	}
}

// Run with real informers: new nodes get CIDRs, a deleted node's CIDR is
// handed out again once the range wraps, exhaustion is reported as an
// event from cidrAllocator, and Run returns once ctx is cancelled.
func TestRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(newNode("old", "10.0.0.0/24"))
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := NewController(ctx, factory.Core().V1().Nodes(), client, config(t, "10.0.0.0/23", 24))
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	podCIDRs := func(name string) []string {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return n.Spec.PodCIDRs
	}

	if _, err := client.CoreV1().Nodes().Create(ctx, newNode("new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("new to get 10.0.1.0/24", func() bool { return slices.Equal(podCIDRs("new"), []string{"10.0.1.0/24"}) })

	if _, err := client.CoreV1().Nodes().Create(ctx, newNode("third"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a CIDRNotAvailable event", func() bool {
		evs, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "CIDRNotAvailable" && e.Source.Component == "cidrAllocator" && e.InvolvedObject.Name == "third" && e.InvolvedObject.Kind == "Node" {
				return true
			}
		}
		return false
	})

	if err := client.CoreV1().Nodes().Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Poke the third node so it is retried without waiting for backoff.
	waitFor("third to get old's CIDR", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "third", metav1.GetOptions{})
		if err != nil {
			return false
		}
		if slices.Equal(n.Spec.PodCIDRs, []string{"10.0.0.0/24"}) {
			return true
		}
		n.Labels = map[string]string{"poke": fmt.Sprint(time.Now().UnixNano())}
		_, _ = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return false
	})
	cancel()
	<-done
	factory.Shutdown()
}
