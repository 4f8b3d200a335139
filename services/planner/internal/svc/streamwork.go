package svc

import (
	"sync"
)

// streamWork runs a stream's requests, those of one Job in the order they
// came, those of different Jobs at once, up to a bound: a Job's large
// snapshot then delays no other Job's plan on the stream.
type streamWork struct {
	// pending bounds the requests received and not yet answered; taken
	// before a request is received.
	pending chan struct{}

	mu sync.Mutex
	// queued are, per Job with a request running, the requests waiting
	// behind it.
	queued map[string][]func()
	// running are the Jobs' drains, for wait.
	running sync.WaitGroup
}

func newStreamWork(concurrency int) *streamWork {
	return &streamWork{pending: make(chan struct{}, max(concurrency, 1)), queued: map[string][]func(){}}
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
	w.mu.Unlock()
	w.running.Add(1)
	go w.drain(job, work)
}

// drain runs work, then the Job's requests queued behind it.
func (w *streamWork) drain(job string, work func()) {
	defer w.running.Done()
	for {
		work()
		w.unreserve()
		w.mu.Lock()
		queue := w.queued[job]
		if len(queue) == 0 {
			delete(w.queued, job)
			w.mu.Unlock()
			return
		}
		work, w.queued[job] = queue[0], queue[1:]
		w.mu.Unlock()
	}
}

// wait waits until every request run is answered.
func (w *streamWork) wait() { w.running.Wait() }
