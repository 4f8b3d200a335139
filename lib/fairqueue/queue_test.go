package fairqueue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// The controller's retry backoff.
func newRateLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute)
}

// queues are the two implementations every semantics case runs against:
// within one namespace, fairqueue must behave as client-go's queue.
var queues = []struct {
	name string
	new  func(clk *testingclock.FakeClock) workqueue.TypedRateLimitingInterface[string]
}{
	{name: "client-go", new: func(clk *testingclock.FakeClock) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(newRateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk})
	}},
	{name: "fairqueue", new: func(clk *testingclock.FakeClock) workqueue.TypedRateLimitingInterface[string] {
		return New(newRateLimiter(), Config{Clock: clk})
	}},
}

type harness struct {
	t     *testing.T
	q     workqueue.TypedRateLimitingInterface[string]
	clock *testingclock.FakeClock
}

// step is one operation of a case, with what it must observe.
type step func(h *harness)

func add(key string) step { return func(h *harness) { h.q.Add(key) } }

func addAfter(key string, d time.Duration) step { return func(h *harness) { h.q.AddAfter(key, d) } }

func addRateLimited(key string) step { return func(h *harness) { h.q.AddRateLimited(key) } }

func forget(key string) step { return func(h *harness) { h.q.Forget(key) } }

func done(key string) step { return func(h *harness) { h.q.Done(key) } }

func shutDown() step { return func(h *harness) { h.q.ShutDown() } }

func advance(d time.Duration) step { return func(h *harness) { h.clock.Step(d) } }

// get takes the next key, which must be want.
func get(want string) step {
	return func(h *harness) {
		h.t.Helper()
		got, quit := getWithin(h.q, 5*time.Second)
		if quit || got != want {
			h.t.Fatalf("Get = %q (shut down %v), want %q", got, quit, want)
		}
	}
}

// getShutDown: Get says the queue is shut down.
func getShutDown() step {
	return func(h *harness) {
		h.t.Helper()
		if got, quit := getWithin(h.q, 5*time.Second); !quit {
			h.t.Fatalf("Get = %q, want the shut-down signal", got)
		}
	}
}

