package cronjob

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// tooManyMissed is how many missed start times make the controller warn
// (TooManyMissedTimes) that the clock or the deadline is probably wrong.
const tooManyMissed = 100

// missed classifies how many start times passed unnoticed.
type missed int

const (
	missedNone missed = iota
	missedFew
	missedMany
)

func (m missed) String() string {
	switch m {
	case missedNone:
		return "none"
	case missedFew:
		return "few"
	case missedMany:
		return "many"
	}
	return fmt.Sprintf("unknown(%d)", int(m))
}

// parseSchedule parses a standard five-field schedule (with the @hourly
// style descriptors and an optional CRON_TZ=/TZ= prefix). The cron library
// can panic on some inputs; that becomes an error.
func parseSchedule(schedule string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(schedule)
}

// formatSchedule returns the schedule to parse: spec.schedule, prefixed
// with TZ=<spec.timeZone> when a valid time zone is set. A schedule that
// already names a zone (CRON_TZ= or TZ=) is used as is, with an
// UnsupportedSchedule warning when recorder is not nil.
func formatSchedule(cj *batchv1.CronJob, recorder record.EventRecorder) string {
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		if recorder != nil {
			recorder.Eventf(cj, corev1.EventTypeWarning, "UnsupportedSchedule",
				"CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
				cj.Spec.Schedule)
		}
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err == nil {
			return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
		}
	}
	return cj.Spec.Schedule
}

// mostRecentScheduleTime returns the time from which start times are
// counted (lastScheduleTime, else creation; with withDeadline, no earlier
// than now-startingDeadlineSeconds), the latest start time in (earliest,
// now] if any, and how many were missed.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, withDeadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if withDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		deadline := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second)
		if deadline.After(earliest) {
			earliest = deadline
		}
	}

	first := sched.Next(earliest)
	second := sched.Next(first)
	if now.Before(first) {
		return earliest, nil, missedNone, nil
	}
	if now.Before(second) {
		return earliest, &first, missedNone, nil
	}

	// Schedules that never fire (31 February) yield the zero time twice.
	interval := int64(second.Sub(first).Round(time.Second).Seconds())
	if interval < 1 {
		return earliest, nil, missedNone, errors.New("time difference between two schedules is less than 1 second")
	}
	// Estimate how many start times fit since the first, then step the
	// schedule from one interval before the estimate of the latest so that
	// irregular schedules (30 6-16/4 * * 1-5) and @every land exactly.
	count := int64(now.Sub(first).Seconds())/interval + 1
	from := first.Add(time.Duration((count-2)*interval) * time.Second)
	// Next returns the zero time when it finds no start time within five
	// years (0 0 29 2 * from 2096 on: 2100 is no leap year). Stop there:
	// the zero time is never after now, and stepping on from it would
	// restart at year 1 and spin forever (upstream's loop does).
	var latest time.Time
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		latest = t
	}

	m := missedFew
	if count > tooManyMissed {
		m = missedMany
	}
	if latest.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &latest, m, nil
}

// nextScheduleTimeDuration returns how long to wait, from now, until just
// after the next start time.
func nextScheduleTimeDuration(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) *time.Duration {
	earliest, latest, m, err := mostRecentScheduleTime(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
		// Still requeue: aim at the next slot after now.
	case latest != nil:
		from = *latest
	case m == missedNone:
		from = earliest
	}
	d := sched.Next(from).Add(nextScheduleDelta).Sub(now)
	return &d
}

// nextScheduleTime returns the start time to act on now, if any, warning
// with TooManyMissedTimes when more than tooManyMissed were missed.
func nextScheduleTime(logger klog.Logger, cj *batchv1.CronJob, now time.Time, sched cron.Schedule, recorder record.EventRecorder) (*time.Time, error) {
	_, latest, m, err := mostRecentScheduleTime(cj, now, sched, true)
	if latest == nil || latest.After(now) {
		return nil, err
	}
	if m == missedMany {
		recorder.Eventf(cj, corev1.EventTypeWarning, "TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
		logger.Info("too many missed times", "cronjob", klog.KObj(cj))
	}
	return latest, err
}
