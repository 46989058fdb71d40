package controller

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	recordutil "k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
)

// NewEventRecorder returns a broadcaster and a recorder whose events carry
// component (e.g. "replicaset-controller") as their source. Nothing is sent
// until StartEventSink is called, normally at the top of Run.
func NewEventRecorder(ctx context.Context, component string) (record.EventBroadcaster, record.EventRecorder) {
	b := record.NewBroadcaster(record.WithContext(ctx))
	return b, b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}

// eventNamespaces, once set, shows which namespaces are being deleted.
var eventNamespaces atomic.Pointer[corelisters.NamespaceLister]

// SetEventNamespaceLister makes every event sink started by StartEventSink
// drop new events in namespaces being deleted: the API server refuses them
// (403) anyway, and controllers' events often trail their work into a
// namespace's deletion.
func SetEventNamespaceLister(l corelisters.NamespaceLister) {
	eventNamespaces.Store(&l)
}

func inTerminatingNamespace(e *v1.Event) bool {
	l := eventNamespaces.Load()
	return l != nil && NamespaceTerminating(*l, e.Namespace)
}

const (
	// eventWriters is how many writes of one sink are in flight at once.
	// client-go's sink has one, and at about 20 writes a second on a busy
	// API server a burst of a few thousand events overflows the
	// broadcaster's 1,000-event queue, which then drops them. Two deliver
	// nearly as many of ours' denser bursts as upstream does of its slower
	// ones (7 in 10 against 8 at 1,000 pods); four delivered all, but each
	// event costs the API server about a pod write, and at 5,000 pods that
	// slowed converging by half.
	eventWriters = 2
	// eventQueueDepth bounds each writer's backlog (memory). A full queue
	// holds the broadcaster's goroutine back, so its own queue fills and it
	// drops new events, as with client-go's sink, only later.
	eventQueueDepth = 1024
	// eventMaxTries and eventRetryDelay are client-go's retry policy for an
	// event whose write failed for want of a server.
	eventMaxTries   = 12
	eventRetryDelay = 10 * time.Second
)

// StartEventSink logs events at V(3) and writes them to the API server as
// core/v1 Events, as upstream controllers do. Call the returned func (from a
// defer in Run) to stop.
func StartEventSink(b record.EventBroadcaster, client clientset.Interface) (stop func()) {
	return startEventSink(b, client.CoreV1().Events(""))
}

func startEventSink(b record.EventBroadcaster, events typedcorev1.EventInterface) (stop func()) {
	b.StartStructuredLogging(3)
	sink := newQueuedEventSink(events, eventWriters, eventQueueDepth, eventRetryDelay)
	b.StartRecordingToSink(sink)
	return func() {
		b.Shutdown()
		sink.stop()
	}
}

// eventWrite is a create (patch nil) or a count patch of its event, a copy
// of the recorder's.
type eventWrite struct {
	event v1.Event
	patch []byte
}

// queuedEventSink hands the broadcaster's writes to a few writers, so the
// broadcaster's single goroutine only correlates and queues. Writes for one
// involved object go to the same writer in the order given, so an event's
// create precedes the patches counting its repeats. Create and Patch answer
// at once as if written: the correlator only needs the event's name, which
// the recorder chose, and a patch whose create was lost is sent as a create,
// as client-go does.
type queuedEventSink struct {
	events     typedcorev1.EventInterface
	queues     []chan *eventWrite
	retryDelay time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newQueuedEventSink(events typedcorev1.EventInterface, writers, depth int, retryDelay time.Duration) *queuedEventSink {
	ctx, cancel := context.WithCancel(context.Background())
	s := &queuedEventSink{events: events, retryDelay: retryDelay, ctx: ctx, cancel: cancel}
	for range writers {
		// Pointers: an idle queue's buffer costs 8 bytes a slot.
		q := make(chan *eventWrite, depth)
		s.queues = append(s.queues, q)
		s.wg.Go(func() { s.drain(q) })
	}
	return s
}

// stop abandons queued writes, as client-go does when its broadcaster
// shuts down, and waits for the writers to return.
func (s *queuedEventSink) stop() {
	s.cancel()
	s.wg.Wait()
}

func (s *queuedEventSink) Create(e *v1.Event) (*v1.Event, error) {
	if inTerminatingNamespace(e) {
		return e, nil
	}
	s.enqueue(e, nil)
	return e, nil
}

func (s *queuedEventSink) Patch(e *v1.Event, patch []byte) (*v1.Event, error) {
	s.enqueue(e, patch)
	return e, nil
}

// Update is part of record.EventSink; the recorder does not call it.
func (s *queuedEventSink) Update(e *v1.Event) (*v1.Event, error) {
	return s.events.UpdateWithEventNamespaceWithContext(s.ctx, e)
}

func (s *queuedEventSink) enqueue(e *v1.Event, patch []byte) {
	// The recorder made this event for this sink alone and does not change
	// it after handing it over; a shallow copy keeps the writer's apart
	// from the correlator's anyway.
	w := &eventWrite{event: *e, patch: patch}
	select {
	case s.queues[s.writerFor(&w.event)] <- w:
	case <-s.ctx.Done():
	}
}

func (s *queuedEventSink) writerFor(e *v1.Event) int {
	h := fnv.New32a()
	o := e.InvolvedObject
	for _, part := range []string{o.Namespace, o.Kind, o.Name, string(o.UID)} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0})
	}
	// FNV's low bits barely mix; scale by its high bits instead.
	return int(uint64(h.Sum32()) * uint64(len(s.queues)) >> 32)
}

func (s *queuedEventSink) drain(q chan *eventWrite) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case w := <-q:
			s.write(w)
		}
	}
}

// write sends w, retrying while the server cannot be reached with
// client-go's schedule: a random first delay, then a fixed one.
func (s *queuedEventSink) write(w *eventWrite) {
	logger := klog.FromContext(s.ctx)
	for tries := 1; ; tries++ {
		err := s.send(w)
		if !retryable(err) {
			if err != nil {
				if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
					logger.V(5).Info("Server rejected event (will not retry!)", "event", &w.event, "err", err)
				} else {
					logger.Error(err, "Server rejected event (will not retry!)", "event", &w.event)
				}
			}
			return
		}
		if tries >= eventMaxTries {
			logger.Error(err, "Unable to write event (retry limit exceeded!)", "event", &w.event)
			return
		}
		delay := s.retryDelay
		if tries == 1 {
			delay = time.Duration(rand.Float64() * float64(delay))
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

func (s *queuedEventSink) send(w *eventWrite) error {
	if w.patch != nil {
		_, err := s.events.PatchWithEventNamespaceWithContext(s.ctx, &w.event, w.patch)
		if !recordutil.IsKeyNotFoundError(err) {
			return err
		}
	}
	if inTerminatingNamespace(&w.event) {
		return nil
	}
	w.event.ResourceVersion = ""
	_, err := s.events.CreateWithEventNamespaceWithContext(s.ctx, &w.event)
	return err
}

// retryable reports whether a failed write may succeed later: the server
// answered nothing usable. A refusal or a malformed request is final.
func retryable(err error) bool {
	switch err.(type) {
	case nil, *apierrors.StatusError, *restclient.RequestConstructionError:
		return false
	}
	return true
}