// length waits until Len is n (delays fire on another goroutine).
func length(n int) step {
	return func(h *harness) {
		h.t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for h.q.Len() != n {
			if time.Now().After(deadline) {
				h.t.Fatalf("Len = %d, want %d", h.q.Len(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// stays checks that Len stays n for a while: nothing fires early.
func stays(n int) step {
	return func(h *harness) {
		h.t.Helper()
		for range 20 {
			if got := h.q.Len(); got != n {
				h.t.Fatalf("Len = %d, want it to stay %d", got, n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

func numRequeues(key string, n int) step {
	return func(h *harness) {
		h.t.Helper()
		if got := h.q.NumRequeues(key); got != n {
			h.t.Fatalf("NumRequeues(%s) = %d, want %d", key, got, n)
		}
	}
}

func shuttingDown(want bool) step {
	return func(h *harness) {
		h.t.Helper()
		if got := h.q.ShuttingDown(); got != want {
			h.t.Fatalf("ShuttingDown = %v, want %v", got, want)
		}
	}
}

// getWaitsForDone: a second worker's Get does not return key while the first
// holds it, and returns it once the first calls Done.
func getWaitsForDone(key string) step {
	return func(h *harness) {
		h.t.Helper()
		got := make(chan string, 1)
		go func() {
			k, _ := h.q.Get()
			got <- k
		}()
		select {
		case k := <-got:
			h.t.Fatalf("a second worker got %q while the first held it", k)
		case <-time.After(50 * time.Millisecond):
		}
		h.q.Done(key)
		select {
		case k := <-got:
			if k != key {
				h.t.Fatalf("after Done the second worker got %q, want %q", k, key)
			}
		case <-time.After(5 * time.Second):
			h.t.Fatalf("after Done(%s) the second worker got nothing", key)
		}
	}
}

// shutDownWithDrainWaitsForDone: ShutDownWithDrain returns only once the
// key being processed is Done.
func shutDownWithDrainWaitsForDone(key string) step {
	return func(h *harness) {
		h.t.Helper()
		returned := make(chan struct{})
		go func() {
			h.q.ShutDownWithDrain()
			close(returned)
		}()
		select {
		case <-returned:
			h.t.Fatalf("ShutDownWithDrain returned while %s was being processed", key)
		case <-time.After(50 * time.Millisecond):
		}
		h.q.Done(key)
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			h.t.Fatalf("ShutDownWithDrain did not return after Done(%s)", key)
		}
	}
}

func getWithin(q workqueue.TypedInterface[string], d time.Duration) (string, bool) {
	type result struct {
		key  string
		quit bool
	}
	c := make(chan result, 1)
	go func() {
		k, quit := q.Get()
		c <- result{k, quit}
	}()
	select {
	case r := <-c:
		return r.key, r.quit
	case <-time.After(d):
		return "<nothing>", false
	}
}

// TestQueueSemanticsAreClientGos runs each case against client-go's queue and
// against fairqueue, with the keys of one namespace.
func TestQueueSemanticsAreClientGos(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "KeysComeOutFirstInFirstOut", steps: []step{
			add("ns/a"), add("ns/b"), add("ns/c"), length(3), get("ns/a"), get("ns/b"), get("ns/c"), length(0)}},
		{name: "KeyAddedTwiceIsQueuedOnce", steps: []step{
			add("ns/a"), add("ns/b"), add("ns/a"), length(2), get("ns/a"), get("ns/b"), length(0)}},
		{name: "KeyAddedAgainWhileQueuedKeepsItsPlace", steps: []step{
			add("ns/a"), add("ns/b"), add("ns/a"), get("ns/a"), get("ns/b")}},
		{name: "KeyAddedWhileProcessingIsQueuedAtDone", steps: []step{
			add("ns/a"), get("ns/a"), add("ns/a"), add("ns/a"), length(0), done("ns/a"), length(1), get("ns/a"), done("ns/a"), length(0)}},
		{name: "KeyBeingProcessedIsNeverHandedToASecondWorker", steps: []step{
			add("ns/a"), get("ns/a"), add("ns/a"), getWaitsForDone("ns/a")}},
		{name: "KeyAddedAgainAfterItsTurnGoesBehindTheOthers", steps: []step{
			add("ns/a"), add("ns/b"), add("ns/c"), get("ns/a"), add("ns/a"), done("ns/a"), get("ns/b"), get("ns/c"), get("ns/a")}},
		{name: "KeyNotAddedAgainIsForgottenAtDone", steps: []step{
			add("ns/a"), get("ns/a"), done("ns/a"), length(0), add("ns/a"), length(1)}},
		{name: "AddAfterQueuesOnceTheDelayHasPassed", steps: []step{
			addAfter("ns/a", 10*time.Second), stays(0), advance(9 * time.Second), stays(0), advance(time.Second), length(1), get("ns/a")}},
		{name: "AddAfterTwiceKeepsTheEarlierTime", steps: []step{
			addAfter("ns/a", 10*time.Second), addAfter("ns/a", 5*time.Second), stays(0), advance(5 * time.Second), length(1),
			get("ns/a"), done("ns/a"), advance(5 * time.Second), stays(0)}},
		{name: "AddAfterLaterThanAWaitingOneChangesNothing", steps: []step{
			addAfter("ns/a", 5*time.Second), addAfter("ns/a", 10*time.Second), addAfter("ns/a", 5*time.Second), stays(0),
			advance(5 * time.Second), length(1), get("ns/a"), done("ns/a"), advance(5 * time.Second), stays(0)}},
		{name: "AddAfterOnceTheWaitingOneFiredWaitsAgain", steps: []step{
			addAfter("ns/a", time.Second), advance(time.Second), length(1), get("ns/a"), addAfter("ns/a", time.Second),
			advance(time.Second), length(0), done("ns/a"), length(1), get("ns/a")}},
		{name: "AddRateLimitedSoonerThanAWaitingAddAfterReplacesIt", steps: []step{
			addAfter("ns/a", 10*time.Second), addRateLimited("ns/a"), stays(0), advance(time.Second), length(1), get("ns/a"), done("ns/a"),
			addAfter("ns/a", 9500*time.Millisecond), advance(9 * time.Second), stays(0), advance(500 * time.Millisecond), length(1)}},
		{name: "AddAfterOfOneKeyLeavesAnotherWaiting", steps: []step{
			addAfter("ns/a", 2*time.Second), addAfter("ns/b", 3*time.Second), addAfter("ns/a", 3*time.Second), stays(0),
			advance(2 * time.Second), length(1), get("ns/a"), advance(time.Second), length(1), get("ns/b"), done("ns/a"), stays(0)}},
		{name: "AddAfterOfAQueuedKeyQueuesItOnce", steps: []step{
			add("ns/a"), addAfter("ns/a", time.Second), advance(time.Second), stays(1), get("ns/a"), stays(0)}},
		{name: "AddAfterWithoutDelayAddsAtOnce", steps: []step{
			addAfter("ns/a", 0), length(1), get("ns/a")}},
		{name: "AddRateLimitedBacksOffPerKeyUntilForget", steps: []step{
			addRateLimited("ns/a"), numRequeues("ns/a", 1), stays(0), advance(time.Second), length(1), get("ns/a"),
			addRateLimited("ns/a"), done("ns/a"), numRequeues("ns/a", 2), advance(time.Second), stays(0), advance(time.Second), length(1),
			numRequeues("ns/b", 0), forget("ns/a"), numRequeues("ns/a", 0)}},
		{name: "ShutDownLetsWorkersTakeWhatIsQueuedThenStops", steps: []step{
			add("ns/a"), add("ns/b"), shuttingDown(false), shutDown(), shuttingDown(true), add("ns/c"), addAfter("ns/d", 0), length(2),
			get("ns/a"), get("ns/b"), getShutDown()}},
		{name: "ShutDownWithDrainWaitsForTheKeysBeingProcessed", steps: []step{
			add("ns/a"), get("ns/a"), shutDownWithDrainWaitsForDone("ns/a"), shuttingDown(true), getShutDown()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, impl := range queues {
				t.Run(impl.name, func(t *testing.T) {
					clk := testingclock.NewFakeClock(time.Now())
					h := &harness{t: t, q: impl.new(clk), clock: clk}
					defer h.q.ShutDown()
					for _, s := range tc.steps {
						s(h)
					}
				})
			}
		})
	}
}

// TestWorkersNeverHoldOneKeyAtOnce: workers and event handlers on many
// goroutines (run with -race); no key is held by two workers at once, and
// every key added is processed after its last Add.
func TestWorkersNeverHoldOneKeyAtOnce(t *testing.T) {
	q := New(newRateLimiter(), Config{Weights: fairorder.Weights{"ns1": 3}})
	var mu sync.Mutex
	held := map[string]bool{}
	lastAdd := map[string]int{}
	lastDone := map[string]int{}
	tick := 0
	var workers sync.WaitGroup
	for range 5 {
		workers.Go(func() {
			for {
				key, quit := q.Get()
				if quit {
					return
				}
				mu.Lock()
				if held[key] {
					t.Errorf("%s handed to a second worker", key)
				}
				held[key] = true
				tick++
				start := tick
				mu.Unlock()
				time.Sleep(time.Duration(len(key)%3) * 100 * time.Microsecond)
				mu.Lock()
				held[key] = false
				lastDone[key] = start
				mu.Unlock()
				q.Done(key)
			}
		})
	}
	var adders sync.WaitGroup
	for a := range 3 {
		adders.Go(func() {
			for i := range 2000 {
				key := "ns" + string(rune('0'+(i+a)%4)) + "/job-" + string(rune('a'+i%7))
				mu.Lock()
				tick++
				lastAdd[key] = tick
				mu.Unlock()
				q.Add(key)
			}
		})
	}
	adders.Wait()
	q.ShutDownWithDrain()
	// ShutDownWithDrain waits for the keys in processing only; what is
	// still queued is taken by the workers before they see the shutdown.
	workers.Wait()
	for key, added := range lastAdd {
		if lastDone[key] < added {
			t.Errorf("%s added at %d, last processing started at %d: the last Add was lost", key, added, lastDone[key])
		}
	}
}

// fakeMetrics counts what client-go's workqueue reports, by queue name.
type fakeMetrics struct {
	mu   sync.Mutex
	adds map[string]int
}

type counter struct {
	m    *fakeMetrics
	name string
}

func (c counter) Inc() {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.adds[c.name]++
}

type noop struct{}

func (noop) Inc()            {}
func (noop) Dec()            {}
func (noop) Set(float64)     {}
func (noop) Observe(float64) {}

func (m *fakeMetrics) NewDepthMetric(string) workqueue.GaugeMetric { return noop{} }
func (m *fakeMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return counter{m, name}
}
func (m *fakeMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return noop{} }
func (m *fakeMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noop{} }
func (m *fakeMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (m *fakeMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noop{}
}
func (m *fakeMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return counter{m, "retries of " + name}
}

func TestQueueReportsClientGoMetricsUnderItsName(t *testing.T) {
	m := &fakeMetrics{adds: map[string]int{}}
	q := New(newRateLimiter(), Config{Name: "jobplane_job", MetricsProvider: m})
	defer q.ShutDown()
	q.Add("ns/a")
	q.Add("ns/a")
	q.Add("other/b")
	m.mu.Lock()
	defer m.mu.Unlock()
	if got := m.adds["jobplane_job"]; got != 2 {
		t.Errorf("adds of jobplane_job = %d, want 2 (a key queued twice counts once); all: %v", got, m.adds)
	}
}

// Every AddAfter counts as a retry, as client-go's delaying queue counts
// them, including those not passed on to it.
func TestEveryAddAfterCountsAsARetry(t *testing.T) {
	for _, impl := range []struct {
		name string
		new  func(workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string]
	}{
		{name: "client-go", new: func(m workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(newRateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{Name: "jobplane_job", MetricsProvider: m})
		}},
		{name: "fairqueue", new: func(m workqueue.MetricsProvider) workqueue.TypedRateLimitingInterface[string] {
			return New(newRateLimiter(), Config{Name: "jobplane_job", MetricsProvider: m})
		}},
	} {
		t.Run(impl.name, func(t *testing.T) {
			m := &fakeMetrics{adds: map[string]int{}}
			q := impl.new(m)
			defer q.ShutDown()
			q.AddAfter("ns/a", time.Hour)
			q.AddAfter("ns/a", 2*time.Hour)
			q.AddAfter("ns/a", time.Hour)
			q.AddRateLimited("ns/a")
			m.mu.Lock()
			defer m.mu.Unlock()
			if got := m.adds["retries of jobplane_job"]; got != 4 {
				t.Errorf("retries = %d, want 4", got)
			}
		})
	}
}

// A key's add, once fired, is forgotten: Jobs come and go without the
// record of their adds growing past about twice those still waiting.
func TestFiredAddsAreForgotten(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	q := New(newRateLimiter(), Config{Clock: clk}).(*coalescing)
	defer q.ShutDown()
	const perRound = 1000
	for round := range 20 {
		for i := range perRound {
			q.AddAfter(fmt.Sprintf("ns/job-%d-%d", round, i), time.Second)
		}
		clk.Step(time.Second)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) > 3*perRound {
		t.Errorf("%d adds remembered, with at most %d waiting", len(q.waiting), perRound)
	}
}
