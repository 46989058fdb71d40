package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// shardedControllers are the controllers the sharded tests run: the two
// that roll Deployments out, plus light ones so that every replica gets a
// share.
var shardedControllers = []string{
	"deployment-controller", "replicaset-controller", "ttl-controller", "serviceaccount-controller",
	"endpoints-controller", "pod-garbage-collector-controller", "clusterrole-aggregation-controller",
	"replicationcontroller-controller", "cronjob-controller", "job-controller",
}

func shardedArgs(lease string) []string {
	return []string{
		"--leader-elect-sharded",
		"--leader-elect-resource-name=" + lease,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=" + retryPeriod.String(),
		"--controllers=" + strings.Join(shardedControllers, ","),
	}
}

var identityRE = regexp.MustCompile(`"Sharing controllers with other replicas".* identity="([^"]+)"`)

// identity is the replica's holder identity, from its log.
func (p *kcmProcess) identity(t *testing.T) string {
	t.Helper()
	var id string
	framework.Eventually(t, 60*time.Second, "a sharded replica to log its identity", func(context.Context) (bool, error) {
		if m := identityRE.FindStringSubmatch(p.Output()); m != nil {
			id = m[1]
			return true, nil
		}
		return false, nil
	})
	return id
}

// unitHolders returns the holder and transition count of every
// controller's Lease.
func unitHolders(ctx context.Context, c clientset.Interface, lease string) (map[string]string, map[string]int32, error) {
	holders, transitions := map[string]string{}, map[string]int32{}
	for _, name := range shardedControllers {
		l, err := getLease(ctx, c, lease+"-"+name)
		if apierrors.IsNotFound(err) {
			holders[name] = ""
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		holders[name] = holder(l)
		transitions[name] = ptr.Deref(l.Spec.LeaseTransitions, 0)
	}
	return holders, transitions, nil
}

func heldBy(holders map[string]string, id string) []string {
	var out []string
	for name, h := range holders {
		if h == id {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// waitShared waits until every controller's Lease is held by one of ids
// and each of ids holds at least one.
func waitShared(t *testing.T, c clientset.Interface, lease string, ids ...string) map[string]string {
	t.Helper()
	var holders map[string]string
	framework.Eventually(t, 3*time.Minute, fmt.Sprintf("controllers shared among %d replicas", len(ids)), func(ctx context.Context) (bool, error) {
		h, _, err := unitHolders(ctx, c, lease)
		if err != nil {
			return false, err
		}
		holders = h
		count := map[string]int{}
		for _, who := range h {
			count[who]++
		}
		for _, id := range ids {
			if count[id] == 0 {
				return false, nil
			}
		}
		for _, who := range h {
			if !contains(ids, who) {
				return false, nil
			}
		}
		return true, nil
	})
	return holders
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func shardedPods() int {
	if n, err := strconv.Atoi(os.Getenv("SHARDED_E2E_PODS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// TestShardedReplicasShareAndFailOver runs three sharded replicas, kills
// the one running the ReplicaSet controller in the middle of a rollout of
// 1,000 pods, then adds a fourth replica and stops another with SIGTERM.
func TestShardedReplicasShareAndFailOver(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	const lease = "kcm-sharded"
	pods := shardedPods()

	procs := []*kcmProcess{}
	ids := []string{}
	for i := 0; i < 3; i++ {
		p := startKCM(t, shardedArgs(lease)...)
		procs = append(procs, p)
		ids = append(ids, p.identity(t))
	}
	holders := waitShared(t, c, lease, ids...)
	// Let the start-up hand-overs finish: the assignment must hold still
	// for three lease durations (longer than a unit's minimum hold).
	stableSince, last := time.Now(), fmt.Sprint(holders)
	framework.Eventually(t, 3*time.Minute, "a stable assignment", func(ctx context.Context) (bool, error) {
		h, _, err := unitHolders(ctx, c, lease)
		if err != nil {
			return false, err
		}
		if now := fmt.Sprint(h); now != last {
			stableSince, last, holders = time.Now(), now, h
		}
		return time.Since(stableSince) >= 3*leaseDuration, nil
	})
	t.Logf("assignment: %v", holders)
	main, err := getLease(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := holder(main), lease+"-sharded-replicas"; got != want {
		t.Fatalf("main lease held by %q, want %q", got, want)
	}

	// Who runs what shows in each replica's metrics and health checks.
	rsLease := lease + "-replicaset-controller"
	for i, p := range procs {
		framework.Eventually(t, 60*time.Second, "replica "+ids[i]+" to report whether it runs "+rsLease, func(ctx context.Context) (bool, error) {
			l, err := getLease(ctx, c, rsLease)
			if err != nil {
				return false, err
			}
			want := "0"
			if holder(l) == ids[i] {
				want = "1"
			}
			code, body := get(t, p.url("/metrics"), cp.Tokens[framework.AdminUser])
			return code == http.StatusOK && strings.Contains(body, `leader_election_master_status{name="`+rsLease+`"} `+want), nil
		})
		code, body := get(t, p.url("/healthz?verbose"), "")
		if code != http.StatusOK || !strings.Contains(body, "[+]leader-election-replicaset-controller ok") || !strings.Contains(body, "[+]replicaset-controller ok") {
			t.Errorf("replica %s /healthz = %d:\n%s", ids[i], code, body)
		}
	}

	ns := framework.CreateNamespace(t, c, "sharded")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	framework.Kubelet{Client: c}.Run(ctx, ns)

	// Every pod created or deleted, with when.
	var (
		mu       sync.Mutex
		created  []time.Time
		deleted  int
		podNames = map[string]bool{}
	)
	pw, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			mu.Lock()
			switch ev.Type {
			case watch.Added:
				if !podNames[p.Name] {
					podNames[p.Name] = true
					created = append(created, time.Now())
				}
			case watch.Deleted:
				deleted++
			}
			mu.Unlock()
		}
	}()
	createdCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(created)
	}

	lbl := map[string]string{"app": "sharded"}
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(pods)),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Kill -9 the replica running the ReplicaSet controller a third of the
	// way through.
	framework.Eventually(t, 5*time.Minute, "a third of the pods", func(context.Context) (bool, error) {
		return createdCount() >= pods/3, nil
	})
	holders, transitions, err := unitHolders(ctx, c, lease)
	if err != nil {
		t.Fatal(err)
	}
	victim := -1
	for i, id := range ids {
		if holders["replicaset-controller"] == id {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("replicaset-controller held by %q, not one of %v", holders["replicaset-controller"], ids)
	}
	orphans := heldBy(holders, ids[victim])
	logsAtKill := map[int]int{}
	for i, p := range procs {
		logsAtKill[i] = len(p.Output())
	}
	killed := time.Now()
	if _, exited := procs[victim].stop(syscall.SIGKILL, 10*time.Second); !exited {
		t.Fatal("victim did not die")
	}
	t.Logf("killed %s, which ran %v", ids[victim], orphans)
	survivors := append(append([]string{}, ids[:victim]...), ids[victim+1:]...)

	// Its controllers resume on the survivors.
	var resumed map[string]string
	framework.Eventually(t, 2*time.Minute, "the dead replica's controllers to move", func(ctx context.Context) (bool, error) {
		h, _, err := unitHolders(ctx, c, lease)
		if err != nil {
			return false, err
		}
		for _, name := range orphans {
			if !contains(survivors, h[name]) {
				return false, nil
			}
		}
		resumed = h
		return true, nil
	})
	t.Logf("the dead replica's controllers resumed after %s (lease duration %s)", time.Since(killed).Round(10*time.Millisecond), leaseDuration)

	// The survivors' own controllers never changed hands.
	_, after, err := unitHolders(ctx, c, lease)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range holders {
		if h == ids[victim] {
			continue
		}
		if resumed[name] != h || after[name] != transitions[name] {
			t.Errorf("%s, on surviving replica %s, moved to %s (transitions %d -> %d)", name, h, resumed[name], transitions[name], after[name])
		}
	}
	for _, i := range []int{0, 1, 2} {
		if i == victim {
			continue
		}
		since := procs[i].Output()[logsAtKill[i]:]
		for _, line := range strings.Split(since, "\n") {
			for _, name := range heldBy(holders, ids[i]) {
				if strings.Contains(line, "Controller stopped") && strings.Contains(line, `controller="`+name+`"`) {
					t.Errorf("surviving replica %s stopped %s after the kill: %s", ids[i], name, line)
				}
			}
		}
	}

	// The rollout completes with exactly the pods asked for.
	framework.Eventually(t, 10*time.Minute, "the rollout to complete", func(ctx context.Context) (bool, error) {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == int32(pods) && d.Status.Replicas == int32(pods), nil
	})
	list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	longest := time.Duration(0)
	var at time.Time
	for i := 1; i < len(created); i++ {
		if gap := created[i].Sub(created[i-1]); gap > longest {
			longest, at = gap, created[i-1]
		}
	}
	t.Logf("%d pods created, %d deleted; longest pause in pod creation %s, starting %s after the kill",
		len(created), deleted, longest.Round(10*time.Millisecond), at.Sub(killed).Round(10*time.Millisecond))
	if len(list.Items) != pods || len(created) != pods || deleted != 0 {
		t.Errorf("pods: %d exist, %d were created, %d deleted; want exactly %d created and none deleted", len(list.Items), len(created), deleted, pods)
	}
	mu.Unlock()

	// A replica added later takes a share.
	late := startKCM(t, shardedArgs(lease)...)
	lateID := late.identity(t)
	holders = waitShared(t, c, lease, append(survivors, lateID)...)
	t.Logf("after a fourth replica joined: %v", holders)

	// A replica stopped with SIGTERM hands its controllers over at once:
	// its Leases are released by the time it exits.
	stopIdx := 0
	if stopIdx == victim {
		stopIdx = 1
	}
	mine := heldBy(holders, ids[stopIdx])
	if code, exited := procs[stopIdx].stop(syscall.SIGTERM, 30*time.Second); !exited || code != 0 {
		t.Fatalf("on SIGTERM: exited %v with code %d, want exit 0", exited, code)
	}
	h, _, err := unitHolders(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range mine {
		if h[name] == ids[stopIdx] {
			t.Errorf("%s still held by the stopped replica", name)
		}
	}
	if len(mine) == 0 {
		t.Errorf("the stopped replica held nothing; the hand-over went unchecked")
	}
	rest := []string{lateID}
	for i, id := range ids {
		if i != victim && i != stopIdx {
			rest = append(rest, id)
		}
	}
	waitShared(t, c, lease, rest...)
}

// TestShardedBesideUpstream: while upstream's binary holds the main Lease,
// sharded replicas of ours run nothing; once it is killed they take over,
// and no controller Lease was acquired before the upstream leader was gone.
func TestShardedBesideUpstream(t *testing.T) {
	upstream := filepath.Join(framework.BinDir(), "kube-controller-manager-upstream")
	if _, err := os.Stat(upstream); err != nil {
		t.Skipf("no upstream binary: %v", err)
	}
	cp := framework.Shared(t)
	c := cp.Client(t)
	const lease = "kcm-sharded-mixed"

	args := shardedArgs(lease)[1:] // upstream's flags: all but --leader-elect-sharded
	saved := kcmBinary
	kcmBinary = upstream
	up := startKCM(t, args...)
	kcmBinary = saved
	upID, _ := waitHolder(t, c, lease, "", 60*time.Second)

	ours := []*kcmProcess{startKCM(t, shardedArgs(lease)...), startKCM(t, shardedArgs(lease)...)}
	ids := []string{ours[0].identity(t), ours[1].identity(t)}
	// Both are up and watching; give them several lease durations to
	// misbehave. The take-over below is the positive control.
	time.Sleep(3 * leaseDuration)
	holders, _, err := unitHolders(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range holders {
		if h != "" {
			t.Errorf("%s held by %q while upstream leads", name, h)
		}
	}
	for i, p := range ours {
		if strings.Contains(p.Output(), "starting controller") {
			t.Errorf("replica %s started a controller while upstream leads", ids[i])
		}
	}
	if l, err := getLease(context.Background(), c, lease); err != nil || holder(l) != upID {
		t.Fatalf("main lease %v (%v), want still held by upstream %q", holder(l), err, upID)
	}

	killed := time.Now()
	if _, exited := up.stop(syscall.SIGKILL, 10*time.Second); !exited {
		t.Fatal("upstream did not die")
	}
	holders = waitShared(t, c, lease, ids...)
	t.Logf("ours took over %s after upstream was killed: %v", time.Since(killed).Round(10*time.Millisecond), holders)
	main, err := getLease(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if holder(main) != lease+"-sharded-replicas" {
		t.Fatalf("main lease held by %q", holder(main))
	}
	// The group took the main Lease only after upstream's had expired, and
	// every controller Lease was acquired after that.
	groupSince := main.Spec.AcquireTime.Time
	if groupSince.Before(killed.Add(-time.Second)) {
		t.Errorf("main lease acquired by ours at %s, before upstream was killed at %s", groupSince, killed)
	}
	for _, name := range shardedControllers {
		l, err := getLease(context.Background(), c, lease+"-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if at := l.Spec.AcquireTime.Time; at.Before(groupSince) {
			t.Errorf("%s acquired at %s, before ours held the main lease (%s)", name, at, groupSince)
		}
	}
}

func TestShardedNeedsLeaderElect(t *testing.T) {
	code, out := runKCM(t, "--leader-elect-sharded", "--leader-elect=false")
	if code != 1 || !strings.Contains(out, "--leader-elect-sharded requires --leader-elect=true") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}
