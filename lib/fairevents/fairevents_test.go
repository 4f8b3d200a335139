package fairevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// recordingSink is the API server's events: it keeps what was written, in
// order, and fails as told.
type recordingSink struct {
	mu      sync.Mutex
	written []string // verb namespace/name
	// messages are the written events' counts and messages, in order.
	messages []string
	events   map[string]*corev1.Event
	fail     func(verb string, e *corev1.Event) error
	// gate, when not nil, holds every write until it is given a value.
	gate chan struct{}
}

func newRecordingSink() *recordingSink {
	return &recordingSink{events: map[string]*corev1.Event{}}
}

func (r *recordingSink) do(verb string, e *corev1.Event) (*corev1.Event, error) {
	if r.gate != nil {
		<-r.gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(verb, e); err != nil {
			return nil, err
		}
	}
	key := e.Namespace + "/" + e.Name
	if verb == "patch" {
		if _, ok := r.events[key]; !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, e.Name)
		}
	}
	r.events[key] = e
	r.written = append(r.written, verb+" "+key)
	r.messages = append(r.messages, fmt.Sprintf("count=%d %s", e.Count, e.Message))
	return e, nil
}

func (r *recordingSink) Create(e *corev1.Event) (*corev1.Event, error) { return r.do("create", e) }
func (r *recordingSink) Update(e *corev1.Event) (*corev1.Event, error) { return r.do("update", e) }
func (r *recordingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return r.do("patch", e)
}

func (r *recordingSink) writes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.written...)
}

func event(ns, name string) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Reason: "SuccessfulCreate"}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newSink is a sink to api whose drops are counted in a counter of its own.
func newSink(api record.EventSink, clk clock.WithTicker) *Sink {
	return New(api, clk, quietLog(), prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"}))
}

func dropped(s *Sink) int { return int(testutil.ToFloat64(s.dropped)) }

// run starts s's writer until the test ends.
func run(t *testing.T, s *Sink) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls until cond holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A namespace's 500 queued events do not hold another's back: its one event
// is written at the writer's next turn, second, and the busy namespace's go
// on after it in their order.
func TestANamespacesBurstDoesNotHoldBackAnothersEvent(t *testing.T) {
	api := newRecordingSink()
	s := newSink(api, clock.RealClock{})
	for i := range 500 {
		_, _ = s.Create(event("busy", fmt.Sprintf("e-%03d", i)))
	}
	_, _ = s.Create(event("quiet", "e"))
	run(t, s)
	waitFor(t, "501 writes", func() bool { return len(api.writes()) == 501 })
	written := api.writes()
	if written[1] != "create quiet/e" {
		t.Errorf("writes began %q, want the quiet namespace's second", written[:3])
	}
	for i, w := range append(written[:1], written[2:]...) {
		if want := fmt.Sprintf("create busy/e-%03d", i); w != want {
			t.Fatalf("busy namespace's write %d is %q, want %q: a namespace's writes keep their order", i, w, want)
		}
	}
	if dropped(s) != 0 {
		t.Errorf("%d writes dropped, want none", dropped(s))
	}
}

// A namespace past PerNamespace queued writes drops its own, never
// another's; past Total, the longest queue gives up its newest write to a
// namespace with fewer.
func TestABurstDropsItsOwnEvents(t *testing.T) {
	s := newSink(newRecordingSink(), clock.RealClock{})
	for i := range PerNamespace + 500 {
		_, _ = s.Create(event("busy", fmt.Sprintf("e-%d", i)))
	}
	if got := dropped(s); got != 500 {
		t.Errorf("%d dropped, want the 500 past the busy namespace's %d", got, PerNamespace)
	}
	_, _ = s.Create(event("quiet", "e"))
	if got := len(s.queues["quiet"].writes); got != 1 {
		t.Fatalf("the quiet namespace has %d writes queued, want its 1", got)
	}

	s = newSink(newRecordingSink(), clock.RealClock{})
	for n := range Total / PerNamespace {
		for i := range PerNamespace {
			_, _ = s.Create(event(fmt.Sprintf("busy-%d", n), fmt.Sprintf("e-%d", i)))
		}
	}
	for i := range 3 {
		_, _ = s.Create(event("quiet", fmt.Sprintf("e-%d", i)))
	}
	if got := len(s.queues["quiet"].writes); got != 3 {
		t.Errorf("the quiet namespace has %d writes queued with all queues together full, want its 3", got)
	}
	if s.queued != Total || dropped(s) != 3 {
		t.Errorf("%d writes queued and %d dropped, want %d and the 3 the busy namespaces gave up", s.queued, dropped(s), Total)
	}
	for name, q := range s.queues {
		if name == "quiet" {
			continue
		}
		if first := q.writes[0].event.Name; first != "e-0" {
			t.Errorf("namespace %s's first write is %s, want its oldest: a queue gives up its newest", name, first)
		}
	}
}

// A write failing in transport stays first in its queue and pauses every
// write, as client-go's writer does (the API server is away for all): the
// other namespaces' go on after the pause, it is tried again at its turn
// and given up after maxTries; a write the API server refused is not tried
// again.
func TestAWriteFailingInTransportPausesAll(t *testing.T) {
	api := newRecordingSink()
	var mu sync.Mutex
	tries := map[string]int{}
	api.fail = func(verb string, e *corev1.Event) error {
		mu.Lock()
		defer mu.Unlock()
		tries[e.Namespace]++
		switch e.Namespace {
		case "unreachable":
			return errors.New("connection refused")
		case "refused":
			return apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, e.Name, errors.New("no"))
		}
		return nil
	}
	triesOf := func(ns string) int {
		mu.Lock()
		defer mu.Unlock()
		return tries[ns]
	}
	clk := testingclock.NewFakeClock(time.Now())
	s := newSink(api, clk)
	_, _ = s.Create(event("unreachable", "e"))
	_, _ = s.Create(event("refused", "e"))
	_, _ = s.Create(event("quiet", "e"))
	run(t, s)
	waitFor(t, "the first try", func() bool { return triesOf("unreachable") == 1 })
	waitFor(t, "the writer to pause", clk.HasWaiters)
	if triesOf("refused")+triesOf("quiet") != 0 {
		t.Fatal("other writes were sent before the pause's end")
	}
	for try := 2; try <= maxTries; try++ {
		clk.Step(retryAfter)
		waitFor(t, fmt.Sprintf("try %d", try), func() bool { return triesOf("unreachable") == try })
		if try < maxTries {
			waitFor(t, "the writer to pause", clk.HasWaiters)
		}
	}
	waitFor(t, "the given-up write to leave its queue", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.queued == 0
	})
	if triesOf("unreachable") != maxTries || triesOf("refused") != 1 || triesOf("quiet") != 1 {
		t.Errorf("tries: %v, want %d for the unreachable write and 1 for the others", tries, maxTries)
	}
	if written := api.writes(); len(written) != 1 || written[0] != "create quiet/e" {
		t.Errorf("writes %q, want the quiet namespace's only", written)
	}
}

