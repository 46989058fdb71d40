package podautoscaler

import (
	"time"

	"k8s.io/client-go/util/workqueue"
)

// fixedIntervalRateLimiter delays every requeue by the same interval: an
// HPA is re-evaluated once per sync period whether or not it failed.
type fixedIntervalRateLimiter struct {
	interval time.Duration
}

var _ workqueue.TypedRateLimiter[string] = fixedIntervalRateLimiter{}

// NewDefaultHPARateLimiter returns the HPA queue's rate limiter: a fixed
// delay of interval (the sync period) for every requeue.
func NewDefaultHPARateLimiter(interval time.Duration) workqueue.TypedRateLimiter[string] {
	return fixedIntervalRateLimiter{interval: interval}
}

func (r fixedIntervalRateLimiter) When(string) time.Duration { return r.interval }

// NumRequeues is constant: there is no backoff to count.
func (r fixedIntervalRateLimiter) NumRequeues(string) int { return 1 }

func (r fixedIntervalRateLimiter) Forget(string) {}
