package e2e

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

var releasedPages = regexp.MustCompile(`"Released the binary's startup pages" residentKiB=(\d+)`)

// releases returns the resident KiB each release of startup pages logged.
func releases(p *kcmProcess) []uint64 {
	var out []uint64
	for _, m := range releasedPages.FindAllStringSubmatch(p.Output(), -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

func residentFileKiB(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no RssFile in /proc/PID/status")
	return 0
}

// A leader releases the binary's startup pages before the election and
// again once its informers have synced; a standby releases them before it
// waits, and stays small while it waits.
func TestStartupPagesReleased(t *testing.T) {
	c := framework.Shared(t).Client(t)
	const lease = "kcm-startup-pages"
	leader := startKCM(t, append(leaderArgs(lease), "-v=2")...)
	first, _ := waitHolder(t, c, lease, "", 60*time.Second)
	framework.Eventually(t, 60*time.Second, "the leader's two releases", func(context.Context) (bool, error) {
		return len(releases(leader)) >= 2, nil
	})
	for i, kib := range releases(leader) {
		if kib == 0 {
			t.Errorf("leader release %d freed nothing", i+1)
		}
	}

	standby := startKCM(t, append(leaderArgs(lease), "-v=2")...)
	framework.Eventually(t, 60*time.Second, "the standby's release", func(context.Context) (bool, error) {
		return len(releases(standby)) >= 1, nil
	})
	released := releases(standby)[0]
	// An idle standby touches again a fraction of what startup had mapped.
	if rss := residentFileKiB(t, standby.cmd.Process.Pid); rss >= released {
		t.Errorf("standby RssFile %d KiB after releasing %d KiB", rss, released)
	}
	l, err := getLease(context.Background(), c, lease)
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != first {
		t.Errorf("lease holder changed to %q; the standby must wait", holder(l))
	}
}
