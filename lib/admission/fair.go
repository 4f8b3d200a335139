package admission

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fairSemaphore is a counting semaphore whose waiters queue per flow and are
// served fairly across flows, strictly in order within a flow: start-time
// fair queuing, in the manner of the API server's Priority and Fairness.
// Each flow with waiters has a virtual start, and the flow with the
// earliest is served next (ties in the order the starts were given); a
// grant of n units moves its flow's start on by n. A flow that arrives
// starts at the virtual time of the last grant, or where its own last grant
// ended when that is later: a caller arriving at another's backlog is
// served at the next grant, not after another of the backlog's, and callers
// that come and go cannot starve one that waits. A grant that does not fit
// blocks the ones after it (no overtaking), so a large request is never
// starved by small ones; the queue wait bound keeps that blocking short.
type fairSemaphore struct {
	capacity    int64
	queueLength int
	// waiting counts the waiters queued.
	waiting prometheus.Gauge

	mu   sync.Mutex
	used int64
	// flows are the flows with waiters, and those without whose last
	// grant ends after now (forgotten once nothing waits).
	flows map[string]*flowQueue
	// ready are the flows with waiters, earliest start first.
	ready flowHeap
	// now is the virtual time: the start of the last grant.
	now int64
	// order numbers the starts given, to break ties.
	order uint64
	// sweepAt is the size of flows at which those without waiters are
	// next swept.
	sweepAt int
}

type flowQueue struct {
	name    string
	waiters []*waiter
	// start is the virtual time of its head waiter's turn, order when it
	// was given; finish is where its last grant ended.
	start, finish int64
	order         uint64
	// index is its place in ready; -1 when it has no waiters.
	index int
}

type waiter struct {
	n       int64
	granted chan struct{}
}

// flowHeap orders flows by start, then by when the start was given
// (container/heap).
type flowHeap []*flowQueue

func (h flowHeap) Len() int { return len(h) }
func (h flowHeap) Less(i, j int) bool {
	if h[i].start != h[j].start {
		return h[i].start < h[j].start
	}
	return h[i].order < h[j].order
}
func (h flowHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *flowHeap) Push(x any) {
	f := x.(*flowQueue)
	f.index = len(*h)
	*h = append(*h, f)
}
func (h *flowHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	f.index = -1
	*h = old[:len(old)-1]
	return f
}

// Why a request was not granted.
var (
	errTooLarge  = errors.New("larger than the whole budget")
	errQueueFull = errors.New("the caller's queue is full")
	errTimedOut  = errors.New("waited in the queue for the longest allowed")
)

func newFairSemaphore(capacity int64, queueLength int, waiting prometheus.Gauge) *fairSemaphore {
	return &fairSemaphore{capacity: capacity, queueLength: queueLength, waiting: waiting, flows: map[string]*flowQueue{}, sweepAt: 64}
}

// acquire takes n units for flow, waiting in flow's queue at most maxWait.
// It returns how long it waited.
func (s *fairSemaphore) acquire(ctx context.Context, flow string, n int64, maxWait time.Duration) (time.Duration, error) {
	if n > s.capacity {
		return 0, errTooLarge
	}
	s.mu.Lock()
	if s.used+n <= s.capacity && len(s.ready) == 0 {
		s.used += n
		s.mu.Unlock()
		return 0, nil
	}
	f := s.flows[flow]
	if f == nil {
		f = &flowQueue{name: flow, index: -1}
		s.flows[flow] = f
	}
	if len(f.waiters) >= s.queueLength {
		s.mu.Unlock()
		return 0, errQueueFull
	}
	w := &waiter{n: n, granted: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	s.waiting.Inc()
	if len(f.waiters) == 1 {
		s.setStart(f, max(s.now, f.finish))
		heap.Push(&s.ready, f)
	}
	s.dispatch()
	s.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(maxWait)
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		return time.Since(start), nil
	case <-timer.C:
		err = errTimedOut
	case <-ctx.Done():
		err = ctx.Err()
	}
	if !s.withdraw(f, w) {
		// Granted meanwhile: give it back.
		s.release(n)
	}
	return time.Since(start), err
}

// withdraw removes w from f's queue; false when it was granted already.
func (s *fairSemaphore) withdraw(f *flowQueue, w *waiter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range f.waiters {
		if x != w {
			continue
		}
		f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
		s.waiting.Dec()
		// The next waiter inherits the start: the one withdrawn had no
		// grant.
		if len(f.waiters) == 0 {
			heap.Remove(&s.ready, f.index)
			s.forget(f)
		}
		// The head may have been what blocked the others.
		s.dispatch()
		return true
	}
	return false
}

func (s *fairSemaphore) release(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used -= n
	s.dispatch()
}

// dispatch grants waiters, earliest start first, while the next one fits.
// Callers hold mu.
func (s *fairSemaphore) dispatch() {
	for len(s.ready) > 0 {
		f := s.ready[0]
		w := f.waiters[0]
		if s.used+w.n > s.capacity {
			return
		}
		s.used += w.n
		close(w.granted)
		s.waiting.Dec()
		s.now, f.finish = f.start, f.start+w.n
		f.waiters = f.waiters[1:]
		if len(f.waiters) > 0 {
			s.setStart(f, f.finish)
			heap.Fix(&s.ready, 0)
			continue
		}
		heap.Pop(&s.ready)
		s.forget(f)
	}
}

// setStart gives f its next start. Callers hold mu.
func (s *fairSemaphore) setStart(f *flowQueue, start int64) {
	s.order++
	f.start, f.order = start, s.order
}

// forget drops f, which has no waiters left, once its last grant no longer
// ends after now; every flow without waiters when none has any. Callers
// hold mu.
func (s *fairSemaphore) forget(f *flowQueue) {
	if len(s.ready) == 0 {
		clear(s.flows)
		return
	}
	if f.finish <= s.now {
		delete(s.flows, f.name)
	}
	// Those kept for their finish are swept each time the map has doubled.
	if len(s.flows) > s.sweepAt {
		for name, g := range s.flows {
			if g.index < 0 && g.finish <= s.now {
				delete(s.flows, name)
			}
		}
		s.sweepAt = 2*len(s.flows) + 64
	}
}

// inUse is the units granted and not released.
func (s *fairSemaphore) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
