// Package fairqueue is the executor's work queue of Jobs: client-go's
// rate-limiting workqueue whose Get hands out keys fairly between namespaces
// (tenants), then first in first out among the Jobs of a namespace. A
// first-in-first-out queue makes a tenant's Job wait behind every Job other
// tenants queued before it, whatever limiter comes after the queue; here it
// waits for a turn or two of each other tenant with work.
//
// Only the order is jobplane's. New builds client-go's own queue (its dirty
// and processing sets, delaying queue, rate limiter and metrics) around an
// Order, through the storage hook client-go offers (workqueue.Queue). So a key
// is queued at most once, a key being processed that is added again is queued
// when Done is called and never handed to two workers at once, AddAfter,
// AddRateLimited, Forget, NumRequeues, ShutDown and ShutDownWithDrain behave
// exactly as in client-go: the same code runs them.
//
// The order is start-time fair queuing (Goyal, Vin and Cheng, SIGCOMM 1996)
// with every turn the same size, as stride scheduling: each namespace with
// queued keys has a pass, the virtual time of its next turn; Get serves the
// namespace of the lowest pass (at equal passes, the one whose pass was set
// first), hands out its oldest key and advances its pass by 1/weight. The
// virtual time is the pass of the last turn served; a namespace that had
// nothing queued comes back at that time, or at its own pass if that is
// later, so idling banks no turns and costs none. Every namespace with queued
// keys then has a pass within [virtual time, virtual time + 1/weight].
// Namespaces at one pass wait in one bucket, first come first served: with
// equal weights there are at most two buckets and a turn does no heap work.
//
// Fairness bound: while namespace x has keys queued, another namespace y gets
// at most floor(w_y/w_x) + 1 turns before x's next one: from x's last turn
// (or from when x had keys again) to its next, x's pass moves by at most
// 1/w_x, and every turn y gets in between is at a pass of y inside that
// window, 1/w_y apart. The bound is reached (weights 1 and 6: seven turns).
// With equal weights it is one turn, round robin: at equal passes the
// namespace whose pass was set first goes first. The API budget's limiter
// (fairlimit) takes its turns from the same Order.
package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config is what a queue is built from.
type Config struct {
	// Name names the queue's client-go workqueue metrics; empty registers
	// none.
	Name string
	// MetricsProvider is the provider of those metrics; nil is client-go's
	// global one.
	MetricsProvider workqueue.MetricsProvider
	// Clock drives delays; nil is the real clock.
	Clock clock.WithTicker
	// Weights are the namespaces' shares of turns; nil: all equal.
	Weights Shares
}

// New returns a rate-limiting work queue of "namespace/name" keys, fair
// between namespaces: client-go's queue with an Order as its storage.
func New(rateLimiter workqueue.TypedRateLimiter[string], cfg Config) workqueue.TypedRateLimitingInterface[string] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock,
		Queue: NewOrder(cfg.Weights),
	})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock,
		Queue: queue,
	})
	return workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{
		Clock: cfg.Clock, DelayingQueue: delaying,
	})
}
