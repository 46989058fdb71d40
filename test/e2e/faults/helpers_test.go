// Package faults runs the controller manager on a three-node control
// plane in containers (package bed) and breaks it: node loss, partition,
// slow apiserver, apiserver restart with etcd compaction, rolling upgrade
// from upstream's binary. Run with `make e2e-faults` (Docker needed).
package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/e2e/faults/bed"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) {
	if _, err := bed.Docker("info", "--format", "{{.ServerVersion}}"); err != nil {
		fmt.Fprintln(os.Stderr, "the fault tests need a reachable Docker engine:", err)
		os.Exit(1)
	}
	img := image()
	if _, err := bed.Docker("image", "inspect", img); err != nil {
		fmt.Fprintf(os.Stderr, "node image %s missing: run make image-node (make e2e-faults does)\n", img)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func image() string {
	if i := os.Getenv("KCMFAULT_IMAGE"); i != "" {
		return i
	}
	return bed.DefaultImage
}

// kcmUnderTest is the controller manager the node-loss test runs:
// KCMFAULT_KCM=upstream runs upstream's binary (for the failover figures).
func kcmUnderTest() (string, string) {
	if os.Getenv("KCMFAULT_KCM") == "upstream" {
		return bed.UpstreamKCM, "upstream"
	}
	return bed.OursKCM, "ours"
}

// podCount is the rollout size: KCMFAULT_PODS, default 300 (a 1,000-pod
// rollout on three nodes in containers takes minutes on two cores).
func podCount(t *testing.T) int32 {
	if s := os.Getenv("KCMFAULT_PODS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("KCMFAULT_PODS=%q: want a number >= 10", s)
		}
		return int32(n)
	}
	return 300
}

func startBed(t *testing.T, kcm string) *bed.Bed {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	prefix := "kcmfault-" + hex.EncodeToString(suffix)
	dir := filepath.Join(framework.RepoRoot(), "_output", "faults", t.Name())
	_ = os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := bed.Start(ctx, bed.Options{
		Prefix: prefix, Image: image(), KCM: kcm, Dir: dir,
		Manifest: filepath.Join(framework.RepoRoot(), "cluster", "manifests", "kube-controller-manager.yaml"),
	})
	if err != nil {
		t.Fatalf("starting the bed: %v (files in %s)", err, dir)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The logs stay in files: printed here they would push the
			// failure itself out of the last lines CI shows.
			t.Logf("all logs and audit logs kept in %s", dir)
		}
		b.Close()
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	return b
}

