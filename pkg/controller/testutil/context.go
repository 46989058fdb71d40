package testutil

import (
	"context"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// Context returns a context carrying a klog logger that is cancelled when
// t's cleanups run, so goroutines a test starts with it (informers,
// controller Run loops) stop before the next test begins.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	t.Cleanup(cancel)
	return ctx
}

// pollInterval is short because the conditions are cheap checks of fakes.
const pollInterval = 5 * time.Millisecond

// WaitFor polls cond until it holds and fails t when it never does. There
// is deliberately no timeout of its own: a slow (e.g. -race, loaded) machine
// only makes the test slower, and only the test's own deadline (go test
// -timeout) ends the wait, early enough to report what was awaited rather
// than a panic of the whole binary.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	WaitUntil(t, what, func(context.Context) (bool, error) { return cond(), nil })
}

// WaitUntil is WaitFor for conditions that need a context or can fail; an
// error ends the wait and fails t at once.
func WaitUntil(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := Context(t)
	if deadline, ok := testDeadline(t); ok {
		// Leave a little of the test's time to report the failure.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/20))
		defer cancel()
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// testDeadline is t.Deadline for the *testing.T that has one.
func testDeadline(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return d.Deadline()
	}
	return time.Time{}, false
}
