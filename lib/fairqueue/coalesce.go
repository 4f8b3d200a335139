package fairqueue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// coalescing passes AddAfter on to client-go's delaying queue only when it
// could change what the delaying queue does: a key already waiting to be
// added by a time no later than the one asked for keeps its time there, so
// the call is a no-op, yet it costs a send to the delaying queue's goroutine,
// a wake-up and a new timer. Pod events ask for their Job's sync a batch
// period later dozens of times a second (profiled: a tenth of the
// executor's CPU beyond following for a 2,000-pod Job at QPS 20).
//
// Every AddAfter, AddRateLimited included, goes through here, so waiting
// knows each key's earliest delayed add that was passed on; Add does not
// touch a key's waiting add, in client-go as here.
type coalescing struct {
	workqueue.TypedRateLimitingInterface[string]
	rateLimiter workqueue.TypedRateLimiter[string]
	clock       clock.PassiveClock
	// retries counts the calls not passed on, as the delaying queue counts
	// every AddAfter; nil without a metrics provider.
	retries workqueue.CounterMetric

	mu      sync.Mutex
	waiting map[string]waitingAdd
	// sweepAt: past this many entries, those whose add has fired go.
	sweepAt int
}

// waitingAdd is the add passed on for a key: the delaying queue adds the key
// at a time in [from, until] (its clock is read just after ours), unless a
// sooner add passed on since replaced it here.
type waitingAdd struct {
	from, until time.Time
}

const minSweep = 1024

func (q *coalescing) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.TypedRateLimitingInterface.AddAfter(key, d)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	old, known := q.waiting[key]
	if known && now.Before(old.from) && !now.Add(d).Before(old.until) {
		if q.retries != nil && !q.ShuttingDown() {
			q.retries.Inc()
		}
		return
	}
	q.TypedRateLimitingInterface.AddAfter(key, d)
	w := waitingAdd{from: now.Add(d), until: q.clock.Now().Add(d)}
	if known && now.Before(old.until) {
		// The old add may still wait there, and the sooner of the two stays.
		w.from = minTime(w.from, old.from)
	}
	q.waiting[key] = w
	if len(q.waiting) > q.sweepAt {
		q.sweep(now)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// AddRateLimited is client-go's, through AddAfter above.
func (q *coalescing) AddRateLimited(key string) {
	q.AddAfter(key, q.rateLimiter.When(key))
}

// sweep forgets the adds that have fired; q.mu is held.
func (q *coalescing) sweep(now time.Time) {
	for key, w := range q.waiting {
		if !now.Before(w.from) {
			delete(q.waiting, key)
		}
	}
	q.sweepAt = max(minSweep, 2*len(q.waiting))
}

// retriesOf wraps a metrics provider to hand out the retries metric of the
// queue named name.
type retriesOf struct {
	workqueue.MetricsProvider
	name    string
	retries workqueue.CounterMetric
}

func (p *retriesOf) NewRetriesMetric(name string) workqueue.CounterMetric {
	m := p.MetricsProvider.NewRetriesMetric(name)
	if name == p.name {
		p.retries = m
	}
	return m
}
