package cronjob

import (
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const year = int64(365 * 24 * 3600)

// span maps v onto [lo, hi) seconds.
func span(v, lo, hi int64) time.Duration {
	n := hi - lo
	return time.Duration(lo+((v%n)+n)%n) * time.Second
}

// FuzzScheduleHandling drives what the controller does with a CronJob's
// schedule — time zone check, TZ=/CRON_TZ= handling, parsing, the most
// recent and next start times, the scheduled-time annotation and Job name —
// with arbitrary schedules, time zones and times, and checks that nothing
// panics or hangs and that the results are consistent. The times stay
// within a range the API sees in practice: a creation time in the 250
// years from 2000, lastScheduleTime and now within two centuries of it
// (time.Duration, and so the controller's arithmetic, spans 292 years).
//
// The seed corpus runs with plain `go test`; search further with
// `go test -fuzz=FuzzScheduleHandling ./pkg/controller/cronjob/`.
func FuzzScheduleHandling(f *testing.F) {
	for _, s := range []struct {
		schedule, tz                    string
		created, last, now, deadlineSec int64
	}{
		{"* * * * *", "", 0, 0, 90, -1},
		{"*/5 * * * *", "Europe/Warsaw", 1e6, 3e6, 5e6, 200},
		{"30 6-16/4 * * 1-5", "America/New_York", 7e7, 0, 7e7 + 2e6, -1},
		{"0 0 29 2 *", "", 0, 0, 101 * year, -1},                 // leap days; none in 2100
		{"0 0 29 2 *", "", 90*year + 5e6, 0, 101*year + 1e7, -1}, // across 2100
		{"0 0 30 2 *", "", 5, 0, 1e8, -1},                        // never fires
		{"0 0 31 4,6,9,11 *", "", 5, 0, 1e8, 10},                 // never fires
		{"@every 1s", "", 0, 0, 3600, -1},
		{"@every 1h30m", "Asia/Kolkata", 0, 1e5, 2e5, 60},
		{"@every 0s", "", 0, 0, 100, -1},
		{"@every -5m", "", 0, 0, 100, -1},
		{"@every 2562047h", "", 0, 0, 100, -1},
		{"@hourly", "", 123, 0, 50 * year, -1}, // many missed
		{"@yearly", "Pacific/Kiritimati", 0, 0, 150 * year, 0},
		{"@reboot", "", 0, 0, 100, -1},
		{"TZ=Europe/Berlin 30 2 * 3 *", "", 0, 0, 2 * year, -1}, // DST gap
		{"CRON_TZ=America/Sao_Paulo 0 0 * * *", "", 0, 0, year, -1},
		{"TZ=Europe/Berlin", "", 0, 0, 100, -1}, // zone, no fields
		{"TZ= * * * * *", "", 0, 0, 100, -1},    // empty zone
		{"CRON_TZ=Nowhere/Land * * * * *", "", 0, 0, 100, -1},
		{"TZ=../../etc/passwd * * * * *", "", 0, 0, 100, -1},
		{"0 0 * * *", "Mars/Olympus_Mons", 0, 0, 1e6, -1},
		{"0 0 * * *", "Local", 0, 0, 1e6, -1},
		{"0 0 * * *", "/etc/localtime", 0, 0, 1e6, -1},
		{"0 0 * * *", "", 0, -year, 1e6, -1}, // lastScheduleTime before creation
		{"0 0 * * *", "", 0, 0, -1e6, -1},    // now before creation
		{"1-0 * * * *", "", 0, 0, 100, -1},
		{"*/0 * * * *", "", 0, 0, 100, -1},
		{"60 * * * *", "", 0, 0, 100, -1},
		{"* * * * * * *", "", 0, 0, 100, -1},
		{"", "", 0, 0, 100, -1},
		{"@", "", 0, 0, 100, -1},
		{"? ? ? ? ?", "", 0, 0, 100, -1},
		{"0 0 L * *", "", 0, 0, 100, -1},
		{"5-4/2 * * * *", "", 0, 0, 100, -1},
		{"0-59/1000000000000 * * * *", "", 0, 0, 100, -1},
		{"* * * JAN-DEC SUN-SAT", "", 0, 0, 100, -1},
	} {
		f.Add(s.schedule, s.tz, s.created, s.last, s.now, s.deadlineSec)
	}
	f.Fuzz(func(t *testing.T, schedule, tz string, createdSec, lastSec, nowSec, deadlineSec int64) {
		base := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		created := base.Add(span(createdSec, 0, 250*year))
		cj := &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid", CreationTimestamp: metav1.NewTime(created)},
			Spec:       batchv1.CronJobSpec{Schedule: schedule},
		}
		if tz != "" {
			cj.Spec.TimeZone = ptr.To(tz)
		}
		if lastSec != 0 {
			cj.Status.LastScheduleTime = &metav1.Time{Time: created.Add(span(lastSec, -year, 200*year))}
		}
		if deadlineSec >= 0 {
			cj.Spec.StartingDeadlineSeconds = ptr.To(deadlineSec % (10 * year))
		}
		now := created.Add(span(nowSec, -year, 200*year))

		// The order of syncCronJob: an unknown time zone stops it first.
		if cj.Spec.TimeZone != nil {
			if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
				return
			}
		}
		formatted := formatSchedule(cj, nil)
		if !strings.Contains(schedule, "TZ") && cj.Spec.TimeZone != nil && formatted != "TZ="+tz+" "+schedule {
			t.Fatalf("formatSchedule(%q, %q) = %q", schedule, tz, formatted)
		}
		sched, err := parseSchedule(formatted)
		if err != nil {
			return
		}

		// A schedule that never yields a result hangs here; go test's
		// -timeout reports it with the stack.
		check(t, cj, now, sched)
	})
}

// check runs the start-time computations on one parsed schedule.
func check(t *testing.T, cj *batchv1.CronJob, now time.Time, sched interface{ Next(time.Time) time.Time }) {
	for _, withDeadline := range []bool{false, true} {
		earliest, latest, _, err := mostRecentScheduleTime(cj, now, sched, withDeadline)
		if err != nil && latest != nil {
			t.Errorf("both a start time %v and an error %v", latest, err)
		}
		if latest != nil && (latest.After(now) || !latest.After(earliest)) {
			t.Errorf("most recent start time %v outside (%v, %v]", latest, earliest, now)
		}
	}
	if d := nextScheduleTimeDuration(cj, now, sched); d == nil {
		t.Errorf("no requeue delay")
	}
	scheduled, err := nextScheduleTime(klog.Background(), cj, now, sched, &record.FakeRecorder{})
	if err != nil || scheduled == nil {
		return
	}
	job, err := jobFromTemplate(cj, *scheduled)
	if err != nil {
		t.Errorf("jobFromTemplate: %v", err)
		return
	}
	if want := "fuzz-" + strconv.FormatInt(scheduled.Unix()/60, 10); job.Name != want {
		t.Errorf("job name %q, want %q", job.Name, want)
	}
	// RFC 3339 drops the seconds of an offset (local mean times before
	// 1900, such as Kolkata's +05:53:28), hence the minute of slack.
	stamp, err := time.Parse(time.RFC3339, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	if d := stamp.Sub(*scheduled); err != nil || d <= -time.Minute || d >= time.Minute {
		t.Errorf("scheduled-timestamp annotation %q for %v: %v", job.Annotations[batchv1.CronJobScheduledTimestampAnnotation], scheduled, err)
	}
}
