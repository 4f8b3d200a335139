// Package admission bounds the work a server takes in, in the manner of the
// API server's Priority and Fairness: calls belong to a priority level (the
// services' own identities have one of their own, so outside callers never
// delay them); within a level each caller (a tenant, as the server names
// it: a ServiceAccount's namespace) is a flow with a queue of its own, and
// flows are served fairly (start-time fair queuing), so one caller flooding
// a level delays only itself. A level has two budgets: seats (calls in
// flight) and bytes (requests being decoded and held, charged at their wire
// size times an expansion factor, once their size is known). A call waits
// for both at most a bounded time, then is shed with RESOURCE_EXHAUSTED and
// google.rpc.RetryInfo; one that can never fit is shed at once, naming the
// limit. Long-lived streams hold a seat of a separate budget: a caller may
// keep at most so many open, and callers share a level's fairly (streams.go).
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/apierr"
)

// The priority levels.
const (
	// System is the level of the services' own identities (the executor
	// calling the planner, cron calling the executor).
	System = "system"
	// Workload is every other caller's.
	Workload = "workload"
)

// The classes of RPC, by what a call does: Admit's class.
const (
	ClassRead    = "read"    // get, list, watch
	ClassWrite   = "write"   // create, update, delete
	ClassCompute = "compute" // a pure function of the request
)

// The reasons a stream is refused or ended with (RESOURCE_EXHAUSTED), which
// a client tells from a request refused on a stream it keeps.
const (
	// ReasonTooManyStreams: the caller, or the level, holds the most
	// streams allowed.
	ReasonTooManyStreams = "TOO_MANY_STREAMS"
	// ReasonStreamPreempted: the stream was ended for a caller holding
	// fewer.
	ReasonStreamPreempted = "STREAM_PREEMPTED"
)

// LevelConfig is one priority level's budgets.
type LevelConfig struct {
	// Seats bounds the calls in flight.
	Seats int
	// ClassSeats bounds the calls in flight of one class of RPC (Admit's
	// class), so that a flood of one class leaves seats to the others; 0
	// or Seats sets no bound of its own.
	ClassSeats int
	// SeatsOfClass bounds particular classes instead of ClassSeats.
	SeatsOfClass map[string]int
	// Bytes bounds the request bytes being decoded and held (wire size
	// times the expansion factor).
	Bytes int64
	// StreamsPerFlow bounds the long-lived streams one caller keeps open,
	// Streams those of all callers.
	StreamsPerFlow int
	Streams        int
	// UnreadAnswerBytes bounds the answers held for the level's callers
	// that have not read them, UnreadAnswerBytesPerCaller one caller's
	// (HoldAnswer).
	UnreadAnswerBytes, UnreadAnswerBytesPerCaller int64
}

// Config is the admission of one server.
type Config struct {
	Levels map[string]LevelConfig
	// QueueLength bounds the calls one caller has waiting in a level.
	QueueLength int
	// MaxQueueWait bounds a call's wait for a seat or for bytes.
	MaxQueueWait time.Duration
	// Expansion is what a request's decoded form and the work on it cost
	// in memory per byte received.
	Expansion int64
}

// Controller admits calls.
type Controller struct {
	cfg     Config
	levels  map[string]*level
	metrics *metrics
}

type level struct {
	name  string
	cfg   LevelConfig
	seats *fairSemaphore
	bytes *fairSemaphore

	mu      sync.Mutex
	classes map[string]*fairSemaphore
	// streams are each caller's open streams, oldest first.
	streams map[string][]*Ticket
	// openStreams is the sum of streams.
	openStreams int
	// answers are the level's answers held unread.
	answers *answers
}

// New builds a controller; reg, when not nil, gets its metrics.
func New(cfg Config, reg prometheus.Registerer) *Controller {
	c := &Controller{cfg: cfg, levels: map[string]*level{}, metrics: newMetrics(reg)}
	for name, lc := range cfg.Levels {
		c.levels[name] = &level{
			name:    name,
			cfg:     lc,
			seats:   newFairSemaphore(int64(lc.Seats), cfg.QueueLength, c.metrics.waiting.WithLabelValues(name, "seats")),
			bytes:   newFairSemaphore(lc.Bytes, cfg.QueueLength, c.metrics.waiting.WithLabelValues(name, "bytes")),
			streams: map[string][]*Ticket{},
			classes: map[string]*fairSemaphore{},
			answers: newAnswers(lc.UnreadAnswerBytes, lc.UnreadAnswerBytesPerCaller),
		}
		c.metrics.capacity.WithLabelValues(name, "seats").Set(float64(lc.Seats))
		c.metrics.capacity.WithLabelValues(name, "bytes").Set(float64(lc.Bytes))
	}
	return c
}

