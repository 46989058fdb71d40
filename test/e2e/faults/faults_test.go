package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/kcmclone/kube-controller-manager/test/e2e/faults/bed"
)

// TestNodeLoss kills the container of the node whose controller manager
// leads, mid-rollout: another node's takes the Lease and the rollout
// completes with every pod there once. It logs the failover time
// (hack/faults/failover.sh collects it).
func TestNodeLoss(t *testing.T) {
	kcm, variant := kcmUnderTest()
	b := startBed(t, kcm)
	ctx := context.Background()
	leader, id, err := b.Leader(ctx, b.Nodes[0])
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	via := b.Other(leader)
	c := client(t, b, via)
	r := newRollout(t, c, podCount(t))
	r.start(2)
	r.waitProgress()

	killedAt := time.Now()
	if err := b.Kill(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (leader %s) at %s", leader.Name, id, killedAt.Format("15:04:05.000"))
	next, nextID, err := b.WaitLeader(ctx, via, id, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the killed node %s still leads", leader.Name)
	}
	lease, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.waitComplete(10 * time.Minute)
	r.check()
	noTwoLeaders(t, b)

	acquired := lease.Spec.AcquireTime.Time
	// Acting again: the first write of a controller (events aside) that
	// reached the new leader's apiserver after the kill.
	var acting time.Time
	_, writes := auditTimeline(t, b)
	for _, w := range writes {
		if w.node == next.Name && w.at.After(killedAt) && !strings.Contains(w.what, " events ") {
			acting = w.at
			t.Logf("first write after the kill: %s", w.what)
			break
		}
	}
	if acting.IsZero() {
		t.Fatal("no controller write through the new leader's apiserver after the kill, yet the rollout completed")
	}
	t.Logf("%s took over as %s", next.Name, nextID)
	t.Logf("FAILOVER kcm=%s pods=%d lease=%.2fs acting=%.2fs", variant, r.replicas,
		acquired.Sub(killedAt).Seconds(), acting.Sub(killedAt).Seconds())
}

// TestPartition cuts the leading node off the network, its processes
// alive: its controller manager stops acting before another node's takes
// the Lease (the audit logs of all three apiservers show no write from it
// after), and once the network is back it runs as a follower.
func TestPartition(t *testing.T) {
	b := startBed(t, bed.OursKCM)
	ctx := context.Background()
	leader, id, err := b.Leader(ctx, b.Nodes[0])
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	via := b.Other(leader)
	c := client(t, b, via)
	r := newRollout(t, c, podCount(t))
	r.start(2)
	r.waitProgress()

	exitsBefore := kcmExits(b, leader)
	if err := b.Disconnect(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("disconnected %s (leader %s)", leader.Name, id)
	next, nextID, err := b.WaitLeader(ctx, via, id, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the cut-off node %s took the Lease again", leader.Name)
	}
	r.waitComplete(10 * time.Minute)
	r.check()
	// The cut-off controller manager gave up: it lost the lease and exited
	// (node-init restarts it, as the kubelet would).
	eventually(t, 2*time.Minute, "the cut-off controller manager to exit", func(context.Context) (bool, error) {
		return kcmExits(b, leader) > exitsBefore, nil
	})
	if log := b.Log(leader, "kube-controller-manager"); !strings.Contains(log, "leaderelection lost") {
		t.Errorf("%s: no \"leaderelection lost\" in the controller manager's log", leader.Name)
	}

	if err := b.Connect(leader); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitReady(ctx, leader, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Back as a follower: its own apiserver sees the new holder, and its
	// controller manager (restarted) waits for the Lease without taking it.
	rejoined := client(t, b, leader)
	eventually(t, 3*time.Minute, "the rejoined node's controller manager to follow "+nextID, func(ctx context.Context) (bool, error) {
		l, err := rejoined.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		log := strings.ToLower(b.Log(leader, "kube-controller-manager"))
		i := strings.LastIndex(log, "attempting to acquire leader lease")
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == nextID && i >= 0 &&
			strings.Contains(log[i:], "new leader"), nil
	})
	// A second rollout goes through the rejoined node's apiserver and is
	// done by the leader.
	r2 := &rollout{t: t, c: rejoined, ns: r.ns, replicas: r.replicas, surge: r.surge}
	r2.start(3)
	r2.waitComplete(10 * time.Minute)
	r2.check()
	if _, h, _ := b.Leader(ctx, via); h != nextID {
		t.Errorf("lease holder %q, want %q still", h, nextID)
	}
	spans := noTwoLeaders(t, b)
	for _, s := range spans {
		if s.node == leader.Name && s.from.After(spans[0].from) {
			t.Errorf("the rejoined node %s led again from %s", leader.Name, s.from)
		}
	}
}

// TestSlowAPIServer stops (SIGSTOP) the apiserver the leader talks to for
// longer than the renew deadline: the leader exits, as upstream's does,
// another node's controller manager takes over, and when the apiserver
// resumes the old node's runs as a follower.
func TestSlowAPIServer(t *testing.T) {
	b := startBed(t, bed.OursKCM)
	ctx := context.Background()
	leader, id, err := b.Leader(ctx, b.Nodes[0])
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	via := b.Other(leader)
	c := client(t, b, via)
	exitsBefore := kcmExits(b, leader)
	// Writes sent just before the pause would reach the apiserver after it
	// resumes, under the next leader: pause a leader with none in flight.
	waitQuiet(t, b, leader, 3*time.Second)
	if err := b.Signal(leader, "STOP", "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := b.Signal(leader, "CONT", "kube-apiserver"); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	next, nextID, err := b.WaitLeader(ctx, via, id, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("%s still leads with its apiserver stopped", leader.Name)
	}
	// The old leader gave up on its own, apiserver still stopped.
	eventually(t, 2*time.Minute, "the old leader to exit", func(context.Context) (bool, error) {
		return kcmExits(b, leader) > exitsBefore, nil
	})
	if log := b.Log(leader, "kube-controller-manager"); !strings.Contains(log, "leaderelection lost") {
		t.Errorf("%s: no \"leaderelection lost\" in the controller manager's log", leader.Name)
	}
	resume()
	if err := b.WaitReady(ctx, leader, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	r := newRollout(t, c, 20)
	r.start(2)
	r.waitComplete(5 * time.Minute)
	r.check()
	if _, h, _ := b.Leader(ctx, via); h != nextID {
		t.Errorf("lease holder %q, want %q still", h, nextID)
	}
	noTwoLeaders(t, b)
}

// etcdCompact compacts etcd (through one member's HTTP gateway) at its
// current revision and returns the revision.
func etcdCompact(ctx context.Context, n *bed.Node) (int64, error) {
	post := func(path string, body any, out any) error {
		j, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.IP+":2379"+path, bytes.NewReader(j))
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var rng struct {
		Header struct {
			Revision int64 `json:"revision,string"`
		} `json:"header"`
	}
	// key "\x00" (base64 AA==): any key will do, the header has the revision.
	if err := post("/v3/kv/range", map[string]string{"key": "AA=="}, &rng); err != nil {
		return 0, err
	}
	var out map[string]any
	if err := post("/v3/kv/compaction", map[string]any{"revision": fmt.Sprint(rng.Header.Revision), "physical": true}, &out); err != nil {
		return 0, err
	}
	return rng.Header.Revision, nil
}

// TestAPIServerRestartAndCompaction restarts the apiserver the leader
// talks to mid-rollout while etcd is compacted past every watch's
// revision: the controller manager's informers relist, and the rollout
// completes with no excess pod.
func TestAPIServerRestartAndCompaction(t *testing.T) {
	b := startBed(t, bed.OursKCM)
	ctx := context.Background()
	leader, _, err := b.Leader(ctx, b.Nodes[0])
	if err != nil || leader == nil {
		t.Fatalf("no leader: %v", err)
	}
	via := b.Other(leader)
	c := client(t, b, via)
	r := newRollout(t, c, podCount(t))
	r.start(2)
	r.waitProgress()

	if err := b.Signal(leader, "KILL", "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	rev, err := etcdCompact(ctx, via)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted %s's apiserver, compacted etcd at revision %d", leader.Name, rev)
	if err := b.WaitReady(ctx, leader, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Compact again once it is back, so the watches the controller
	// manager re-opened from its caches' revisions are too old as well.
	if rev, err = etcdCompact(ctx, via); err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted etcd at revision %d", rev)
	r.waitComplete(10 * time.Minute)
	r.check()
	// A rollout after the compaction: the controllers' caches follow.
	r.start(3)
	r.waitComplete(10 * time.Minute)
	r.check()
	noTwoLeaders(t, b)
}

// TestRollingUpgrade replaces upstream's controller manager with ours node
// by node, as an operator edits static pod manifests, then back: no
// ReplicaSet, pod or ControllerRevision replaced (the swap test's
// invariant), and never two leaders (audit logs).
func TestRollingUpgrade(t *testing.T) {
	b := startBed(t, bed.UpstreamKCM)
	ctx := context.Background()
	via := b.Nodes[0]
	c := client(t, b, via)
	r := newRollout(t, c, 30)
	r.start(2)
	r.waitComplete(5 * time.Minute)
	before := snapshotUIDs(t, c, r.ns)

	holders := map[string]bool{}
	for _, to := range []string{bed.OursKCM, bed.UpstreamKCM} {
		for _, n := range b.Nodes {
			_, id, err := b.Leader(ctx, via)
			if err != nil {
				t.Fatal(err)
			}
			holders[id] = true
			logs, _ := bed.Docker("logs", n.Name)
			swaps := strings.Count(logs, "manifest of kube-controller-manager changed")
			if err := b.SetKCM(n, to); err != nil {
				t.Fatal(err)
			}
			// The old binary stopped and the new one started.
			eventually(t, 2*time.Minute, n.Name+" to run "+to, func(context.Context) (bool, error) {
				out, _ := bed.Docker("logs", n.Name)
				i := strings.LastIndex(out, "started kube-controller-manager")
				return strings.Count(out, "manifest of kube-controller-manager changed") > swaps &&
					i > strings.LastIndex(out, "manifest of kube-controller-manager changed"), nil
			})
			if strings.HasPrefix(id, n.Name+"_") {
				if _, _, err := b.WaitLeader(ctx, via, id, 3*time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			// Give the swapped-in binary time to sync what it leads.
			time.Sleep(5 * time.Second)
			sameUIDs(t, n.Name+" now runs "+to, before, snapshotUIDs(t, c, r.ns))
		}
	}
	// Still managing: a scale-up adds pods to the current ReplicaSet only.
	r.replicas = 40
	if _, err := c.AppsV1().Deployments(r.ns).Patch(ctx, deployName, types.MergePatchType, []byte(`{"spec":{"replicas":40}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r.waitComplete(5 * time.Minute)
	r.check()
	noTwoLeaders(t, b)
	// The leader's own binary was swapped too (a new holder each time).
	if len(holders) < 2 {
		t.Errorf("one Lease holder throughout (%v): no swap happened under a leader", holders)
	}
}

// uids is what a swap of controller managers must not change.
type uids map[string]types.UID

func snapshotUIDs(t *testing.T, c clientset.Interface, ns string) uids {
	t.Helper()
	ctx := context.Background()
	u := uids{}
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range rss.Items {
		u["replicaset/"+rs.Name] = rs.UID
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			u["pod/"+p.Name] = p.UID
		}
	}
	return u
}

func sameUIDs(t *testing.T, when string, before, after uids) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s was replaced or removed", when, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s appeared", when, k)
		}
	}
}
