// Package fairevents writes a controller's events in turns by the namespace
// of their objects.
//
// client-go's broadcaster (the reference's) writes events one at a time,
// first come first served, from one queue of 1,000: a namespace whose Jobs
// record thousands of events delays every other namespace's by as many
// writes and, once the queue is full, has theirs dropped. Sink is the
// broadcaster's sink: it only queues each write in its namespace's queue, so
// the broadcaster never waits and events are correlated (aggregation, spam
// filter) as client-go's broadcaster does (correlate.go), and one writer
// sends the queued writes one namespace at a time in turn. A namespace's burst fills its own queue and
// drops its own events. A write that fails in transport stays first in its
// queue and every write pauses, as client-go's writer does: the API server
// is away for all namespaces alike.
package fairevents

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Client-go's, for the same behaviour when the API server is away.
const (
	// PerNamespace is how many writes one namespace may have queued: as
	// many events as client-go's broadcaster holds (1,000 in its queue and
	// 1,000 in its sink's), so that a burst of one namespace alone loses
	// no more than there.
	PerNamespace = 2000
	// maxTries and retryAfter: a write failing in transport is tried again
	// after a pause, at most this many times in all.
	maxTries   = 12
	retryAfter = 10 * time.Second
)

// Total is how many writes all namespaces together may have queued: past it,
// the longest queue gives up its newest write.
const Total = 10 * PerNamespace

type verb int

const (
	create verb = iota
	update
	patch
)

// write is one request for the API server, as the broadcaster asked for it.
type write struct {
	verb  verb
	event *corev1.Event
	patch []byte
}

// queue is one namespace's writes, oldest first.
type queue struct {
	writes []write
	// tries of the first write so far.
	tries int
	// place is the namespace's in the turns.
	place *list.Element
}

// Sink queues the broadcaster's writes by namespace; Run sends them.
type Sink struct {
	next  record.EventSink
	clock clock.WithTicker
	log   *slog.Logger

	mu     sync.Mutex
	queues map[string]*queue
	// turns is the namespaces with writes queued, in the order of their
	// turns, a ring; turn is the next one's place (nil when none). A list,
	// so that a namespace leaves it without a look at every other.
	turns  *list.List
	turn   *list.Element
	queued int
	// long are the namespaces with n ≥ 2 writes queued, by n (the first
	// write may be in flight, so only these can give one up), and longest
	// the largest such n, or less than 2: when all queues together are
	// full, the longest is found without a look at every namespace.
	long    [PerNamespace + 1]map[string]struct{}
	longest int
	// pausedUntil: after a write failed in transport, none is sent before.
	pausedUntil time.Time
	wake        chan struct{}

	// dropped counts the writes dropped because their namespace's queue,
	// or all queues together, were full.
	dropped prometheus.Counter
}

var _ record.EventSink = (*Sink)(nil)

// New returns a sink sending, once Run runs, to next; it logs the writes it
// gives up to log and counts those it drops in dropped.
func New(next record.EventSink, clk clock.WithTicker, log *slog.Logger, dropped prometheus.Counter) *Sink {
	return &Sink{next: next, clock: clk, log: log, dropped: dropped, queues: map[string]*queue{}, turns: list.New(), wake: make(chan struct{}, 1)}
}

// Start records broadcaster's events to next through a Sink, whose writer
// runs until stop, which shuts the broadcaster down first. Events are
// correlated as client-go's broadcaster does, but cheaper (correlate.go).
func Start(ctx context.Context, broadcaster record.EventBroadcaster, next record.EventSink, clk clock.WithTicker, log *slog.Logger, dropped prometheus.Counter) (stop func()) {
	sink := New(next, clk, log, dropped)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink.Run(ctx)
	}()
	// As broadcaster.StartRecordingToSink(sink), with the defaults of a
	// broadcaster built without options.
	broadcaster.StartEventWatcher(newCorrelator(record.CorrelatorOptions{}).recordTo(sink, func(err error) {
		log.Error("recording an event", "err", err)
	}))
	return func() {
		broadcaster.Shutdown()
		cancel()
		<-done
	}
}

// Create queues the event's creation and returns it as the API server would:
// the broadcaster's correlator keeps it to patch it when the same event
// comes again (its name is the recorder's).
func (s *Sink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.add(write{verb: create, event: e.DeepCopy()})
	return e, nil
}

// Update queues the event's update.
func (s *Sink) Update(e *corev1.Event) (*corev1.Event, error) {
	s.add(write{verb: update, event: e.DeepCopy()})
	return e, nil
}

// Patch queues the event's patch (a count and a time, by the correlator).
func (s *Sink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.add(write{verb: patch, event: e.DeepCopy(), patch: data})
	return e, nil
}