// Ticket is one admitted call: its seat and the bytes charged to it.
type Ticket struct {
	c     *Controller
	level *level
	flow  string
	// class is the seat of the call's class, if its class has a bound.
	class *fairSemaphore
	mu    sync.Mutex
	bytes int64
	// held are the bytes of messages held past the next (Hold), not yet
	// given back.
	held   int64
	stream bool
	// preempt ends a stream another caller took the place of; preempted
	// is set (under the level's lock) once it has.
	preempt   func()
	preempted bool
	release   sync.Once
}

// Admit waits for a seat of levelName for the caller flow: one of its
// class's first, when the level bounds each class; both waits together
// last at most the queue wait.
func (c *Controller) Admit(ctx context.Context, levelName, flow, class string) (*Ticket, error) {
	l := c.level(levelName)
	classSeats := l.classSeats(c, class)
	var waited time.Duration
	if classSeats != nil {
		var err error
		waited, err = classSeats.acquire(ctx, flow, 1, c.cfg.MaxQueueWait)
		if err != nil {
			c.metrics.wait.WithLabelValues(l.name).Observe(waited.Seconds())
			return nil, c.refuse(l, "seats of class "+class, int64(l.cfg.seatsOf(class)), err)
		}
	}
	levelWait, err := l.seats.acquire(ctx, flow, 1, c.cfg.MaxQueueWait-waited)
	c.metrics.wait.WithLabelValues(l.name).Observe((waited + levelWait).Seconds())
	if err != nil {
		if classSeats != nil {
			classSeats.release(1)
		}
		return nil, c.refuse(l, "seats", int64(l.cfg.Seats), err)
	}
	c.metrics.admitted.WithLabelValues(l.name).Inc()
	c.metrics.inUse.WithLabelValues(l.name, "seats").Inc()
	return &Ticket{c: c, level: l, flow: flow, class: classSeats}, nil
}

// classSeats is the semaphore of class's seats in l, or nil when l sets
// no bound of a class's own.
func (l *level) classSeats(c *Controller, class string) *fairSemaphore {
	seats := l.cfg.seatsOf(class)
	if class == "" || seats <= 0 || seats >= l.cfg.Seats {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.classes[class]
	if !ok {
		s = newFairSemaphore(int64(seats), c.cfg.QueueLength, c.metrics.waiting.WithLabelValues(l.name, "seats-"+class))
		l.classes[class] = s
	}
	return s
}

// seatsOf is the bound of class's calls in flight; 0: none of its own.
func (lc LevelConfig) seatsOf(class string) int {
	if seats, ok := lc.SeatsOfClass[class]; ok {
		return seats
	}
	return lc.ClassSeats
}

// Charge waits for n bytes received (charged times the expansion factor)
// until the ticket is released.
// A stream holding messages of its own (Hold) waits on past the queue wait
// while it does: they come back once answered, and a refusal would end the
// stream and everything on it.
func (t *Ticket) Charge(ctx context.Context, n int64) error {
	cost := n * t.c.cfg.Expansion
	l := t.level
	held := t.holding()
	waited, err := l.bytes.acquire(ctx, t.flow, cost, t.c.cfg.MaxQueueWait)
	for errors.Is(err, errTimedOut) && held {
		// It waits for its own bytes: on while they are held, and once
		// more for them if they were given back during the last wait.
		held = t.holding()
		var more time.Duration
		more, err = l.bytes.acquire(ctx, t.flow, cost, t.c.cfg.MaxQueueWait)
		waited += more
	}
	t.c.metrics.wait.WithLabelValues(l.name).Observe(waited.Seconds())
	if err != nil {
		return t.c.refuse(l, "bytes", l.cfg.Bytes, err)
	}
	t.mu.Lock()
	t.bytes += cost
	t.mu.Unlock()
	t.c.metrics.inUse.WithLabelValues(l.name, "bytes").Add(float64(cost))
	return nil
}

// Uncharge gives back what Charge took, for a stream's message once it is
// answered.
func (t *Ticket) Uncharge() {
	t.giveBack(t.takeBytes())
}

// takeBytes returns the bytes charged, which the ticket then no longer holds.
func (t *Ticket) takeBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.bytes
	t.bytes = 0
	return n
}

