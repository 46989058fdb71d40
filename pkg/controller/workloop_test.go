package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // what the app imports
)

func TestWorkLoopForgetsOnSuccessAndRequeuesOnError(t *testing.T) {
	q := NewNamedQueue("test-forget")
	defer q.ShutDown()
	fail := true
	loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(ctx context.Context, key string) error {
		if fail {
			return errors.New("boom")
		}
		return nil
	}}
	q.Add("a")
	loop.ProcessNextWorkItem(context.Background())
	if n := q.NumRequeues("a"); n != 1 {
		t.Fatalf("requeues after failure = %d, want 1", n)
	}
	// The rate-limited re-add arrives after the backoff (5ms for the first retry).
	fail = false
	loop.ProcessNextWorkItem(context.Background())
	if n := q.NumRequeues("a"); n != 0 {
		t.Fatalf("requeues after success = %d, want 0", n)
	}
	if q.Len() != 0 {
		t.Fatalf("queue not empty: %d", q.Len())
	}
}

func TestWorkLoopMaxRetriesDropsKey(t *testing.T) {
	q := NewNamedQueue("test-maxretries")
	defer q.ShutDown()
	calls := 0
	loop := WorkLoop[string]{Name: "t", Queue: q, MaxRetries: 2, Sync: func(ctx context.Context, key string) error {
		calls++
		return errors.New("boom")
	}}
	q.Add("a")
	for i := 0; i < 3; i++ {
		loop.ProcessNextWorkItem(context.Background())
	}
	if calls != 3 || q.NumRequeues("a") != 0 {
		t.Fatalf("calls=%d requeues=%d, want 3 and 0 (dropped)", calls, q.NumRequeues("a"))
	}
	time.Sleep(50 * time.Millisecond)
	if q.Len() != 0 {
		t.Fatalf("dropped key came back")
	}
}

func TestWorkLoopRecoversPanicWhenNotCrashing(t *testing.T) {
	old := utilruntime.ReallyCrash
	utilruntime.ReallyCrash = false
	defer func() { utilruntime.ReallyCrash = old }()

	q := NewNamedQueue("test-panic")
	defer q.ShutDown()
	loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(ctx context.Context, key string) error { panic("bad") }}
	q.Add("a")
	if !loop.ProcessNextWorkItem(context.Background()) {
		t.Fatal("loop stopped")
	}
	if q.NumRequeues("a") != 1 {
		t.Fatalf("a panicking sync must be retried like an error")
	}
}

func TestWorkLoopRunStopsOnCancel(t *testing.T) {
	q := NewNamedQueue("test-run")
	var synced atomic.Int32
	loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(ctx context.Context, key string) error {
		synced.Add(1)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		loop.Run(ctx, 3, func() bool { return true })
		close(done)
	}()
	for _, k := range []string{"a", "b", "c"} {
		q.Add(k)
	}
	deadline := time.Now().Add(5 * time.Second)
	for synced.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !q.ShuttingDown() {
		t.Fatal("queue not shut down")
	}
	if synced.Load() != 3 {
		t.Fatalf("synced %d keys, want 3", synced.Load())
	}
}

func TestWorkLoopRunReturnsWhenCachesNeverSync(t *testing.T) {
	q := NewNamedQueue("test-nosync")
	loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(context.Context, string) error { return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	loop.Run(ctx, 1, func() bool { return false })
	if !q.ShuttingDown() {
		t.Fatal("queue not shut down")
	}
}

func TestWorkqueueMetricsCarryQueueName(t *testing.T) {
	q := NewNamedQueue("test-metrics-name")
	defer q.ShutDown()
	q.Add("x")
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{
		"workqueue_adds_total": false, "workqueue_depth": false, "workqueue_longest_running_processor_seconds": false,
		"workqueue_queue_duration_seconds": false, "workqueue_retries_total": false,
		"workqueue_unfinished_work_seconds": false, "workqueue_work_duration_seconds": false,
	}
	for _, f := range families {
		if _, ok := want[f.GetName()]; !ok {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "test-metrics-name" {
					want[f.GetName()] = true
				}
			}
		}
	}
	var missing []string
	for name, seen := range want {
		if !seen {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("metrics without name=test-metrics-name: %s", strings.Join(missing, ", "))
	}
}

func TestWorkLoopOutcomes(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("slow down", 7)
	cases := []struct {
		name       string
		err        error
		wantRetry  int           // NumRequeues after the sync
		wantAfter  time.Duration // the delay AddAfter got, 0 for none
		wantQueued bool          // the key comes back by a rate-limited add
	}{
		{name: "done", err: nil},
		{name: "plain error retries with backoff", err: errors.New("boom"), wantRetry: 1, wantQueued: true},
		{name: "retry after a delay", err: RetryAfter(time.Minute, nil), wantAfter: time.Minute},
		{name: "retry after a delay with an error", err: RetryAfter(time.Hour, errors.New("later")), wantAfter: time.Hour},
		{name: "server-suggested delay", err: RetryAfterServerDelay(tooMany), wantAfter: 7 * time.Second},
		{name: "server suggests nothing: backoff", err: RetryAfterServerDelay(errors.New("x")), wantRetry: 1, wantQueued: true},
		{name: "give up", err: GiveUp(errors.New("bad spec"))},
		{name: "quiet retries with backoff", err: Quietly(errors.New("conflict")), wantRetry: 1, wantQueued: true},
		{name: "quiet keeps a delay", err: Quietly(RetryAfter(time.Minute, errors.New("x"))), wantAfter: time.Minute},
		{name: "wrapped outcome", err: fmt.Errorf("ctx: %w", GiveUp(errors.New("x")))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{TypedRateLimitingInterface: NewNamedQueue("")}
			defer q.ShutDown()
			loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(context.Context, string) error { return tc.err }}
			q.Add("a")
			loop.ProcessNextWorkItem(context.Background())
			if got := q.NumRequeues("a"); got != tc.wantRetry {
				t.Errorf("NumRequeues = %d, want %d", got, tc.wantRetry)
			}
			if q.after != tc.wantAfter {
				t.Errorf("AddAfter delay = %s, want %s", q.after, tc.wantAfter)
			}
			if q.rateLimited != tc.wantQueued {
				t.Errorf("AddRateLimited called = %v, want %v", q.rateLimited, tc.wantQueued)
			}
		})
	}
}

func TestWorkLoopRequeueAfterKeepsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name      string
		second    error
		wantRetry int
	}{
		{name: "RequeueAfter keeps the failure count", second: RequeueAfter(time.Hour), wantRetry: 1},
		{name: "RetryAfter forgets it", second: RetryAfter(time.Hour, nil), wantRetry: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{TypedRateLimitingInterface: NewNamedQueue("")}
			defer q.ShutDown()
			results := []error{errors.New("boom"), tc.second}
			loop := WorkLoop[string]{Name: "t", Queue: q, Sync: func(context.Context, string) error {
				err := results[0]
				results = results[1:]
				return err
			}}
			q.Add("a")
			loop.ProcessNextWorkItem(context.Background()) // fails; back after 5ms
			loop.ProcessNextWorkItem(context.Background())
			if got := q.NumRequeues("a"); got != tc.wantRetry {
				t.Errorf("NumRequeues = %d, want %d", got, tc.wantRetry)
			}
			if q.after != time.Hour {
				t.Errorf("AddAfter delay = %s, want 1h", q.after)
			}
		})
	}
}

func TestWorkLoopEnqueue(t *testing.T) {
	q := &recordingQueue{TypedRateLimitingInterface: NewNamedQueue("")}
	defer q.ShutDown()
	loop := WorkLoop[string]{Name: "t", Queue: q}
	loop.Enqueue("a")
	loop.EnqueueAfter("b", time.Hour)
	if q.Len() != 1 || q.after != time.Hour {
		t.Fatalf("len=%d after=%s, want 1 and 1h", q.Len(), q.after)
	}
}

func TestWorkLoopReportsStatus(t *testing.T) {
	reg := NewStatusRegistry()
	st := reg.Controller("c")
	st.Start(time.Now())
	ctx := WithStatus(context.Background(), st)
	q := NewNamedQueue("")
	defer q.ShutDown()
	release := make(chan struct{})
	inSync := make(chan struct{})
	fail := true
	loop := WorkLoop[string]{Name: "q", Queue: q, Sync: func(_ context.Context, key string) error {
		if key == "slow" {
			close(inSync)
			<-release
		}
		if fail {
			return errors.New("it broke")
		}
		return nil
	}}
	loop.report(ctx)
	st.ReportSynced(func() bool { return true })
	q.Add("a")
	loop.ProcessNextWorkItem(ctx)
	snap := reg.Snapshot(time.Now())[0]
	if snap.LastError == nil || snap.LastError.Key != "a" || snap.LastError.Message != "it broke" || snap.LastSuccess != nil {
		t.Fatalf("after a failed sync: %+v", snap)
	}
	if snap.QueueDepth == nil || snap.InformersSynced == nil || !*snap.InformersSynced || len(snap.Queues) != 1 || snap.Queues[0] != "q" {
		t.Fatalf("queue or informers not reported: %+v", snap)
	}

	fail = false
	q.Add("slow")
	done := make(chan struct{})
	go func() {
		loop.ProcessNextWorkItem(ctx)
		close(done)
	}()
	<-inSync
	if snap := reg.Snapshot(time.Now())[0]; snap.LongestSync == nil || snap.LongestSync.Key != "slow" {
		t.Fatalf("running sync not shown: %+v", snap.LongestSync)
	}
	close(release)
	<-done
	snap = reg.Snapshot(time.Now())[0]
	if snap.LongestSync != nil || snap.LastSuccess == nil || snap.LastError == nil {
		t.Fatalf("after a successful sync: %+v", snap)
	}
	st.Stop()
	if snap := reg.Snapshot(time.Now())[0]; snap.Running || snap.QueueDepth != nil {
		t.Fatalf("after Stop: %+v", snap)
	}
}

func TestTombstoneHelpers(t *testing.T) {
	type obj struct{ n int }
	o := &obj{1}
	if got, ok := FromTombstone[*obj](o); !ok || got != o {
		t.Fatal("plain object not returned")
	}
	if got, ok := FromTombstone[*obj](cache.DeletedFinalStateUnknown{Key: "k", Obj: o}); !ok || got != o {
		t.Fatal("tombstone not unwrapped")
	}
	if _, ok := FromTombstone[*obj](cache.DeletedFinalStateUnknown{Key: "k", Obj: "other"}); ok {
		t.Fatal("wrong type accepted")
	}
}

// recordingQueue remembers AddAfter's delay and whether AddRateLimited ran.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	after       time.Duration
	rateLimited bool
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.after = d
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

func (q *recordingQueue) AddRateLimited(key string) {
	q.rateLimited = true
	q.TypedRateLimitingInterface.AddRateLimited(key)
}
