package controller

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
)

// A sync that creates hundreds of pods keeps its worker for minutes at a
// modest API budget; with as many such syncs as workers, another
// namespace's Job waits for all of them, the fair queue notwithstanding
// (BENCHMARKS.md, "A tenant whose syncs are long"). Such a sync gives its
// worker up when another namespace has a key waiting: the creations not made
// are left as after a crash, which the reference's protocol survives (their
// expectations are lowered; the next sync plans them again and writes the
// status), and its key is queued again at once, behind the waiting
// namespace. The creations still waiting for a token are given up before
// their request is sent: one cut after it was sent may have created its
// pod, which lowered expectations would let the next sync create again.

// yieldAfter is how many creations a sync makes before it may give its
// worker up, at the next token (the first three slow-start batches, 1 + 2 +
// 4, and one more):
// small syncs keep their single pass, and no extra planner call. At 32, 5
// syncs of 500 creations each made 160 before any gave its worker up, and
// another namespace's Job waited 7 s for one (BENCHMARKS.md).
const yieldAfter = 8

// errYielded: the sync gave its worker up to another namespace's Job.
var errYielded = errors.New("gave the worker up to another namespace's Job; queued again")

type yieldableKey struct{}

// yieldable marks a worker's sync as one that may give its worker up; the
// RPCs' syncs never do (their caller waits for the whole plan).
func yieldable(ctx context.Context) context.Context {
	return context.WithValue(ctx, yieldableKey{}, true)
}

// creationTurns hands a sync's pod creations their tokens and decides when
// the sync gives its worker up.
type creationTurns struct {
	c   *Controller
	key string
	// yieldable says the sync may give its worker up at all.
	yieldable bool
	// taken counts the tokens taken by the sync's creations.
	taken atomic.Int32
}

func (c *Controller) creationTurns(ctx context.Context, key string) *creationTurns {
	return &creationTurns{c: c, key: key, yieldable: ctx.Value(yieldableKey{}) != nil && c.cfg.APIBudget != nil}
}

// admit takes one creation's token while waiting lasts (a batch's context,
// cancelled by giveUp once the sync gives its worker up): the context to
// make the request with, or false when it is not to be made.
func (t *creationTurns) admit(ctx, waiting context.Context, giveUp func()) (context.Context, bool) {
	if !t.yieldable {
		return ctx, true
	}
	if err := t.c.cfg.APIBudget.Wait(waiting); err != nil {
		return nil, false
	}
	if t.taken.Add(1) > yieldAfter && t.c.allWorkersBusy() && t.c.order.WaitingBesides(fairorder.NamespaceOf(t.key)) {
		giveUp()
	}
	return fairlimit.Admitted(ctx), true
}

// allWorkersBusy: a key queued while a worker is idle is taken at once, and
// nobody waits for a worker to be given up.
func (c *Controller) allWorkersBusy() bool { return c.busy.Load() >= c.workers.Load() }
