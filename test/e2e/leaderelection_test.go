package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

const (
	leaseDuration = 4 * time.Second
	retryPeriod   = 1 * time.Second
)

// leaderArgs elects on a lease of the test's own, so tests do not race.
func leaderArgs(lease string) []string {
	return []string{
		"--leader-elect-resource-name=" + lease,
		"--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=" + retryPeriod.String(),
		// Controllers are beside the point here: enable only one that
		// this build does not run.
		"--controllers=token-cleaner-controller",
	}
}

func getLease(ctx context.Context, c clientset.Interface, name string) (*coordinationv1.Lease, error) {
	return c.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitHolder waits until the lease has a holder other than not, and
// returns it with the time it took.
func waitHolder(t *testing.T, c clientset.Interface, lease, not string, timeout time.Duration) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	var got string
	framework.Eventually(t, timeout, "lease "+lease+" to get a new holder", func(ctx context.Context) (bool, error) {
		l, err := getLease(ctx, c, lease)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		got = holder(l)
		return got != "" && got != not, nil
	})
	return got, time.Since(start)
}

func TestLeaderElectionFailover(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	const lease = "kcm-failover"

	a := startKCM(t, leaderArgs(lease)...)
	first, _ := waitHolder(t, c, lease, "", 60*time.Second)

	b := startKCM(t, leaderArgs(lease)...)
	// B must stay a standby while A renews.
	time.Sleep(2 * leaseDuration)
	l, err := getLease(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != first {
		t.Fatalf("lease moved from %q to %q while the leader was alive", first, holder(l))
	}
	if strings.Contains(b.Output(), "successfully acquired lease") {
		t.Fatalf("standby claims it acquired the lease:\n%s", b.Output())
	}

	// Kill the leader without letting it release: B must take over once the
	// lease expires.
	if _, exited := a.stop(syscall.SIGKILL, 0); !exited {
		t.Fatal("leader did not die")
	}
	second, took := waitHolder(t, c, lease, first, 60*time.Second)
	t.Logf("standby took over %s after the leader died", took)
	if !strings.HasPrefix(second, strings.SplitN(first, "_", 2)[0]+"_") {
		t.Fatalf("new holder %q is not an identity of the form <hostname>_<uuid> like %q", second, first)
	}
}

// On SIGTERM the leader stops, releases the lease and exits 0, so a
// standby takes over without waiting for the lease to expire.
func TestLeaderReleasesLeaseOnSIGTERM(t *testing.T) {
	cp := framework.Shared(t)
	c := cp.Client(t)
	const lease = "kcm-release"

	a := startKCM(t, leaderArgs(lease)...)
	first, _ := waitHolder(t, c, lease, "", 60*time.Second)
	b := startKCM(t, leaderArgs(lease)...)
	_ = b

	if code, exited := a.stop(syscall.SIGTERM, 0); !exited || code != 0 {
		t.Fatalf("on SIGTERM: exited %v with code %d, want exit 0", exited, code)
	}
	// Released before exit: the Lease no longer names A (it is free or
	// already the standby's), with no expiry to wait for.
	l, err := getLease(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) == first {
		t.Fatalf("lease still held by %q after it exited on SIGTERM: not released", first)
	}
	waitHolder(t, c, lease, first, 60*time.Second)
}