func (s *Sink) add(w write) {
	ns := w.event.Namespace
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[ns]
	if q == nil {
		q = &queue{place: s.turns.PushBack(ns)}
		s.queues[ns] = q
		if s.turn == nil {
			s.turn = q.place
		}
	}
	if len(q.writes) >= PerNamespace || s.queued >= Total && !s.dropNewestOfLongerThan(len(q.writes)) {
		s.dropped.Inc()
		s.forgetIfEmpty(ns)
		return
	}
	q.writes = append(q.writes, w)
	s.queued++
	s.lengthChanged(ns, len(q.writes)-1, len(q.writes))
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dropNewestOfLongerThan drops the newest write of the longest queue, if it
// is longer than n: when all queues together are full, a namespace with
// fewer writes queued takes the place of one with the most.
func (s *Sink) dropNewestOfLongerThan(n int) bool {
	if s.longest <= n || s.longest < 2 {
		return false
	}
	var ns string
	for ns = range s.long[s.longest] {
		break
	}
	q := s.queues[ns]
	q.writes = q.writes[:len(q.writes)-1]
	s.queued--
	s.lengthChanged(ns, len(q.writes)+1, len(q.writes))
	s.dropped.Inc()
	return true
}

// lengthChanged moves namespace ns's queue in the index of long queues from
// length from to length to.
func (s *Sink) lengthChanged(ns string, from, to int) {
	if from >= 2 {
		delete(s.long[from], ns)
	}
	if to >= 2 {
		if s.long[to] == nil {
			s.long[to] = map[string]struct{}{}
		}
		s.long[to][ns] = struct{}{}
		s.longest = max(s.longest, to)
	}
	for s.longest >= 2 && len(s.long[s.longest]) == 0 {
		s.longest--
	}
}

// forgetIfEmpty drops namespace ns's queue once it has no writes.
func (s *Sink) forgetIfEmpty(ns string) {
	q := s.queues[ns]
	if q == nil || len(q.writes) > 0 {
		return
	}
	delete(s.queues, ns)
	if s.turn == q.place {
		s.turn = q.place.Next()
	}
	s.turns.Remove(q.place)
	if s.turn == nil {
		s.turn = s.turns.Front()
	}
}

// Run sends the queued writes, one namespace's at a time in turn, until ctx
// ends; what is still queued then is dropped, as client-go's broadcaster
// drops its queue at shutdown. The next sink's requests should end with ctx
// too (fairlimit.EventSink's Context), or Run waits for the one in flight.
func (s *Sink) Run(ctx context.Context) {
	for ctx.Err() == nil {
		ns, w, wait := s.nextReady()
		if wait < 0 {
			s.send(ns, w)
			continue
		}
		if !s.sleep(ctx, wait) {
			return
		}
	}
}

// sleep waits for a write to come, or for wait when not 0: false when ctx
// ended first.
func (s *Sink) sleep(ctx context.Context, wait time.Duration) bool {
	var rested <-chan time.Time
	if wait > 0 {
		t := s.clock.NewTimer(wait)
		defer t.Stop()
		rested = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.wake:
	case <-rested:
	}
	return true
}

// nextReady is the next namespace's first write, wait < 0; or, with none
// ready, how long until one is (0: until one comes).
func (s *Sink) nextReady() (ns string, w write, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn == nil {
		return "", write{}, 0
	}
	if pause := s.pausedUntil.Sub(s.clock.Now()); pause > 0 {
		return "", write{}, pause
	}
	ns = s.turn.Value.(string)
	if s.turn = s.turn.Next(); s.turn == nil {
		s.turn = s.turns.Front()
	}
	return ns, s.queues[ns].writes[0], -1
}

// send makes namespace ns's first write w and takes it off its queue, unless
// it is to be tried again later.
func (s *Sink) send(ns string, w write) {
	err := s.request(w)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[ns]
	if err != nil && retriable(err) {
		if q.tries++; q.tries < maxTries {
			// The first pause is random, so that clients do not all come
			// back at once when the API server does.
			pause := retryAfter
			if q.tries == 1 {
				pause = time.Duration(rand.Float64() * float64(retryAfter))
			}
			s.pausedUntil = s.clock.Now().Add(pause)
			return
		}
	}
	if err != nil {
		s.logGivenUp(w, err)
	}
	q.writes[0] = write{} // not kept reachable by the slice
	q.writes = q.writes[1:]
	q.tries = 0
	s.queued--
	s.lengthChanged(ns, len(q.writes)+1, len(q.writes))
	s.forgetIfEmpty(ns)
}

// logGivenUp logs a write given up, at client-go's levels: an event of a
// namespace being deleted, or sent twice, is no fault.
func (s *Sink) logGivenUp(w write, err error) {
	level := slog.LevelError
	if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "event not written", "namespace", w.event.Namespace, "event", w.event.Name, "reason", w.event.Reason, "err", err)
}

// request sends w, as client-go's recordEvent: a patch of an event the API
// server no longer has creates it.
func (s *Sink) request(w write) error {
	var err error
	switch w.verb {
	case update:
		_, err = s.next.Update(w.event)
		return err
	case patch:
		if _, err = s.next.Patch(w.event, w.patch); !apierrors.IsNotFound(err) {
			return err
		}
	}
	e := w.event
	e.ResourceVersion = ""
	_, err = s.next.Create(e)
	return err
}

// retriable says whether the write may succeed if tried again: not when the
// API server refused it, nor when the request cannot be built (client-go's
// rule).
func retriable(err error) bool {
	var status *apierrors.StatusError
	var construction *restclient.RequestConstructionError
	return !errors.As(err, &status) && !errors.As(err, &construction)
}
