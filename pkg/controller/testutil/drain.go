package testutil

// Queue is the part of a client-go typed workqueue Drain needs, so it takes
// plain, delaying and rate-limiting queues alike.
type Queue[T comparable] interface {
	Len() int
	Get() (T, bool)
	Done(T)
}

// Drain takes every item ready in q (not the delayed ones), in queue
// order, marking each done, and forgotten when q rate-limits, so a test
// can assert what a handler enqueued without running the worker.
func Drain[T comparable](q Queue[T]) []T {
	var out []T
	forget, _ := q.(interface{ Forget(T) })
	for q.Len() > 0 {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		q.Done(item)
		if forget != nil {
			forget.Forget(item)
		}
		out = append(out, item)
	}
	return out
}