// Run returns once its context ends, however many writes are queued, and
// with one in flight in a sink whose requests end with the context too.
func TestRunStopsWithItsContext(t *testing.T) {
	api := newRecordingSink()
	api.gate = make(chan struct{})
	s := newSink(api, clock.RealClock{})
	for i := range 100 {
		_, _ = s.Create(event(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("e-%d", i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	api.gate <- struct{}{} // the first write goes through
	cancel()
	close(api.gate) // the one in flight, if any, returns
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := len(api.writes()); n > 2 {
		t.Errorf("%d writes sent, want at most the two under way when the context ended", n)
	}
}

// With client-go's broadcaster in front: the correlator's patches of an
// event repeated reach the API server after its creation, and a patch of an
// event the API server no longer has creates it, as client-go's sink does.
func TestTheBroadcastersCorrelationIsKept(t *testing.T) {
	api := newRecordingSink()
	s := newSink(api, clock.RealClock{})
	run(t, s)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(s)
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "test"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	for range 3 {
		recorder.Event(pod, corev1.EventTypeNormal, "Same", "same message")
	}
	waitFor(t, "3 writes", func() bool { return len(api.writes()) == 3 })
	written := api.writes()
	if written[0][:7] != "create " || written[1][:6] != "patch " || written[2][:6] != "patch " || written[1][6:] != written[0][7:] {
		t.Errorf("writes %q, want the event created, then patched twice", written)
	}

	api.mu.Lock()
	clear(api.events)
	api.mu.Unlock()
	recorder.Event(pod, corev1.EventTypeNormal, "Same", "same message")
	waitFor(t, "4 writes", func() bool { return len(api.writes()) == 4 })
	if w := api.writes()[3]; w != "create"+written[0][6:] {
		t.Errorf("write %q after the event was gone, want it created again", w)
	}
}

// The index of long queues stays what a look at every queue would say,
// through writes queued, sent and dropped: the longest queue it names is
// the longest there is.
func TestTheLongestQueueIsKnownWithoutALookAtEach(t *testing.T) {
	s := newSink(newRecordingSink(), clock.RealClock{})
	r := rand.New(rand.NewPCG(1, 2))
	full := 0
	for i := range 3000 {
		ns := fmt.Sprintf("ns-%d", r.IntN(Total/PerNamespace+2))
		switch {
		case r.IntN(3) > 0 || s.turns.Len() == 0:
			for range 1 + r.IntN(3*PerNamespace/4)*r.IntN(2) {
				_, _ = s.Create(event(ns, fmt.Sprintf("e-%d", i)))
			}
		default:
			next, w, _ := s.nextReady()
			s.send(next, w)
		}
		longest := 0
		for name, q := range s.queues {
			if n := len(q.writes); n >= 2 {
				longest = max(longest, n)
				if _, ok := s.long[n][name]; !ok {
					t.Fatalf("step %d: %s has %d writes queued, not indexed so", i, name, n)
				}
			}
		}
		if got := max(s.longest, 0); (longest >= 2 || got >= 2) && got != longest {
			t.Fatalf("step %d: longest indexed %d, want %d", i, got, longest)
		}
		if s.queued == Total {
			full++
		}
	}
	if full == 0 {
		t.Errorf("all queues together were never full: the longest was never asked for")
	}
}

// BenchmarkAWriteWithAllQueuesFull: all queues together full, spread over
// 10,000 namespaces of 2 writes each, each write of a namespace with none
// queued takes the place of the longest queue's newest.
func BenchmarkAWriteWithAllQueuesFull(b *testing.B) {
	s := newSink(newRecordingSink(), clock.RealClock{})
	for n := range Total / 2 {
		for i := range 2 {
			_, _ = s.Create(event(fmt.Sprintf("busy-%d", n), fmt.Sprintf("e-%d", i)))
		}
	}
	e := event("quiet", "e")
	b.ResetTimer()
	for range b.N {
		s.add(write{verb: create, event: e})
		// The quiet write leaves again, as sent, so that the next one
		// finds all queues full once more.
		q := s.queues["quiet"]
		q.writes = q.writes[:0]
		s.queued--
		s.lengthChanged("quiet", 1, 0)
		s.forgetIfEmpty("quiet")
	}
}
