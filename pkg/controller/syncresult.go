package controller

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// How a sync ended, beyond nil (done) and a plain error (retry with backoff).
// A Sync returns one of these errors; errors.As finds them through %w.
type syncOutcome struct {
	err error
	// giveUp drops the key without retry.
	giveUp bool
	// delay > 0 requeues after it instead of with backoff.
	delay time.Duration
	// serverDelay takes the delay from the error's Retry-After, if any.
	serverDelay bool
	// quiet logs at V(4) instead of as an error: expected conflicts.
	quiet bool
	// keepBackoff leaves the key's failure count alone when delaying.
	keepBackoff bool
}

func (o *syncOutcome) Error() string {
	if o.err == nil {
		return fmt.Sprintf("requeue after %s", o.delay)
	}
	return o.err.Error()
}

func (o *syncOutcome) Unwrap() error { return o.err }

// RetryAfter requeues the key after delay, without backoff and without
// counting a failure. err may be nil when waiting is the expected outcome
// (say, content still being deleted); a non-nil err is logged and shown as
// the controller's last error.
func RetryAfter(delay time.Duration, err error) error {
	return &syncOutcome{err: err, delay: delay}
}

// RequeueAfter queues the key again after delay, like RetryAfter(delay,
// nil), but leaves the key's failure count as it is: for controllers that
// check back later without that counting as success (upstream's bare
// AddAfter), so the next failure backs off from where it was.
func RequeueAfter(delay time.Duration) error {
	return &syncOutcome{delay: delay, keepBackoff: true}
}

// RetryAfterServerDelay retries after the delay the apiserver asked for
// (Retry-After of a 429 or 5xx, see apierrors.SuggestsClientDelay), and with
// backoff when it asked for none.
func RetryAfterServerDelay(err error) error {
	if err == nil {
		return nil
	}
	return &syncOutcome{err: err, serverDelay: true}
}

// GiveUp drops the key without retry; err is logged. The next event for
// the key queues it again.
func GiveUp(err error) error {
	if err == nil {
		return nil
	}
	return &syncOutcome{err: err, giveUp: true}
}

// Quietly retries with backoff like a plain error but logs at V(4): for
// expected failures such as update conflicts. It keeps the outcome of an
// error made by the functions above.
func Quietly(err error) error {
	if err == nil {
		return nil
	}
	var o *syncOutcome
	if errors.As(err, &o) {
		q := *o
		q.quiet = true
		return &q
	}
	return &syncOutcome{err: err, quiet: true}
}

// outcomeOf decodes a sync's error: ok=false means a plain error.
func outcomeOf(err error) (syncOutcome, bool) {
	var o *syncOutcome
	if !errors.As(err, &o) {
		return syncOutcome{}, false
	}
	out := *o
	if out.serverDelay {
		if secs, ok := apierrors.SuggestsClientDelay(out.err); ok && secs > 0 {
			out.delay = time.Duration(secs) * time.Second
		}
	}
	return out, true
}

// Untombstone returns the last known object a DeletedFinalStateUnknown
// carries, or obj itself: delete handlers get either.
func Untombstone(obj interface{}) interface{} {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// FromTombstone is Untombstone with the type assertion delete handlers
// make next; ok is false when the object is not a T.
func FromTombstone[T any](obj interface{}) (T, bool) {
	t, ok := Untombstone(obj).(T)
	return t, ok
}

// ObjectFromEvent is FromTombstone for event handlers, which report an
// object of any other type (nil aside) as an error.
func ObjectFromEvent[T any](obj interface{}) (T, bool) {
	t, ok := FromTombstone[T](obj)
	if !ok && obj != nil {
		utilruntime.HandleError(fmt.Errorf("unexpected object in an event handler: %#v", obj))
	}
	return t, ok
}
