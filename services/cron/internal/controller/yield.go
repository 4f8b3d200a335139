package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// What the executor did for a call given up is lost, and the slow namespace
// pays it, not the caller next in turn: so that other namespaces' syncs,
// however many, cannot take more than a bounded share of its workers' time,
// a namespace whose call had lasted d is spared for sparedPerLost × d
// afterwards (at most a fifth of one worker's time lost).
//
// The sync given up (it yields its worker) stops handing runs over, writes
// what it did, and its key is queued again at once, behind the waiting
// namespace, without a Failed event or a backoff. A Job the executor created
// for it meanwhile is found as the run's at the next sync (createRun), so
// the run is still made once; that sync then records UnexpectedJob, as the
// reference does when a creation's answer was lost.

// yieldAfterHeld is how long a call to the executor lasts before it may be
// given up: a call the executor answers at once never is.
const yieldAfterHeld = time.Second

// yieldCheckEvery is how often the calls in flight are looked at.
const yieldCheckEvery = 100 * time.Millisecond

// sparedPerLost is how long a namespace's calls are spared, per second its
// call given up had lasted.
const sparedPerLost = 4

// errYielded: the sync's call to the executor was given up for another
// namespace's CronJob.
var errYielded = errors.New("gave the worker up to another namespace's CronJob; queued again")

// seat is a worker's hold on a CronJob of namespace; call is its call to
// the executor in flight, if any.
type seat struct {
	namespace string
	call      *executorCall
	// givenUp: the seat's call was given up; its later calls fail at once.
	givenUp bool
}

// executorCall is a call in flight: when it started, and how to give it up.
type executorCall struct {
	started time.Time
	cancel  context.CancelCauseFunc
}

// seats are the workers' holds, and decide which call is given up.
type seats struct {
	clock   clock.WithTicker
	order   *fairorder.Order
	workers int

	mu   sync.Mutex
	held map[*seat]struct{}
	// byNamespace counts the seats held by namespace.
	byNamespace map[string]int
	// givingUp: a call was given up and its worker is not free yet.
	givingUp bool
	// spared are the namespaces none of whose calls is given up before
	// the time given.
	spared map[string]time.Time
}

func newSeats(clk clock.WithTicker, order *fairorder.Order) *seats {
	return &seats{clock: clk, order: order, held: map[*seat]struct{}{}, byNamespace: map[string]int{}, spared: map[string]time.Time{}}
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
	if st.givenUp {
		cancel(errYielded)
	}
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
// cancelled because it was given up, else its own.
func callError(call context.Context, err error) error {
	if status.Code(err) == codes.Canceled && errors.Is(context.Cause(call), errYielded) {
		return errYielded
	}
	return err
}

// giveUpACall gives up at most one call, when every worker is busy and the
// namespace whose turn is next holds at least two workers fewer than the
// call's: of such calls, lasting yieldAfterHeld or more and not spared, the
// youngest (the least work lost) of the namespace holding the most workers.
// The worker goes to the next namespace, and holds come closer without ever
// crossing, so no two namespaces take the same worker back and forth. It
// says which call it gave up, if any.
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
	s.forgetSpared(now)
	var chosen *seat
	for st := range s.held {
		holds := s.byNamespace[st.namespace]
		if st.call == nil || now.Sub(st.call.started) < yieldAfterHeld || holds < s.byNamespace[next]+2 || now.Before(s.spared[st.namespace]) {
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
	lasted := now.Sub(chosen.call.started)
	chosen.call.cancel(errYielded)
	chosen.givenUp = true
	s.givingUp = true
	s.spared[chosen.namespace] = now.Add(sparedPerLost * lasted)
	return &givenUp{namespace: chosen.namespace, lasted: lasted, to: next}
}

// forgetSpared drops the namespaces spared no longer; s.mu is held.
func (s *seats) forgetSpared(now time.Time) {
	for ns, until := range s.spared {
		if !now.Before(until) {
			delete(s.spared, ns)
		}
	}
}

// givenUp is a call given up, for the log: its namespace's, after lasting
// lasted, for namespace to.
type givenUp struct {
	namespace, to string
	lasted        time.Duration
}

// run looks at the calls in flight every yieldCheckEvery until ctx ends.
func (s *seats) run(ctx context.Context, gaveUp func(*givenUp)) {
	ticker := s.clock.NewTicker(yieldCheckEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			if given := s.giveUpACall(); given != nil {
				gaveUp(given)
			}
		}
	}
}
