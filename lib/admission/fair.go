package admission

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fairSemaphore is a counting semaphore whose waiters queue per flow and are
// served in turn across flows (round robin, one grant per turn), strictly in
// order within a flow. A grant that does not fit blocks the ones after it
// (no overtaking), so a large request is never starved by small ones; the
// queue wait bound keeps that blocking short.
type fairSemaphore struct {
	capacity    int64
	queueLength int
	// waiting counts the waiters queued.
	waiting prometheus.Gauge

	mu    sync.Mutex
	used  int64
	flows map[string]*flowQueue
	// ring is the order in which flows with waiters are served.
	ring []*flowQueue
}

type flowQueue struct {
	name    string
	waiters []*waiter
}

type waiter struct {
	n       int64
	granted chan struct{}
}

// Why a request was not granted.
var (
	errTooLarge  = errors.New("larger than the whole budget")
	errQueueFull = errors.New("the caller's queue is full")
	errTimedOut  = errors.New("waited in the queue for the longest allowed")
)

func newFairSemaphore(capacity int64, queueLength int, waiting prometheus.Gauge) *fairSemaphore {
	return &fairSemaphore{capacity: capacity, queueLength: queueLength, waiting: waiting, flows: map[string]*flowQueue{}}
}

// acquire takes n units for flow, waiting in flow's queue at most maxWait.
// It returns how long it waited.
func (s *fairSemaphore) acquire(ctx context.Context, flow string, n int64, maxWait time.Duration) (time.Duration, error) {
	if n > s.capacity {
		return 0, errTooLarge
	}
	s.mu.Lock()
	if s.used+n <= s.capacity && len(s.ring) == 0 {
		s.used += n
		s.mu.Unlock()
		return 0, nil
	}
	f := s.flows[flow]
	if f == nil {
		f = &flowQueue{name: flow}
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
		s.ring = append(s.ring, f)
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
		if len(f.waiters) == 0 {
			s.dropFromRing(f)
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

// dispatch grants waiters in turn while the next one fits. Callers hold mu.
func (s *fairSemaphore) dispatch() {
	for len(s.ring) > 0 {
		f := s.ring[0]
		w := f.waiters[0]
		if s.used+w.n > s.capacity {
			return
		}
		s.used += w.n
		close(w.granted)
		s.waiting.Dec()
		f.waiters = f.waiters[1:]
		s.ring = s.ring[1:]
		if len(f.waiters) > 0 {
			s.ring = append(s.ring, f)
		} else {
			delete(s.flows, f.name)
		}
	}
}

func (s *fairSemaphore) dropFromRing(f *flowQueue) {
	for i, x := range s.ring {
		if x == f {
			s.ring = append(s.ring[:i], s.ring[i+1:]...)
			break
		}
	}
	delete(s.flows, f.name)
}

// inUse is the units granted and not released.
func (s *fairSemaphore) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
