package svc

import (
	"sync"
	"sync/atomic"
)

// streamWork runs a stream's requests, those of one Job in the order they
// came, those of different Jobs at once, up to a bound: a Job's large
// snapshot then delays no other Job's plan on the stream.
//
// A Job's requests are drained by a worker, which then waits for another
// Job's: a worker keeps the stack its decoding grew, where a goroutine of
// each request grew a new one, copying it several times (a tenth of the
// planner's CPU on small syncs).
type streamWork struct {
	// pending bounds the requests received and not yet answered; taken
	// before a request is received.
	pending chan struct{}

	mu sync.Mutex
	// queued are, per Job with a request running, the requests waiting
	// behind it.
	queued map[string][]func()
	// idle counts the workers waiting for a drain. A worker is counted idle
	// before it gives back its request's room, so that a worker busy holds
	// room: there are never more workers than the bound.
	idle int
	// running are the Jobs' drains, for wait.
	running sync.WaitGroup

	// handoff gives a drain to an idle worker; it holds the bound, so that
	// it never blocks.
	handoff chan jobWork
	// stopped ends the idle workers (close).
	stopped chan struct{}
	// workers counts the workers started, for tests.
	workers atomic.Int32
}

// jobWork is a request's work and its Job.
type jobWork struct {
	job  string
	work func()
}

func newStreamWork(concurrency int) *streamWork {
	bound := max(concurrency, 1)
	return &streamWork{pending: make(chan struct{}, bound), queued: map[string][]func(){},
		handoff: make(chan jobWork, bound), stopped: make(chan struct{})}
}

// reserve waits for room for one more request; the request's work, or
// unreserve, gives it back.
func (w *streamWork) reserve() { w.pending <- struct{}{} }

func (w *streamWork) unreserve() { <-w.pending }

// run runs work, the answer of a request reserved, after the Job's
// requests before it.
func (w *streamWork) run(job string, work func()) {
	w.mu.Lock()
	if queue, busy := w.queued[job]; busy {
		w.queued[job] = append(queue, work)
		w.mu.Unlock()
		return
	}
	w.queued[job] = nil
	w.running.Add(1)
	reuse := w.idle > 0
	if reuse {
		w.idle--
	}
	w.mu.Unlock()
	if reuse {
		w.handoff <- jobWork{job, work}
		return
	}
	w.workers.Add(1)
	go w.worker(jobWork{job, work})
}

// worker drains first's Job, then the Jobs handed to it, until the stream
// ends.
func (w *streamWork) worker(first jobWork) {
	for next := first; ; {
		w.drain(next.job, next.work)
		select {
		case next = <-w.handoff:
		case <-w.stopped:
			return
		}
	}
}

// drain runs work, then the Job's requests queued behind it.
func (w *streamWork) drain(job string, work func()) {
	defer w.running.Done()
	for {
		work()
		w.mu.Lock()
		queue := w.queued[job]
		if len(queue) == 0 {
			delete(w.queued, job)
			w.idle++
			w.mu.Unlock()
			w.unreserve()
			return
		}
		work, w.queued[job] = queue[0], queue[1:]
		w.mu.Unlock()
		w.unreserve()
	}
}

// wait waits until every request run is answered.
func (w *streamWork) wait() { w.running.Wait() }

// close waits until every request run is answered and ends the workers;
// nothing runs after it.
func (w *streamWork) close() {
	w.wait()
	close(w.stopped)
}
