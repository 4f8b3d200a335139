// Package fairlimit is a client-side rate limiter for the Kubernetes client
// that shares its budget fairly between namespaces, then between the keys of
// a namespace (the executor's Jobs, cron's CronJobs). client-go's token
// bucket serves requests first come, first served, so a small Job's two
// calls wait behind a large Job's hundreds of creations and finalizer
// patches, and a tenant's one Job behind every Job another tenant runs; here
// the next token goes to the namespace whose turn it is (fairorder.Order:
// the work queues' order, with the same weights), and within it to its keys
// with requests waiting in turn. Requests made for no key (the informers')
// share a lane of their own, served as one more namespace; leader election
// has a client and a limiter of its own (leader.ClientFor). Events have a
// lane of their own too (EventsLane, EventSink), served once in eventsEvery
// tokens while others wait: as the reference's single event-writing
// goroutine gets a small share of a busy controller's budget, events trail
// a burst instead of slowing it. The total rate (QPS and burst) is the same
// as client-go's.
package fairlimit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobplane/jobplane/lib/fairorder"
)

type keyType struct{}

// WithKey marks the requests made with ctx as the work of one Job (its
// namespace/name), queued in its lane; requests without a key share one lane
// of their own.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyType{}, key)
}

// KeyOf is the key WithKey set on ctx, or "".
func KeyOf(ctx context.Context) string {
	k, _ := ctx.Value(keyType{}).(string)
	return k
}

type laneType struct{}

// WithLane queues the requests made with ctx in the lane of a Job's key
// without marking them as that Job's work (KeyOf, which counts a Job's API
// cost, is unchanged): for a request made for a Job outside its syncs, such
// as its creation.
func WithLane(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, laneType{}, key)
}

// LaneOf is the lane of ctx's requests: WithLane's key, else WithKey's.
func LaneOf(ctx context.Context) string {
	if l, ok := ctx.Value(laneType{}).(string); ok {
		return l
	}
	return KeyOf(ctx)
}

type admittedType struct{}

// Admitted marks the request made with ctx as holding its token already
// (taken with Limiter.Wait by the caller, which can then give up a request
// still waiting without cancelling one sent): Wait lets it go at once, once.
// client-go waits again before each retry of the request, and a retry takes
// a token of its own.
func Admitted(ctx context.Context) context.Context {
	return context.WithValue(ctx, admittedType{}, new(atomic.Bool))
}

// NamespaceLane is the lane of requests made for a namespace as a whole (a
// list, a watch): "namespace/", taking that namespace's turns; for all
// namespaces (""), a lane of its own, of no namespace (a namespace is a DNS
// label, without dots).
func NamespaceLane(namespace string) string {
	if namespace == "" {
		return "jobplane.dev/all-namespaces/"
	}
	return namespace + "/"
}

// EventsLane is the lane of the events' requests (WithLane). It is the lane
// of no namespace: a namespace is a DNS label, without dots.
const EventsLane = "jobplane.dev/events"

// eventsEvery: while other lanes wait, the events lane is served once in
// this many tokens (about 1 in 9 requests; the reference's events took about
// 1 in 9 of its budget during a burst of 200 Jobs, measured).
const eventsEvery = 8

// Limiter implements flowcontrol.RateLimiter with a fair queue per lane.
type Limiter struct {
	bucket *rate.Limiter
	qps    float32

	mu sync.Mutex
	// lanes holds the waiters of each lane, oldest first; turns is the
	// order lanes with waiters are served in.
	lanes map[string][]chan struct{}
	turns *fairorder.Order
	// events are the waiters of EventsLane, oldest first; sinceEvents
	// counts the tokens given to other lanes since it was last served.
	events      []chan struct{}
	sinceEvents int
	pending     chan struct{} // signalled when a waiter arrives
	stop        chan struct{}
	once        sync.Once
}

var _ flowcontrol.RateLimiter = (*Limiter)(nil)

