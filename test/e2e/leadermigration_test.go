package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// The migration moves the TTL controller (listed for kube-controller-manager)
// and gives the CronJob controller to another component; the ClusterRole
// aggregation controller is not listed, so it stays under the main Lease.
const (
	migratedController = "ttl-controller"
	unownedController  = "cronjob-controller"
	mainController     = "clusterrole-aggregation-controller"
)

func writeMigrationConfig(t *testing.T, leaderName string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "leader-migration.yaml")
	content := fmt.Sprintf(`apiVersion: controllermanager.config.k8s.io/v1
kind: LeaderMigrationConfiguration
leaderName: %s
controllerLeaders:
- name: %s
  component: kube-controller-manager
- name: %s
  component: cloud-controller-manager
`, leaderName, migratedController, unownedController)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// migrationArgs elects on mainLease and, with the migration on, on the
// configuration's Lease too. Upstream's binary needs the signing key: it
// seeks the migration Lease only once its token controller runs.
func migrationArgs(cp *framework.ControlPlane, mainLease, config string) []string {
	return []string{
		"--leader-elect-resource-name=" + mainLease,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=" + retryPeriod.String(),
		"--enable-leader-migration",
		"--leader-migration-config=" + config,
		"--controllers=" + strings.Join([]string{migratedController, unownedController, mainController}, ","),
		"--service-account-private-key-file=" + cp.ServiceAccountKeyFile,
	}
}

// runsController tells from /healthz?verbose, which lists a check for each
// controller the process built, whether p runs name; ok is false when p
// did not answer.
func (p *kcmProcess) runsController(t *testing.T, name string) (runs, ok bool) {
	code, body := get(t, p.url("/healthz?verbose"), "")
	if code != http.StatusOK && code != http.StatusInternalServerError {
		return false, false
	}
	return strings.Contains(body, "[+]"+name+" ok") || strings.Contains(body, "[-]"+name+" failed"), true
}

func (p *kcmProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// migrationWatch samples every process's controllers until stopped and
// records any moment the migrated controller ran in two processes, or the
// unowned one ran at all.
type migrationWatch struct {
	mu         sync.Mutex
	violations []string
	samples    int
	stop       chan struct{}
	done       chan struct{}
}

func watchMigration(t *testing.T, procs map[string]*kcmProcess) *migrationWatch {
	w := &migrationWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			var running []string
			for name, p := range procs {
				if p.exited() {
					continue
				}
				if runs, ok := p.runsController(t, migratedController); ok && runs {
					running = append(running, name)
				}
				if runs, ok := p.runsController(t, unownedController); ok && runs {
					w.record(fmt.Sprintf("%s runs %s, which the migration gives another component", name, unownedController))
				}
			}
			if len(running) > 1 {
				w.record(fmt.Sprintf("%s runs in %v at once", migratedController, running))
			}
			w.mu.Lock()
			w.samples++
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.finish)
	return w
}

func (w *migrationWatch) record(v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, time.Now().Format("15:04:05.000 ")+v)
}

func (w *migrationWatch) finish() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *migrationWatch) check(t *testing.T) {
	t.Helper()
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Errorf("%d violations in %d samples:\n%s", len(w.violations), w.samples, strings.Join(w.violations, "\n"))
	}
	t.Logf("%d samples of every process's controllers", w.samples)
}

// waitRuns waits until p's /healthz lists the controller.
func waitRuns(t *testing.T, p *kcmProcess, who, controller string, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, who+" to run "+controller, func(context.Context) (bool, error) {
		runs, _ := p.runsController(t, controller)
		return runs, nil
	})
}

// waitNodeTTL creates a Node and waits for the TTL controller to annotate it.
func waitNodeTTL(t *testing.T, cp *framework.ControlPlane, name string) {
	t.Helper()
	c := cp.Client(t)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	framework.Eventually(t, 60*time.Second, "node "+name+" to get its TTL annotation", func(ctx context.Context) (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := n.Annotations["node.alpha.kubernetes.io/ttl"]
		return ok, nil
	})
}

