package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
)

// A sync that creates, deletes or removes the finalizers of hundreds of pods
// keeps its worker for minutes at a modest API budget; with as many such
// syncs as workers, another namespace's Job waits for all of them, the fair
// queue notwithstanding (BENCHMARKS.md, "A tenant whose syncs are long").
// Such a sync gives its worker up when another namespace has a key waiting:
// the pod requests not made are left as after a crash, which the reference's
// protocol survives (their expectations are lowered; the next sync plans
// them again: creations and deletions by the pods it sees, finalizer
// removals by the uncounted pods that still have one, which it counts once
// they are gone; a finishing Job's deletions, which have no expectations,
// skip the pods whose deletion is in flight, and its decision is written
// first), and its key is queued again at once, behind the waiting
// namespace. The requests still waiting for a token are given up before
// they are sent: a creation cut after it was sent may have made its pod,
// which lowered expectations would let the next sync create again.

// yieldAfter is how many pod requests a sync makes before it may give its
// worker up, at the next token (for creations, the first three slow-start
// batches, 1 + 2 + 4, and one more): small syncs keep their single pass, and
// no extra planner call. At 32, 5 syncs of 500 creations each made 160
// before any gave its worker up, and another namespace's Job waited 7 s for
// one (BENCHMARKS.md).
const yieldAfter = 8

// yieldAfterHeld is how long a sync holds its worker before it may give it
// up: each turn given up costs the Job a planner call and a status write
// more, so a namespace that keeps a key queued makes another's long sync pay
// that at most once a second, however large the API budget.
const yieldAfterHeld = time.Second

// errYielded: the sync gave its worker up to another namespace's Job.
var errYielded = errors.New("gave the worker up to another namespace's Job; queued again")

type heldSinceKey struct{}

// yieldable marks a worker's sync, holding its worker since since, as one
// that may give its worker up; the RPCs' syncs never do (their caller waits
// for the whole plan).
func yieldable(ctx context.Context, since time.Time) context.Context {
	return context.WithValue(ctx, heldSinceKey{}, since)
}

// requestTurns hands a sync's pod requests their tokens, counted together
// whatever their action, and decides when the sync gives its worker up.
type requestTurns struct {
	c   *Controller
	key string
	// yieldable says the sync may give its worker up at all, once it has
	// held it since heldSince.
	yieldable bool
	heldSince time.Time
	// taken counts the tokens taken by the sync's pod requests.
	taken atomic.Int32
}

func (c *Controller) requestTurns(ctx context.Context, key string) *requestTurns {
	since, yieldable := ctx.Value(heldSinceKey{}).(time.Time)
	return &requestTurns{c: c, key: key, yieldable: yieldable && c.cfg.APIBudget != nil, heldSince: since}
}

// mayYield says whether the sync, having just taken a token, gives its
// worker up: past its first yieldAfter requests and yieldAfterHeld, while
// every worker is busy and another namespace's key waits.
func (t *requestTurns) mayYield() bool {
	return t.taken.Add(1) > yieldAfter && t.c.cfg.Clock.Since(t.heldSince) >= yieldAfterHeld &&
		t.c.allWorkersBusy() && t.c.order.WaitingBesides(fairorder.NamespaceOf(t.key))
}

// allWorkersBusy: a key queued while a worker is idle is taken at once, and
// nobody waits for a worker to be given up.
func (c *Controller) allWorkersBusy() bool { return c.busy.Load() >= c.workers.Load() }

// round is one set of pod requests made in parallel: admit gives each its
// token, and the round remembers what was not made.
type round struct {
	turns *requestTurns
	// ctx is the sync's; waiting, the round's own, ends when the sync gives
	// its worker up (or at the round's end).
	ctx, waiting context.Context
	giveUp       context.CancelFunc
	notMade      atomic.Int32
}

// round starts a round of requests that the sync may give up.
func (t *requestTurns) round(ctx context.Context) *round {
	waiting, giveUp := context.WithCancel(ctx)
	return &round{turns: t, ctx: ctx, waiting: waiting, giveUp: giveUp}
}

// admit takes one request's token while the round's waiting lasts: the
// context to make the request with, or false when it is not to be made
// (counted as not made). Its token taken, a request is sent as admitted,
// so the client does not wait for another.
func (r *round) admit() (context.Context, bool) {
	t := r.turns
	if !t.yieldable {
		return r.ctx, true
	}
	if err := t.c.cfg.APIBudget.Wait(r.waiting); err != nil {
		r.notMade.Add(1)
		return nil, false
	}
	if t.mayYield() {
		r.giveUp()
	}
	return fairlimit.Admitted(r.ctx), true
}

// end closes the round, once its requests have returned: whether the sync
// gave its worker up with something left (laterRounds: requests of rounds
// after this one).
func (r *round) end(laterRounds bool) (yielded bool) {
	yielded = r.waiting.Err() != nil && r.ctx.Err() == nil && (r.notMade.Load() > 0 || laterRounds)
	r.giveUp()
	return yielded
}

// requestsEnded is how a sync's pod requests ended: errYielded when it gave
// its worker up and none was refused (a refusal is retried with backoff, as
// the reference's); the sync's context's error when some were not made
// because it ended; else what the requests failed with.
func requestsEnded(ctx context.Context, yielded bool, notMade int, errs *errorList) error {
	switch {
	case errs.len() > 0:
		return errs.err()
	case yielded:
		return errYielded
	case notMade > 0 && ctx.Err() != nil:
		return ctx.Err()
	case notMade > 0: // not made, yet neither given up nor ended: a bug
		return fmt.Errorf("internal error: %d pod requests not made", notMade)
	}
	return nil
}
