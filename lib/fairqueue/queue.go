// Package fairqueue is the work queue of the executor's Jobs and of cron's
// CronJobs: client-go's rate-limiting workqueue whose Get hands out
// "namespace/..." keys fairly between namespaces (tenants), then first in
// first out among the keys of a namespace. A
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
// exactly as in client-go: the same code runs them (an AddAfter that would be
// a no-op there is not passed on: coalesce.go).
//
// The order is fairorder.Order's (see there for its fairness bound); the
// API budget's limiter (fairlimit) takes its turns from the same order.
package fairqueue

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/jobplane/jobplane/lib/fairorder"
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
	Weights fairorder.Shares
	// Order is the queue's storage, for a caller that asks it who is
	// waiting (WaitingBesides); nil: a new order of Weights.
	Order *fairorder.Order
}

// New returns a rate-limiting work queue of "namespace/name" keys, fair
// between namespaces: client-go's queue with an Order as its storage.
func New(rateLimiter workqueue.TypedRateLimiter[string], cfg Config) workqueue.TypedRateLimitingInterface[string] {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Order == nil {
		cfg.Order = fairorder.NewOrder(cfg.Weights)
	}
	var retries *retriesOf
	if cfg.MetricsProvider != nil && cfg.Name != "" {
		retries = &retriesOf{MetricsProvider: cfg.MetricsProvider, name: cfg.Name}
		cfg.MetricsProvider = retries
	}
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock,
		Queue: cfg.Order,
	})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{
		Name: cfg.Name, MetricsProvider: cfg.MetricsProvider, Clock: cfg.Clock,
		Queue: queue,
	})
	q := &coalescing{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(rateLimiter, workqueue.TypedRateLimitingQueueConfig[string]{
			Clock: cfg.Clock, DelayingQueue: delaying,
		}),
		rateLimiter: rateLimiter, clock: cfg.Clock, waiting: map[string]waitingAdd{}, sweepAt: minSweep,
	}
	if retries != nil {
		q.retries = retries.retries
	}
	return q
}
