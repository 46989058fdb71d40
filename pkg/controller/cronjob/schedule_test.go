package cronjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMostRecentScheduleTimeAcrossAGapOfMoreThanFiveYears: the cron
// library gives up (returns the zero time) when it finds no start time
// within five years, as for 29 February between 2096 and 2104 (2100 is no
// leap year). mostRecentScheduleTime must still return, not step on from
// the zero time forever.
func TestMostRecentScheduleTimeAcrossAGapOfMoreThanFiveYears(t *testing.T) {
	sched, err := parseSchedule("0 0 29 2 *")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		created, now time.Time
		want         *time.Time
	}{
		{
			// The estimate lands on 2096-02-29; nothing follows it
			// within five years.
			created: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
			now:     time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC),
		},
		{
			created: time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC),
			now:     time.Date(2105, 1, 1, 0, 0, 0, 0, time.UTC),
			want:    ptrTime(time.Date(2104, 2, 29, 0, 0, 0, 0, time.UTC)),
		},
	} {
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(tc.created)}}
		type result struct {
			latest *time.Time
			err    error
		}
		done := make(chan result, 1)
		go func() {
			_, latest, _, err := mostRecentScheduleTime(cj, tc.now, sched, false)
			done <- result{latest, err}
		}()
		select {
		case r := <-done:
			if r.err != nil || (r.latest == nil) != (tc.want == nil) || (r.latest != nil && !r.latest.Equal(*tc.want)) {
				t.Errorf("created %v now %v: got %v, %v; want %v", tc.created, tc.now, r.latest, r.err, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("created %v now %v: mostRecentScheduleTime did not return", tc.created, tc.now)
		}
	}
}

func ptrTime(t time.Time) *time.Time { return &t }