// Two of ours, each leading its own main Lease as a kube-controller-manager
// and a cloud-controller-manager would during a migration, share the
// migration Lease: the migrated controller runs only in its holder, the
// unlisted one in both, the one given to another component in neither;
// killing the holder moves the migrated controller to the other.
func TestLeaderMigrationOursWithOurs(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	const migrationLease = "kcm-migration-ours"
	config := writeMigrationConfig(t, migrationLease)

	procs := map[string]*kcmProcess{
		"a": startKCM(t, migrationArgs(cp, "kcm-migration-ours-a", config)...),
		"b": startKCM(t, migrationArgs(cp, "kcm-migration-ours-b", config)...),
	}
	w := watchMigration(t, procs)
	ids := map[string]string{}
	for name := range procs {
		ids[name], _ = waitHolder(t, c, "kcm-migration-ours-"+name, "", 60*time.Second)
	}
	for name, p := range procs {
		waitRuns(t, p, name, mainController, 60*time.Second)
	}
	holderID, _ := waitHolder(t, c, migrationLease, "", 60*time.Second)
	var holderName, standbyName string
	for name, id := range ids {
		if id == holderID {
			holderName = name
		} else {
			standbyName = name
		}
	}
	if holderName == "" || standbyName == "" {
		t.Fatalf("migration lease held by %q, not one of %v", holderID, ids)
	}
	waitRuns(t, procs[holderName], holderName, migratedController, 60*time.Second)
	waitNodeTTL(t, cp, "kcm-migration-ours-1")
	// The standby keeps campaigning; give it several lease durations to
	// misbehave. The take-over below is the positive control.
	time.Sleep(3 * leaseDuration)
	if runs, _ := procs[standbyName].runsController(t, migratedController); runs {
		t.Fatalf("%s runs %s while %s holds the migration lease", standbyName, migratedController, holderName)
	}

	killed := time.Now()
	if _, exited := procs[holderName].stop(syscall.SIGKILL, 10*time.Second); !exited {
		t.Fatal("migration lease holder did not die")
	}
	if got, _ := waitHolder(t, c, migrationLease, holderID, 60*time.Second); got != ids[standbyName] {
		t.Fatalf("migration lease moved to %q, want %s's %q", got, standbyName, ids[standbyName])
	}
	waitRuns(t, procs[standbyName], standbyName, migratedController, 60*time.Second)
	l, err := getLease(context.Background(), c, migrationLease)
	if err != nil {
		t.Fatal(err)
	}
	if at := l.Spec.AcquireTime.Time; at.Before(killed.Add(-time.Second)) {
		t.Errorf("migration lease acquired at %s, before its holder was killed at %s", at, killed)
	}
	waitNodeTTL(t, cp, "kcm-migration-ours-2")
	if strings.Contains(procs[standbyName].Output(), "is already registered") {
		t.Errorf("%s logged a duplicate registration taking the migration lease", standbyName)
	}
	w.check(t)
}

// Ours holds the migration Lease while upstream's binary leads its own main
// Lease with the same migration configuration: upstream runs its main
// controllers but not the migrated one. Upstream v1.37.2 exits as soon as
// it takes a migration Lease itself (its second controller context
// registers the informer metrics name again), so the hand-over to upstream
// is only logged, not asserted.
func TestLeaderMigrationBesideUpstream(t *testing.T) {
	upstream := filepath.Join(framework.BinDir(), "kube-controller-manager-upstream")
	if _, err := os.Stat(upstream); err != nil {
		t.Skipf("no upstream binary: %v", err)
	}
	cp := framework.Shared(t)
	c := cp.Client(t)
	const migrationLease = "kcm-migration-mixed"
	config := writeMigrationConfig(t, migrationLease)

	ours := startKCM(t, migrationArgs(cp, "kcm-migration-mixed-ours", config)...)
	oursID, _ := waitHolder(t, c, "kcm-migration-mixed-ours", "", 60*time.Second)
	if got, _ := waitHolder(t, c, migrationLease, "", 60*time.Second); got != oursID {
		t.Fatalf("migration lease held by %q, want ours %q", got, oursID)
	}
	waitRuns(t, ours, "ours", migratedController, 60*time.Second)

	up := startKCMOn(t, cp, upstream, migrationArgs(cp, "kcm-migration-mixed-upstream", config)...)
	w := watchMigration(t, map[string]*kcmProcess{"ours": ours, "upstream": up})
	waitHolder(t, c, "kcm-migration-mixed-upstream", "", 60*time.Second)
	// Upstream seeks the migration lease once its main controllers start.
	waitRuns(t, up, "upstream", mainController, 60*time.Second)
	time.Sleep(3 * leaseDuration)
	if up.exited() {
		t.Fatalf("upstream exited while ours held the migration lease:\n%s", tail(up.Output(), 3000))
	}
	if runs, _ := up.runsController(t, migratedController); runs {
		t.Fatalf("upstream runs %s while ours holds the migration lease", migratedController)
	}
	if l, err := getLease(context.Background(), c, migrationLease); err != nil || holder(l) != oursID {
		t.Fatalf("migration lease %q (%v), want still ours %q", holder(l), err, oursID)
	}
	w.check(t)

	// What upstream does with the lease is its own business; log it.
	if _, exited := ours.stop(syscall.SIGKILL, 10*time.Second); !exited {
		t.Fatal("ours did not die")
	}
	select {
	case <-up.done:
		line := regexp.MustCompile(`.*already registered.*`).FindString(up.Output())
		t.Logf("upstream exited with %d after ours was killed: %s", up.exitCode, line)
	case <-time.After(3 * leaseDuration):
		t.Logf("upstream still running %s after ours was killed", 3*leaseDuration)
	}
}