func client(t *testing.T, b *bed.Bed, n *bed.Node) clientset.Interface {
	t.Helper()
	c, err := b.Client(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// rollout is a Deployment rolled from one template to another.
type rollout struct {
	t        *testing.T
	c        clientset.Interface
	ns       string
	replicas int32
	surge    int32
	// pods counts the namespace's live (not terminating) pods.
	pods *podWatch
}

const deployName = "web"

// newRollout creates a namespace and a Deployment of n replicas, run by
// the test's kubelet, and waits until it is available.
func newRollout(t *testing.T, c clientset.Interface, n int32) *rollout {
	t.Helper()
	ctx := context.Background()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "faults-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Small steps with a pause each, so the rollout lasts long enough to
	// be hit; maxUnavailable 0 bounds live pods at replicas + surge.
	surge := max(n/10, 1)
	labels := map[string]string{"app": deployName}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: deployName},
		Spec: appsv1.DeploymentSpec{
			Replicas:        ptr.To(n),
			MinReadySeconds: 1,
			Selector:        &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(surge)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{Name: "web", Image: "nginx", Env: []v1.EnvVar{{Name: "VERSION", Value: "1"}}}},
					// No scheduler takes them: the test's kubelet runs them unbound.
					SchedulerName: "kcmfault-none",
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(ns.Name).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A kubelet for every pod of the namespace, through this apiserver
	// (kwok and the scheduler would add CPU and a failover of their own).
	kctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	framework.Kubelet{Client: c}.Run(kctx, ns.Name)
	r := &rollout{t: t, c: c, ns: ns.Name, replicas: n, surge: surge}
	r.waitComplete(10 * time.Minute)
	r.pods = watchPods(t, c, ns.Name)
	return r
}

// start changes the template: a new ReplicaSet replaces the old one.
func (r *rollout) start(version int) {
	r.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"VERSION","value":"%d"}]}]}}}}`, version)
	if _, err := r.c.AppsV1().Deployments(r.ns).Patch(context.Background(), deployName, "application/strategic-merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rollout) status() appsv1.DeploymentStatus {
	r.t.Helper()
	d, err := r.c.AppsV1().Deployments(r.ns).Get(context.Background(), deployName, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	return d.Status
}

// waitProgress waits until the rollout has replaced at least a tenth of
// the pods but not all of them: the moment to strike.
func (r *rollout) waitProgress() {
	r.t.Helper()
	eventually(r.t, 5*time.Minute, "the rollout to be under way", func(ctx context.Context) (bool, error) {
		d, err := r.c.AppsV1().Deployments(r.ns).Get(ctx, deployName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas >= r.replicas/10, nil
	})
	if s := r.status(); s.UpdatedReplicas >= r.replicas && s.Replicas == r.replicas {
		r.t.Fatalf("the rollout completed before the fault (status %+v): nothing would be tested; raise KCMFAULT_PODS", s)
	}
}

func (r *rollout) waitComplete(timeout time.Duration) {
	r.t.Helper()
	eventually(r.t, timeout, "the rollout to complete", func(ctx context.Context) (bool, error) {
		d, err := r.c.AppsV1().Deployments(r.ns).Get(ctx, deployName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := d.Status
		return s.ObservedGeneration == d.Generation && s.UpdatedReplicas == r.replicas && s.Replicas == r.replicas &&
			s.AvailableReplicas == r.replicas, nil
	})
}

// check is "nothing lost, nothing duplicated": exactly replicas live pods,
// all of the current ReplicaSet; one ReplicaSet per template; and, while
// it rolled, never more pods asked for than replicas + maxSurge and no
// ReplicaSet with more pods than it was asked for (podWatch).
func (r *rollout) check() {
	r.t.Helper()
	ctx := context.Background()
	rss, err := r.c.AppsV1().ReplicaSets(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	current := ""
	hashes := map[string]int{}
	for _, rs := range rss.Items {
		h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		hashes[h]++
		if *rs.Spec.Replicas > 0 {
			if current != "" {
				r.t.Errorf("two ReplicaSets scaled up: %s and %s", current, h)
			}
			current = h
		}
		if hashes[h] > 1 {
			r.t.Errorf("two ReplicaSets for template hash %s", h)
		}
	}
	eventually(r.t, 3*time.Minute, "exactly the desired pods, all current", func(ctx context.Context) (bool, error) {
		pods, err := r.c.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != current {
				return false, nil
			}
			live++
		}
		if live > int(r.replicas) {
			return false, fmt.Errorf("%d live pods for %d replicas", live, r.replicas)
		}
		return live == int(r.replicas), nil
	})
	if r.pods != nil {
		r.pods.check(r.t, r.replicas+r.surge)
	}
}

// podWatch samples the namespace's pods and ReplicaSets with consistent
// lists while the rollout runs, and checks what the controllers guarantee
// even when the rollout is hit:
//   - the Deployment controller never asks for more than replicas +
//     maxSurge pods: the ReplicaSets' spec.replicas add up to at most that
//     (its writes carry a resourceVersion, so a stale cache cannot break it);
//   - no ReplicaSet ever has more live pods than the most it was asked for:
//     a pod made twice (lost expectations, a cache that missed a create)
//     shows here.
//
// Live pods of all ReplicaSets together may briefly exceed replicas +
// maxSurge, with upstream's binary too: the old ReplicaSet's pods are
// deleted by the ReplicaSet controller after the Deployment controller has
// already lowered its spec and raised the new one's. (An informer would
// overcount: a relist delivers the listed pods before the deletions.)
type podWatch struct {
	mu sync.Mutex
	// mostAsked is the largest sum of the ReplicaSets' spec.replicas seen.
	mostAsked int32
	mostLive  int
	// specMax is each ReplicaSet's largest spec.replicas seen so far.
	specMax map[types.UID]int32
	// excess describes the first sample in which a ReplicaSet had more
	// live pods than it was ever asked for.
	excess string
}

func watchPods(t *testing.T, c clientset.Interface, ns string) *podWatch {
	w := &podWatch{specMax: map[types.UID]int32{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w.sample(ctx, c, ns)
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

// sample lists pods first, then ReplicaSets: a ReplicaSet that is scaling
// up was asked for at least as many pods when it is read as when its pods
// were listed.
func (w *podWatch) sample(ctx context.Context, c clientset.Interface, ns string) {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	live, byOwner := 0, map[types.UID]int32{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		live++
		if ref := metav1.GetControllerOf(&p); ref != nil {
			byOwner[ref.UID]++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mostLive = max(w.mostLive, live)
	var asked int32
	for _, rs := range rss.Items {
		want := ptr.Deref(rs.Spec.Replicas, 0)
		asked += want
		w.specMax[rs.UID] = max(w.specMax[rs.UID], want)
		if n := byOwner[rs.UID]; n > w.specMax[rs.UID] && w.excess == "" {
			w.excess = fmt.Sprintf("ReplicaSet %s had %d live pods, never asked for more than %d", rs.Name, n, w.specMax[rs.UID])
		}
	}
	w.mostAsked = max(w.mostAsked, asked)
}

func (w *podWatch) check(t *testing.T, bound int32) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mostAsked > bound {
		t.Errorf("the ReplicaSets asked for %d pods at once, more than replicas + maxSurge %d", w.mostAsked, bound)
	}
	if w.excess != "" {
		t.Error(w.excess)
	}
	// Positive control: the sampler saw the rollout's pods.
	if w.mostLive == 0 || w.mostAsked == 0 {
		t.Errorf("the pod sampler saw no pods (%d) or ReplicaSets asking for any (%d)", w.mostLive, w.mostAsked)
	}
	t.Logf("rollout: at most %d pods asked for, %d live at once (bound %d on what is asked)", w.mostAsked, w.mostLive, bound)
}

// kcmWrite is a write the controller manager's controllers sent to one
// node's apiserver (leader election's own Lease writes aside).
type kcmWrite struct {
	node string
	at   time.Time
	what string
}

func isKCM(e bed.AuditEvent) bool {
	return strings.HasPrefix(e.UserAgent, "kube-controller-manager")
}

// electionEvents are the audit IDs of the Events the leader election
// records about the Lease itself ("became leader", "stopped leading"):
// a process sends them as it gains or loses the Lease, so they are not
// controller work. Their names, known once the request body is read, start
// with the Lease's. A losing leader's "stopped leading" can sit in the
// socket of its paused apiserver until the process has exited; the
// apiserver then reads the request but not its body, so neither name nor
// success is logged: an Event create in kube-system that wrote nothing is
// taken for one too (the controllers record no other Events there).
func electionEvents(events []bed.AuditEvent) map[string]bool {
	ids := map[string]bool{}
	succeeded := map[string]bool{}
	var kubeSystemCreates []string
	for _, e := range events {
		if e.ObjectRef == nil || e.ObjectRef.Resource != "events" || e.ObjectRef.Namespace != "kube-system" {
			continue
		}
		if strings.HasPrefix(e.ObjectRef.Name, "kube-controller-manager.") {
			ids[e.AuditID] = true
		}
		if e.Stage == "ResponseComplete" && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
			succeeded[e.AuditID] = true
		}
		if e.Verb == "create" {
			kubeSystemCreates = append(kubeSystemCreates, e.AuditID)
		}
	}
	for _, id := range kubeSystemCreates {
		if !succeeded[id] {
			ids[id] = true
		}
	}
	return ids
}

// isLeaseWrite is a write of the leader election Lease. A create's audit
// event carries no name (it is in the body), and no controller creates
// Leases in kube-system, so a nameless create there is an election attempt:
// two candidates starting together both try, and one gets a conflict.
func isLeaseWrite(e bed.AuditEvent) bool {
	if e.ObjectRef == nil || e.ObjectRef.Resource != "leases" || e.ObjectRef.Namespace != "kube-system" {
		return false
	}
	return e.ObjectRef.Name == "kube-controller-manager" || (e.Verb == "create" && e.ObjectRef.Name == "")
}

// leaderTimeline is who led when, from the audit logs: each successful
// write of the kube-controller-manager Lease names the node it came
// through; a node leads from its first such write after another node's
// until the next node's first.
type leaderSpan struct {
	node     string
	from, to time.Time // to is zero for the last
}

func auditTimeline(t *testing.T, b *bed.Bed) ([]leaderSpan, []kcmWrite) {
	t.Helper()
	type leaseWrite struct {
		node string
		at   time.Time
	}
	var leases []leaseWrite
	var writes []kcmWrite
	for _, n := range b.Nodes {
		events, err := b.Audit(n)
		if err != nil {
			t.Fatalf("%s audit log: %v", n.Name, err)
		}
		election := electionEvents(events)
		for _, e := range events {
			if !isKCM(e) || e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" || election[e.AuditID] {
				continue
			}
			at := e.RequestReceivedTimestamp.Time
			if isLeaseWrite(e) {
				if e.Stage == "ResponseComplete" && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
					leases = append(leases, leaseWrite{n.Name, at})
				}
				continue
			}
			if e.Stage != "RequestReceived" {
				continue
			}
			what := e.Verb
			if e.ObjectRef != nil {
				what += " " + e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
			}
			writes = append(writes, kcmWrite{node: n.Name, at: at, what: what + " by " + e.User.Username})
		}
	}
	sort.Slice(leases, func(i, j int) bool { return leases[i].at.Before(leases[j].at) })
	sort.Slice(writes, func(i, j int) bool { return writes[i].at.Before(writes[j].at) })
	var spans []leaderSpan
	for _, l := range leases {
		if len(spans) > 0 && spans[len(spans)-1].node == l.node {
			continue
		}
		if len(spans) > 0 {
			spans[len(spans)-1].to = l.at
		}
		spans = append(spans, leaderSpan{node: l.node, from: l.at})
	}
	return spans, writes
}

// noTwoLeaders fails the test if a controller manager's controllers wrote
// (sent a write to its apiserver) while another node held the Lease, and
// returns the leadership spans for the test to check further.
func noTwoLeaders(t *testing.T, b *bed.Bed) []leaderSpan {
	t.Helper()
	spans, writes := auditTimeline(t, b)
	if len(spans) == 0 {
		t.Fatal("no successful Lease write by a controller manager in the audit logs")
	}
	for _, w := range writes {
		var lead *leaderSpan
		for i := range spans {
			if !w.at.Before(spans[i].from) && (spans[i].to.IsZero() || w.at.Before(spans[i].to)) {
				lead = &spans[i]
			}
		}
		if lead == nil || lead.node != w.node {
			holder := "nobody"
			if lead != nil {
				holder = lead.node
			}
			t.Errorf("%s: %s wrote (%s) while %s led", w.at.Format(time.RFC3339Nano), w.node, w.what, holder)
		}
	}
	for _, s := range spans {
		t.Logf("audit: %s led from %s to %s", s.node, s.from.Format("15:04:05.000"), s.to.Format("15:04:05.000"))
	}
	t.Logf("audit: %d controller writes checked", len(writes))
	return spans
}

// nodeRestarts counts node-init's restarts of a component on the node.
func kcmExits(b *bed.Bed, n *bed.Node) int {
	out, _ := exec.Command("docker", "logs", n.Name).CombinedOutput()
	return strings.Count(string(out), "kube-controller-manager exited")
}

// waitQuiet waits until n's apiserver has received no controller write
// for the given time. A fault that freezes that apiserver would otherwise
// hold writes the leader sent while it led in the socket buffers; they
// reach the apiserver after it resumes, when another node leads, and read
// as a second leader in the audit log.
func waitQuiet(t *testing.T, b *bed.Bed, n *bed.Node, quiet time.Duration) {
	t.Helper()
	eventually(t, 3*time.Minute, n.Name+"'s controller writes to settle", func(context.Context) (bool, error) {
		events, err := b.Audit(n)
		if err != nil {
			return false, nil
		}
		var last time.Time
		for _, e := range events {
			if isKCM(e) && !isLeaseWrite(e) && e.Verb != "get" && e.Verb != "list" && e.Verb != "watch" &&
				e.RequestReceivedTimestamp.After(last) {
				last = e.RequestReceivedTimestamp.Time
			}
		}
		return !last.IsZero() && time.Since(last) >= quiet, nil
	})
}
