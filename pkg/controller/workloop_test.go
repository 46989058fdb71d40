package controller

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
