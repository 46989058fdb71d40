package cronjob

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the control CronJob's zone loads whatever the host has

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// testZone exists only in the zoneinfo directory TestMain hands to the
// apiserver (through $ZONEINFO), so the apiserver accepts it while the
// controller, in this process, does not know it: the situation of a
// controller-manager host whose time zone database lacks a zone.
const testZone = "Kcm/Nowhere"

// writeTestZone writes testZone under dir as a minimal TZif (version 1)
// file: no transitions, one zone type, UTC+3 named KCM.
func writeTestZone(dir string) error {
	var b []byte
	b = append(b, "TZif"...)
	b = append(b, make([]byte, 16)...) // version 0 (v1) and reserved
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} {
		// isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
		b = binary.BigEndian.AppendUint32(b, n)
	}
	b = binary.BigEndian.AppendUint32(b, 3*3600) // utoff
	b = append(b, 0, 0)                          // isdst, desigidx
	b = append(b, "KCM\x00"...)
	path := filepath.Join(dir, filepath.FromSlash(testZone))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

var forgetZoneOnce sync.Once

// forgetTestZone drops $ZONEINFO from this process before its first time
// zone lookup (Go reads it once), so that testZone is unknown here.
func forgetTestZone(t *testing.T) {
	t.Helper()
	forgetZoneOnce.Do(func() { _ = os.Unsetenv("ZONEINFO") })
	if _, err := time.LoadLocation(testZone); err == nil {
		t.Fatalf("time zone %s loads in the test process: $ZONEINFO was read before the test dropped it", testZone)
	}
}

func cronJobEvents(ctx context.Context, c clientset.Interface, ns, name string) ([]v1.Event, error) {
	l, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []v1.Event
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "CronJob" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out, nil
}

// onlyEvent reports whether the CronJob's events are all from the cronjob
// controller with the given type, reason and message, counting at most max
// occurrences (and at least one).
func onlyEvent(ctx context.Context, c clientset.Interface, ns, name, typ, reason, message string, maxCount int32) (bool, string, error) {
	evs, err := cronJobEvents(ctx, c, ns, name)
	if err != nil {
		return false, "", err
	}
	var total int32
	var seen []string
	ok := true
	for _, e := range evs {
		seen = append(seen, fmt.Sprintf("%s %s/%s %q x%d", e.Source.Component, e.Type, e.Reason, e.Message, e.Count))
		if e.Source.Component != "cronjob-controller" || e.Type != typ || e.Reason != reason || e.Message != message {
			ok = false
		}
		total += max(e.Count, 1)
	}
	return ok && total >= 1 && total <= maxCount, fmt.Sprint(seen), nil
}

