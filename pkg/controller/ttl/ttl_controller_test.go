package ttl

import (
	"context"
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func node(name string, annotations map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestSyncNode(t *testing.T) {
	tests := []struct {
		name       string
		node       *v1.Node
		desired    int
		wantPatch  bool
		wantResult string
	}{
		{name: "no annotation", node: node("n", nil), desired: 0, wantPatch: true, wantResult: "0"},
		{name: "other annotations", node: node("n", map[string]string{"a": "b"}), desired: 15, wantPatch: true, wantResult: "15"},
		{name: "wrong value", node: node("n", map[string]string{v1.ObjectTTLAnnotationKey: "0"}), desired: 30, wantPatch: true, wantResult: "30"},
		{name: "not an int", node: node("n", map[string]string{v1.ObjectTTLAnnotationKey: "x"}), desired: 0, wantPatch: true, wantResult: "0"},
		{name: "already right", node: node("n", map[string]string{v1.ObjectTTLAnnotationKey: "60"}), desired: 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.node)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if err := indexer.Add(tc.node); err != nil {
				t.Fatal(err)
			}
			c := &Controller{kubeClient: client, nodeLister: corelisters.NewNodeLister(indexer), ttlSeconds: tc.desired}
			if err := c.syncNode(context.Background(), "n"); err != nil {
				t.Fatal(err)
			}
			actions := client.Actions()
			if !tc.wantPatch {
				if len(actions) != 0 {
					t.Fatalf("unexpected actions %v", actions)
				}
				return
			}
			if len(actions) != 1 || !actions[0].Matches("patch", "nodes") {
				t.Fatalf("want one node patch, got %v", actions)
			}
			p := actions[0].(clienttesting.PatchAction)
			if p.GetPatchType() != types.StrategicMergePatchType {
				t.Errorf("patch type %v", p.GetPatchType())
			}
			var body struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Metadata.Annotations) != 1 || body.Metadata.Annotations[v1.ObjectTTLAnnotationKey] != tc.wantResult {
				t.Errorf("patch %s, want ttl %s", p.GetPatch(), tc.wantResult)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Annotations[v1.ObjectTTLAnnotationKey] != tc.wantResult {
				t.Errorf("node annotations %v", got.Annotations)
			}
			for k, v := range tc.node.Annotations {
				if k != v1.ObjectTTLAnnotationKey && got.Annotations[k] != v {
					t.Errorf("annotation %s lost", k)
				}
			}
		})
	}
}

func TestSyncMissingNode(t *testing.T) {
	client := fake.NewClientset()
	c := &Controller{kubeClient: client, nodeLister: corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))}
	if err := c.syncNode(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != 0 {
		t.Fatalf("unexpected actions %v", client.Actions())
	}
}

// TestBoundaries walks the node count up to 2000 and back down, checking
// the step and TTL at every count against the hysteresis rule.
func TestBoundaries(t *testing.T) {
	c := &Controller{queue: nil}
	c.queue = newTestQueue()
	defer c.queue.ShutDown()
	logger := klog.Background()
	n := node("n", nil)

	upward := func(count int) int {
		switch {
		case count <= 100:
			return 0
		case count <= 500:
			return 15
		case count <= 1000:
			return 30
		case count <= 2000:
			return 60
		default:
			return 300
		}
	}
	downward := func(count int) int {
		switch {
		case count >= 1800:
			return 300
		case count >= 900:
			return 60
		case count >= 450:
			return 30
		case count >= 90:
			return 15
		default:
			return 0
		}
	}
	const top = 2100
	for i := 1; i <= top; i++ {
		c.addNode(logger, n)
		if got, want := c.desiredTTLSeconds(), upward(i); got != want {
			t.Fatalf("after adding to %d nodes: ttl %d, want %d", i, got, want)
		}
	}
	for i := top - 1; i >= 0; i-- {
		c.deleteNode(logger, cache.DeletedFinalStateUnknown{Key: "n", Obj: n})
		if got, want := c.desiredTTLSeconds(), downward(i); got != want {
			t.Fatalf("after deleting to %d nodes: ttl %d, want %d", i, got, want)
		}
	}
	// Hysteresis: 101 nodes -> 15s; back to 95 stays 15s; 89 drops to 0.
	for i := 0; i < 101; i++ {
		c.addNode(logger, n)
	}
	for i := 0; i < 6; i++ {
		c.deleteNode(logger, n)
	}
	if got := c.desiredTTLSeconds(); got != 15 {
		t.Errorf("95 nodes after 101: ttl %d, want 15", got)
	}
	for i := 0; i < 6; i++ {
		c.deleteNode(logger, n)
	}
	if got := c.desiredTTLSeconds(); got != 0 {
		t.Errorf("89 nodes: ttl %d, want 0", got)
	}
}

func TestRunAnnotatesNodes(t *testing.T) {
	client := fake.NewClientset(node("a", nil), node("b", map[string]string{v1.ObjectTTLAnnotationKey: "300"}))
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	c := NewController(ctx, factory.Core().V1().Nodes(), client)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() { c.Run(ctx, 2); close(done) }()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()

	for _, name := range []string{"a", "b"} {
		name := name
		testutil.WaitFor(t, "node "+name+" annotated", func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && n.Annotations[v1.ObjectTTLAnnotationKey] == "0"
		})
	}
}
