// Package testutil holds helpers shared by the controllers' unit tests.
package testutil

import (
	"sort"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// QueueNames records the names of the workqueues created with metrics, so
// a test can check a controller names its queues as upstream does (the
// names are the workqueue_* metrics' label).
type QueueNames struct {
	mu    sync.Mutex
	names map[string]bool
}

var (
	recorderOnce sync.Once
	recorder     = &QueueNames{names: map[string]bool{}}
)

// RecordQueueNames makes the process-wide recorder the workqueue metrics
// provider (client-go takes one provider per process) and returns it.
func RecordQueueNames() *QueueNames {
	recorderOnce.Do(func() { workqueue.SetProvider(recorder) })
	return recorder
}

// Has reports whether a queue named name was created.
func (q *QueueNames) Has(name string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.names[name]
}

// Names lists the queues created so far.
func (q *QueueNames) Names() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.names))
	for n := range q.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (q *QueueNames) NewDepthMetric(name string) workqueue.GaugeMetric {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.names[name] = true
	return noopMetric{}
}
func (q *QueueNames) NewAddsMetric(string) workqueue.CounterMetric           { return noopMetric{} }
func (q *QueueNames) NewLatencyMetric(string) workqueue.HistogramMetric      { return noopMetric{} }
func (q *QueueNames) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noopMetric{} }
func (q *QueueNames) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noopMetric{}
}
func (q *QueueNames) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noopMetric{}
}
func (q *QueueNames) NewRetriesMetric(string) workqueue.CounterMetric { return noopMetric{} }

type noopMetric struct{}

func (noopMetric) Inc()            {}
func (noopMetric) Dec()            {}
func (noopMetric) Set(float64)     {}
func (noopMetric) Observe(float64) {}