// TestInvalidScheduleAndUnknownTimeZone: a CronJob whose schedule never
// fires (30 February) and one whose time zone the controller does not know
// each get one Warning event (InvalidSchedule, UnknownTimeZone, with
// upstream's messages) and nothing else: no Job, no status change, and no
// retry loop piling up events. A valid CronJob next to them does start a
// Job at the same time.
func TestInvalidScheduleAndUnknownTimeZone(t *testing.T) {
	forgetTestZone(t)
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "cronjob-invalid")
	ctx := context.Background()
	clk := &skewedClock{}
	// Two minutes ahead: every "* * * * *" CronJob is due at once.
	clk.set(2 * time.Minute)
	runControllers(t, c, clk, false)

	never := newCronJob("never")
	never.Spec.Schedule = "0 0 30 2 *"
	unknown := newCronJob("unknown-zone")
	unknown.Spec.TimeZone = ptr.To(testZone)
	control := newCronJob("control")
	control.Spec.TimeZone = ptr.To("Etc/UTC")
	for _, cj := range []*batchv1.CronJob{never, unknown, control} {
		if _, err := c.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", cj.Name, err)
		}
	}

	invalid := func(ctx context.Context) (bool, string, error) {
		return onlyEvent(ctx, c, ns, never.Name, v1.EventTypeWarning, "InvalidSchedule",
			"invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second", 2)
	}
	unknownZone := func(ctx context.Context) (bool, string, error) {
		return onlyEvent(ctx, c, ns, unknown.Name, v1.EventTypeWarning, "UnknownTimeZone",
			fmt.Sprintf("invalid timeZone: %q: unknown time zone %s", testZone, testZone), 2)
	}
	eventually(t, "an InvalidSchedule event", invalid)
	eventually(t, "an UnknownTimeZone event", unknownZone)
	eventually(t, "the control CronJob's Job", func(ctx context.Context) (bool, string, error) {
		jobs, err := jobsIn(ctx, c, ns)
		return len(jobs) == 1, fmt.Sprintf("%d jobs", len(jobs)), err
	})

	// Nothing more happens: no Job, no status, no event storm.
	end := time.Now().Add(5 * time.Second)
	for time.Now().Before(end) {
		for _, check := range []func(context.Context) (bool, string, error){invalid, unknownZone} {
			if ok, seen, err := check(ctx); err != nil || !ok {
				t.Fatalf("events changed: %s (%v)", seen, err)
			}
		}
		jobs, err := jobsIn(ctx, c, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if ref := metav1.GetControllerOf(&j); ref == nil || ref.Name != control.Name {
				t.Fatalf("job %s started", j.Name)
			}
		}
		for _, name := range []string{never.Name, unknown.Name} {
			cj, err := c.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cj.Status.LastScheduleTime != nil || len(cj.Status.Active) != 0 {
				t.Fatalf("%s status changed: %+v", name, cj.Status)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// eventually polls cond until it holds, failing with what it last saw.
func eventually(t *testing.T, what string, cond func(context.Context) (bool, string, error)) {
	t.Helper()
	var last, lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, detail, err := cond(ctx)
		if err != nil {
			lastErr = err.Error()
			return false, nil
		}
		last = detail
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; last seen: %s (last error: %s)", timeout, what, last, lastErr)
	}
}

// TestConcurrencyPolicies: one minute after the first Job started (by the
// controller's clock) and while it still runs, Allow starts a second Job
// next to it and Replace deletes the first (SuccessfulDelete) and starts
// the second in its place. Forbid is covered by TestCronJobCreatesJob.
func TestConcurrencyPolicies(t *testing.T) {
	c := framework.Shared(t).Client(t)
	for _, policy := range []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ReplaceConcurrent} {
		t.Run(string(policy), func(t *testing.T) {
			ns := framework.CreateNamespace(t, c, "cronjob-"+string(policy))
			ctx := context.Background()
			clk := &skewedClock{}
			runControllers(t, c, clk, false)
			due := aheadToNextMinute(t, clk)
			spec := newCronJob("policy")
			spec.Spec.ConcurrencyPolicy = policy
			cj, err := c.BatchV1().CronJobs(ns).Create(ctx, spec, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			name := func(at time.Time) string { return fmt.Sprintf("policy-%d", at.Unix()/60) }
			// activeAndJobs waits until status.active and the Jobs that
			// exist both name exactly want.
			activeAndJobs := func(want ...string) {
				t.Helper()
				eventually(t, fmt.Sprintf("active Jobs %v", want), func(ctx context.Context) (bool, string, error) {
					cur, err := c.BatchV1().CronJobs(ns).Get(ctx, cj.Name, metav1.GetOptions{})
					if err != nil {
						return false, "", err
					}
					jobs, err := jobsIn(ctx, c, ns)
					if err != nil {
						return false, "", err
					}
					var active, existing []string
					for _, r := range cur.Status.Active {
						active = append(active, r.Name)
					}
					for _, j := range jobs {
						if j.DeletionTimestamp == nil {
							existing = append(existing, j.Name)
						}
					}
					sort.Strings(active)
					sort.Strings(existing)
					return slices.Equal(active, want) && slices.Equal(existing, want),
						fmt.Sprintf("status.active %v, jobs %v", active, existing), nil
				})
			}
			activeAndJobs(name(due))

			clk.set(time.Duration(clk.offset.Load()) + time.Minute)
			poke(t, c, ns, cj.Name)
			if policy == batchv1.AllowConcurrent {
				activeAndJobs(name(due), name(due.Add(time.Minute)))
				return
			}
			activeAndJobs(name(due.Add(time.Minute)))
			eventually(t, "a SuccessfulDelete event", func(ctx context.Context) (bool, string, error) {
				evs, err := cronJobEvents(ctx, c, ns, cj.Name)
				if err != nil {
					return false, "", err
				}
				var seen []string
				for _, e := range evs {
					if e.Reason == "SuccessfulDelete" && e.Message == "Deleted job "+name(due) && e.Source.Component == "cronjob-controller" {
						return true, "", nil
					}
					seen = append(seen, e.Reason+": "+e.Message)
				}
				return false, fmt.Sprint(seen), nil
			})
		})
	}
}