// New returns a limiter of qps requests per second with bursts of burst,
// shared between namespaces by weights, and starts its dispatcher (ended by
// Stop).
func New(qps float32, burst int, weights fairorder.Shares) *Limiter {
	l := &Limiter{
		bucket:  rate.NewLimiter(rate.Limit(qps), burst),
		qps:     qps,
		lanes:   map[string][]chan struct{}{},
		turns:   fairorder.NewOrder(weights),
		pending: make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	go l.dispatch()
	return l
}

// Wait blocks until the request of ctx's lane may go, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // as x/time/rate's: no token for a request already given up
	}
	if used, ok := ctx.Value(admittedType{}).(*atomic.Bool); ok && used.CompareAndSwap(false, true) {
		return nil
	}
	l.mu.Lock()
	if l.waiting() == 0 && l.bucket.Allow() {
		l.mu.Unlock()
		return nil
	}
	key := LaneOf(ctx)
	w := make(chan struct{})
	switch {
	case key == EventsLane:
		l.events = append(l.events, w)
	case len(l.lanes[key]) == 0:
		l.turns.Push(key)
		fallthrough
	default:
		l.lanes[key] = append(l.lanes[key], w)
	}
	l.mu.Unlock()
	select {
	case l.pending <- struct{}{}:
	default:
	}
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-w: // granted meanwhile
			return nil
		default:
		}
		l.remove(key, w)
		return ctx.Err()
	}
}

// waiting is how many lanes have waiters; l.mu is held.
func (l *Limiter) waiting() int {
	n := l.turns.Len()
	if len(l.events) > 0 {
		n++
	}
	return n
}

// remove takes a cancelled waiter out of its lane; l.mu is held.
func (l *Limiter) remove(key string, w chan struct{}) {
	if key == EventsLane {
		l.events = slices.DeleteFunc(l.events, func(x chan struct{}) bool { return x == w })
		return
	}
	lane := l.lanes[key]
	for i, x := range lane {
		if x == w {
			lane = append(lane[:i:i], lane[i+1:]...)
			break
		}
	}
	if len(lane) > 0 {
		l.lanes[key] = lane
		return
	}
	delete(l.lanes, key)
	l.turns.Remove(key)
}

// dispatch hands out tokens as the bucket refills, one lane at a time in
// turn.
func (l *Limiter) dispatch() {
	for {
		l.mu.Lock()
		idle := l.waiting() == 0
		l.mu.Unlock()
		if idle {
			select {
			case <-l.pending:
				continue
			case <-l.stop:
				return
			}
		}
		r := l.bucket.Reserve()
		if d := r.Delay(); d > 0 {
			select {
			case <-time.After(d):
			case <-l.stop:
				return
			}
		}
		l.grantNext(r)
	}
}

// grantNext releases the oldest waiter of the next lane in turn; with none
// left (all cancelled) the token goes back.
func (l *Limiter) grantNext(r *rate.Reservation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting() == 0 {
		r.Cancel()
		return
	}
	if len(l.events) > 0 && (l.turns.Len() == 0 || l.sinceEvents >= eventsEvery) {
		w := l.events[0]
		l.events = l.events[1:]
		l.sinceEvents = 0
		close(w)
		return
	}
	l.sinceEvents++
	key := l.turns.Pop()
	lane := l.lanes[key]
	w := lane[0]
	if len(lane) > 1 {
		l.lanes[key] = lane[1:]
		l.turns.Push(key) // behind its namespace's other lanes
	} else {
		delete(l.lanes, key)
	}
	close(w)
}

// TryAccept takes a token if one is free and nobody waits.
func (l *Limiter) TryAccept() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting() == 0 && l.bucket.Allow()
}

// Accept blocks until a token is granted.
func (l *Limiter) Accept() { _ = l.Wait(context.Background()) }

// Stop ends the dispatcher.
func (l *Limiter) Stop() { l.once.Do(func() { close(l.stop) }) }

// QPS is the configured rate.
func (l *Limiter) QPS() float32 { return l.qps }
