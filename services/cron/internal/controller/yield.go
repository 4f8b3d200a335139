package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// A worker waiting on the executor is held from every namespace's CronJobs.
// When the executor is slow for one namespace's Jobs (its lane of the
// executor's API budget full, a slow admission webhook on its Jobs), that
// namespace's due CronJobs would take every worker for up to
// executorCallTimeout each, and another namespace's run would wait for them,
// the fair queue notwithstanding. So a worker's call to the executor is
// given up (cancelled) once it has lasted yieldAfterHeld while every worker
// is busy and the namespace whose turn is next holds at least two workers
// fewer than the call's. A namespace's last worker never gives up, so each
// namespace keeps going however slow the executor is for all. One call is
// given up at a time, until its worker is free again.
//
// A call given up is what a call past executorCallTimeout already was: the
// sync stops handing runs over, writes what it did, and its key is queued
// again at once, behind the waiting namespace. A Job the executor created
// meanwhile is found as the run's at the next sync (createRun), so the run
// is still delivered once.

// yieldAfterHeld is how long a call to the executor lasts before it may be
// given up: a call the executor answers at once never is.
const yieldAfterHeld = time.Second

// yieldCheckEvery is how often the calls in flight are looked at.
const yieldCheckEvery = 100 * time.Millisecond

// errYielded: the sync's call to the executor was given up for another
// namespace's CronJob.
var errYielded = errors.New("gave the worker up to another namespace's CronJob; queued again")

// seat is a worker's hold on a CronJob of namespace; call is its call to
// the executor in flight, if any.
type seat struct {
	namespace string
	call      *executorCall
	givenUp   bool
}

type executorCall struct {
	started time.Time
	cancel  context.CancelCauseFunc
}

// seats are the workers' holds, and decide which call is given up.
type seats struct {
	clock   clock.PassiveClock
	order   *fairorder.Order
	workers int

	mu   sync.Mutex
	held map[*seat]struct{}
	// byNamespace counts the seats held by namespace.
	byNamespace map[string]int
	// givingUp: a call was given up and its worker is not free yet.
	givingUp bool
}

func newSeats(clk clock.PassiveClock, order *fairorder.Order) *seats {
	return &seats{clock: clk, order: order, held: map[*seat]struct{}{}, byNamespace: map[string]int{}}
}

// setWorkers says how many workers there are.
func (s *seats) setWorkers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers = n
}

type seatKey struct{}

// take holds a seat for a worker's sync of key; the context carries it to
// the sync's calls to the executor.
func (s *seats) take(ctx context.Context, key string) (context.Context, *seat) {
	st := &seat{namespace: fairorder.NamespaceOf(key)}
	s.mu.Lock()
	s.held[st] = struct{}{}
	s.byNamespace[st.namespace]++
	s.mu.Unlock()
	return context.WithValue(ctx, seatKey{}, st), st
}

// release frees a worker's seat.
func (s *seats) release(st *seat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, st)
	if s.byNamespace[st.namespace]--; s.byNamespace[st.namespace] == 0 {
		delete(s.byNamespace, st.namespace)
	}
	if st.givenUp {
		s.givingUp = false
	}
}

// callExecutor bounds a call to the executor by executorCallTimeout and,
// made by a worker's sync, lets it be given up. done ends the call's hold;
// the call's error is then read through callError.
func (s *seats) callExecutor(ctx context.Context) (call context.Context, done func()) {
	call, cancel := context.WithCancelCause(ctx)
	call, cancelTimeout := context.WithTimeout(call, executorCallTimeout)
	st, ok := ctx.Value(seatKey{}).(*seat)
	if !ok {
		return call, func() { cancelTimeout(); cancel(nil) }
	}
	s.mu.Lock()
	st.call = &executorCall{started: s.clock.Now(), cancel: cancel}
	s.mu.Unlock()
	return call, func() {
		s.mu.Lock()
		st.call = nil
		s.mu.Unlock()
		cancelTimeout()
		cancel(nil)
	}
}

// callError is the error of a call made with call: errYielded when it was
// given up.
func callError(call context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(call), errYielded) {
		return errYielded
	}
	return err
}

// giveUpACall gives up at most one call, when every worker is busy and the
// namespace whose turn is next holds at least two workers fewer than the
// call's: of such calls, lasting yieldAfterHeld or more, the youngest of the
// namespace holding the most workers (the one whose work done is least
// lost: the executor made it in vain). The worker goes to the next
// namespace, and holds come closer without ever crossing, so no two
// namespaces take the same worker back and forth. It says which call it
// gave up, if any.
func (s *seats) giveUpACall() *givenUp {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.givingUp || len(s.held) < s.workers {
		return nil
	}
	next := s.order.Next()
	if next == "" {
		return nil
	}
	now := s.clock.Now()
	var chosen *seat
	for st := range s.held {
		holds := s.byNamespace[st.namespace]
		if st.call == nil || now.Sub(st.call.started) < yieldAfterHeld || holds < s.byNamespace[next]+2 {
			continue
		}
		if chosen == nil || holds > s.byNamespace[chosen.namespace] ||
			holds == s.byNamespace[chosen.namespace] && st.call.started.After(chosen.call.started) {
			chosen = st
		}
	}
	if chosen == nil {
		return nil
	}
	chosen.call.cancel(errYielded)
	chosen.givenUp = true
	s.givingUp = true
	return &givenUp{namespace: chosen.namespace, lasted: now.Sub(chosen.call.started), to: next}
}

// givenUp is a call given up: its namespace's, after lasting lasted, for
// namespace to.
type givenUp struct {
	namespace, to string
	lasted        time.Duration
}

// run looks at the calls in flight every yieldCheckEvery until ctx ends.
func (s *seats) run(ctx context.Context, clk clock.WithTicker, yielded func(*givenUp)) {
	ticker := clk.NewTicker(yieldCheckEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			if given := s.giveUpACall(); given != nil {
				yielded(given)
			}
		}
	}
}