// giveBack returns n bytes charged to the level.
func (t *Ticket) giveBack(n int64) {
	if n > 0 {
		t.level.bytes.release(n)
		t.c.metrics.inUse.WithLabelValues(t.level.name, "bytes").Sub(float64(n))
	}
}

// Hold takes the bytes charged so far out of the next Uncharge, for a
// stream's message its handler keeps working on after receiving the next;
// the function returned gives them back (once).
func (t *Ticket) Hold() (release func()) {
	n := t.takeBytes()
	t.mu.Lock()
	t.held += n
	t.mu.Unlock()
	return sync.OnceFunc(func() {
		t.mu.Lock()
		t.held -= n
		t.mu.Unlock()
		t.giveBack(n)
	})
}

// holding: the ticket holds messages past the next.
func (t *Ticket) holding() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held > 0
}

// Release ends the call: its seat (or stream) and bytes go back.
func (t *Ticket) Release() {
	t.release.Do(func() {
		t.Uncharge()
		l := t.level
		if t.stream {
			l.closeStream(t)
			return
		}
		l.seats.release(1)
		if t.class != nil {
			t.class.release(1)
		}
		t.c.metrics.inUse.WithLabelValues(l.name, "seats").Dec()
	})
}

// LargestMessage is the largest request, or stream message, levelName can
// ever take: its bytes budget over the expansion factor.
func (c *Controller) LargestMessage(levelName string) int64 {
	return c.level(levelName).cfg.Bytes / max(c.cfg.Expansion, 1)
}

func (c *Controller) level(name string) *level {
	if l, ok := c.levels[name]; ok {
		return l
	}
	return c.levels[Workload]
}

// refuse turns a semaphore's refusal into the caller's status.
func (c *Controller) refuse(l *level, budget string, limit int64, err error) error {
	var reason, msg string
	switch {
	case errors.Is(err, errTooLarge):
		reason = "REQUEST_TOO_LARGE"
		msg = fmt.Sprintf("the request needs more than the whole %s budget of priority level %q (%d; each byte received counts %d): it can never be served", budget, l.name, limit, c.cfg.Expansion)
	case errors.Is(err, errQueueFull):
		reason = "QUEUE_FULL"
		msg = fmt.Sprintf("the caller already has %d calls waiting for %s on priority level %q", c.cfg.QueueLength, budget, l.name)
	case errors.Is(err, errTimedOut):
		reason = "QUEUE_TIMEOUT"
		msg = fmt.Sprintf("waited %s for %s on priority level %q (%d in use)", c.cfg.MaxQueueWait, budget, l.name, limit)
	default:
		return status.FromContextError(err).Err()
	}
	c.metrics.rejected.WithLabelValues(l.name, reason).Inc()
	if reason == "REQUEST_TOO_LARGE" {
		return apierr.New(codes.ResourceExhausted, reason, map[string]string{"priorityLevel": l.name, "budget": budget, "limit": fmt.Sprint(limit)}, "%s", msg)
	}
	return Exhausted(msg, reason, l.name, c.cfg.MaxQueueWait)
}

// Exhausted is RESOURCE_EXHAUSTED with a RetryInfo whose delay is jittered
// around the queue wait, so that shed callers do not return together.
func Exhausted(msg, reason, levelName string, wait time.Duration) error {
	return apierr.Exhausted(reason, map[string]string{"priorityLevel": levelName}, wait, "%s; retry later", msg)
}

type metrics struct {
	admitted *prometheus.CounterVec
	rejected *prometheus.CounterVec
	wait     *prometheus.HistogramVec
	inUse    *prometheus.GaugeVec
	waiting  *prometheus.GaugeVec
	capacity *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobplane_admission_admitted_total",
			Help: "Calls and streams admitted, by priority level."}, []string{"priority_level"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobplane_admission_rejected_total",
			Help: "Calls shed with RESOURCE_EXHAUSTED, by priority level and reason."}, []string{"priority_level", "reason"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "jobplane_admission_queue_wait_seconds",
			Help:    "Time calls waited in their queue for a seat or bytes, by priority level.",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}, []string{"priority_level"}),
		inUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobplane_admission_in_use",
			Help: "Seats, bytes and streams in use, by priority level."}, []string{"priority_level", "budget"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobplane_admission_waiting",
			Help: "Calls waiting in their queue for seats or bytes, by priority level."}, []string{"priority_level", "budget"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobplane_admission_capacity",
			Help: "Seats and bytes of each priority level."}, []string{"priority_level", "budget"}),
	}
	if reg != nil {
		reg.MustRegister(m.admitted, m.rejected, m.wait, m.inUse, m.waiting, m.capacity)
	}
	return m
}
