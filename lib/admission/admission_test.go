package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func testController(seats int, bytes int64) *Controller {
	return New(Config{
		Levels: map[string]LevelConfig{
			System:   {Seats: seats, Bytes: bytes, StreamsPerFlow: 2, Streams: 100},
			Workload: {Seats: seats, Bytes: bytes, StreamsPerFlow: 2, Streams: 100},
		},
		QueueLength:  100,
		MaxQueueWait: 5 * time.Second,
		Expansion:    4,
	}, nil)
}

// waitQueued waits until flow has n waiters on s.
func waitQueued(t *testing.T, s *fairSemaphore, flow string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		got := 0
		if f := s.flows[flow]; f != nil {
			got = len(f.waiters)
		}
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow %s has %d waiters, want %d", flow, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A caller flooding a level delays only itself: another caller's call is
// granted at the next turn, not after the flood.
func TestAFloodingCallerDoesNotStarveAnother(t *testing.T) {
	c := testController(1, 1<<20)
	ctx := context.Background()
	first, err := c.Admit(ctx, Workload, "flooder", "")
	if err != nil {
		t.Fatal(err)
	}
	l := c.levels[Workload]
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	admit := func(flow string) {
		defer wg.Done()
		tk, err := c.Admit(ctx, Workload, flow, "")
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		order = append(order, flow)
		mu.Unlock()
		tk.Release()
	}
	for i := range 20 {
		wg.Add(1)
		go admit("flooder")
		waitQueued(t, l.seats, "flooder", i+1)
	}
	wg.Add(1)
	go admit("quiet")
	waitQueued(t, l.seats, "quiet", 1)
	first.Release()
	wg.Wait()
	for i, flow := range order {
		if flow == "quiet" {
			if i > 1 {
				t.Errorf("the quiet caller was served %d-th, after %d of the flood: %v", i+1, i, order)
			}
			return
		}
	}
	t.Fatalf("the quiet caller was never served: %v", order)
}

// A caller that arrives while another's backlog is being served gets the
// next grant: it waits for the seat in use, not for another of the
// backlog's calls too.
func TestACallerArrivingAtABacklogIsServedNext(t *testing.T) {
	s := newFairSemaphore(1, 100, prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}))
	if _, err := s.acquire(context.Background(), "flooder", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	served := make(chan string, 10)
	proceed := make(chan struct{})
	hold := func(flow string) {
		if _, err := s.acquire(context.Background(), flow, 1, time.Minute); err != nil {
			t.Error(err)
			return
		}
		served <- flow
		<-proceed
		s.release(1)
	}
	for i := range 5 {
		go hold("flooder")
		waitQueued(t, s, "flooder", i+1)
	}
	s.release(1)
	if got := <-served; got != "flooder" {
		t.Fatalf("served %s first, want the flooder's first waiter", got)
	}
	go hold("quiet")
	waitQueued(t, s, "quiet", 1)
	proceed <- struct{}{}
	if got := <-served; got != "quiet" {
		t.Errorf("served %s after the flood's grant, want the quiet caller", got)
	}
	close(proceed)
}

// Callers that come and go, each back as soon as it is served, cannot
// starve one that waits: it keeps its turn among them. And the flows
// remembered stay few.
func TestCallersThatComeAndGoDoNotStarveOneThatWaits(t *testing.T) {
	s := newFairSemaphore(1, 100, prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}))
	if _, err := s.acquire(context.Background(), "holder", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var served []string
	serve := func(flow string) bool {
		if _, err := s.acquire(context.Background(), flow, 1, time.Minute); err != nil {
			t.Error(err)
			return false
		}
		mu.Lock()
		served = append(served, flow)
		n := len(served)
		mu.Unlock()
		time.Sleep(200 * time.Microsecond) // the others come back meanwhile
		s.release(1)
		return n < 120
	}
	const waiting = 30
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() { serve("waiter") })
		waitQueued(t, s, "waiter", i+1)
	}
	for i := range 3 {
		flow := fmt.Sprint("comes-and-goes-", i)
		wg.Go(func() {
			for serve(flow) {
			}
		})
		waitQueued(t, s, flow, 1)
	}
	s.release(1)
	wg.Wait()
	// Four flows: the waiter's turn comes within every four grants while
	// it has calls waiting (one more for ties).
	since, left := 0, waiting
	for i, flow := range served {
		if flow == "waiter" {
			since, left = 0, left-1
			continue
		}
		if since++; left > 0 && since > 4 {
			t.Fatalf("the waiter, with %d calls waiting, was passed over %d times in a row at grant %d: %v", left, since, i, served)
		}
	}
	if n := len(s.flows); n != 0 {
		t.Errorf("%d flows remembered after everything was served", n)
	}
}

// Callers that each come once, beside one that keeps coming, are forgotten:
// the flows remembered stay few.
func TestOneTimeCallersAreForgotten(t *testing.T) {
	s := newFairSemaphore(1, 100, prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}))
	stop := make(chan struct{})
	keepsComing := make(chan struct{})
	go func() {
		defer close(keepsComing)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.acquire(context.Background(), "keeps-coming", 1, time.Minute); err != nil {
				t.Error(err)
				return
			}
			s.release(1)
		}
	}()
	most := 0
	for i := range 2000 {
		if _, err := s.acquire(context.Background(), fmt.Sprint("once-", i), 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		most = max(most, len(s.flows))
		s.mu.Unlock()
		s.release(1)
	}
	close(stop)
	<-keepsComing
	if most > 200 {
		t.Errorf("%d flows remembered at once among 2,000 one-time callers", most)
	}
	if n := len(s.flows); n != 0 {
		t.Errorf("%d flows remembered after everything was served", n)
	}
}

// Each priority level has its budgets: a full workload level leaves the
// system level's seats free.
func TestLevelsAreIndependent(t *testing.T) {
	c := testController(1, 1<<20)
	held, err := c.Admit(context.Background(), Workload, "outsider", "")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tk, err := c.Admit(ctx, System, "executor", "")
	if err != nil {
		t.Fatalf("system level blocked by the workload level: %v", err)
	}
	tk.Release()
}

// A class of RPC takes at most its seats of a level: a flood of reads, even
// from many callers, leaves a seat to a write; without classes it does not.
func TestAClassFloodLeavesSeatsToTheOthers(t *testing.T) {
	c := New(Config{
		Levels:       map[string]LevelConfig{Workload: {Seats: 4, ClassSeats: 3, Bytes: 1 << 20, StreamsPerFlow: 1, Streams: 1}},
		QueueLength:  100,
		MaxQueueWait: 5 * time.Second,
		Expansion:    1,
	}, nil)
	var held []*Ticket
	for i := range 3 {
		tk, err := c.Admit(context.Background(), Workload, fmt.Sprintf("reader-%d", i), "read")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, tk)
	}
	// A fourth read waits: its class has its three seats.
	readCtx, cancelRead := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelRead()
	if _, err := c.Admit(readCtx, Workload, "reader-3", "read"); err == nil {
		t.Fatal("a fourth read admitted beyond its class's three seats")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	write, err := c.Admit(ctx, Workload, "writer", "write")
	if err != nil {
		t.Fatalf("a write beside three reads: %v", err)
	}
	write.Release()
	for _, tk := range held {
		tk.Release()
	}
	// The class's seats come back with the calls.
	again, err := c.Admit(ctx, Workload, "reader-0", "read")
	if err != nil {
		t.Fatalf("a read after the others: %v", err)
	}
	again.Release()
}

func retryDelay(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

func TestShedCallsAreResourceExhaustedWithRetryInfo(t *testing.T) {
	c := New(Config{
		Levels:       map[string]LevelConfig{Workload: {Seats: 1, Bytes: 1000, StreamsPerFlow: 1, Streams: 2}},
		QueueLength:  1,
		MaxQueueWait: time.Second, // long enough to tell a wait from none on a busy machine
		Expansion:    10,
	}, nil)
	ctx := context.Background()
	held, err := c.Admit(ctx, Workload, "a", "")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	t.Run("queue wait exceeded", func(t *testing.T) {
		_, err := c.Admit(ctx, Workload, "a", "")
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
		if d, ok := retryDelay(err); !ok || d <= 0 {
			t.Errorf("RetryInfo %v %v", d, ok)
		}
	})
	t.Run("queue full", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := c.Admit(ctx, Workload, "a", "")
			done <- err
		}()
		waitQueued(t, c.levels[Workload].seats, "a", 1)
		_, err := c.Admit(ctx, Workload, "a", "")
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
		if _, ok := retryDelay(err); !ok {
			t.Error("no RetryInfo")
		}
		<-done
	})
	t.Run("a request that can never fit: at once, naming the limit, no retry", func(t *testing.T) {
		start := time.Now()
		err := held.Charge(ctx, 101) // 1010 > 1000
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
		if _, ok := retryDelay(err); ok {
			t.Error("RetryInfo on a request that can never fit")
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "1000") {
			t.Errorf("message %q does not name the limit", msg)
		}
		if time.Since(start) > 500*time.Millisecond {
			t.Error("waited before refusing")
		}
	})
	t.Run("streams per caller", func(t *testing.T) {
		s, err := c.OpenStream(Workload, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.OpenStream(Workload, "a", nil); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("second stream: %v, want ResourceExhausted", err)
		}
		other, err := c.OpenStream(Workload, "b", nil)
		if err != nil {
			t.Fatalf("another caller's stream: %v", err)
		}
		// Two streams open, the level's most: a third caller waits for one.
		if _, err := c.OpenStream(Workload, "c", nil); status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "2 streams are open") {
			t.Fatalf("a third caller's stream beyond the level's 2: %v, want ResourceExhausted naming the limit", err)
		}
		other.Release()
		s.Release()
		again, err := c.OpenStream(Workload, "a", nil)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		again.Release()
	})
}

// Bytes are charged at the expansion factor and given back on release; a
// caller waiting for bytes is served once they are.
func TestBytesAreChargedAndGivenBack(t *testing.T) {
	c := testController(10, 1000)
	ctx := context.Background()
	a, _ := c.Admit(ctx, Workload, "a", "")
	if err := a.Charge(ctx, 200); err != nil { // 800 of 1000
		t.Fatal(err)
	}
	b, _ := c.Admit(ctx, Workload, "b", "")
	got := make(chan error, 1)
	go func() { got <- b.Charge(ctx, 100) }() // 400: waits
	waitQueued(t, c.levels[Workload].bytes, "b", 1)
	a.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used := c.levels[Workload].bytes.inUse(); used != 400 {
		t.Errorf("bytes in use %d, want 400", used)
	}
	b.Release()
	b.Release() // twice is once
	if used := c.levels[Workload].bytes.inUse(); used != 0 {
		t.Errorf("bytes in use %d after release, want 0", used)
	}
	if seats := c.levels[Workload].seats.inUse(); seats != 0 {
		t.Errorf("seats in use %d after release, want 0", seats)
	}
}

// A stream's message held past the next (Hold) stays charged until its
// release, which gives it back once; the next message's Uncharge leaves it.
func TestAHeldMessageStaysCharged(t *testing.T) {
	c := testController(10, 1000)
	ctx := context.Background()
	s, err := c.OpenStream(System, "executor", nil)
	if err != nil {
		t.Fatal(err)
	}
	bytes := c.levels[System].bytes
	if err := s.Charge(ctx, 50); err != nil { // 200
		t.Fatal(err)
	}
	release := s.Hold()
	s.Uncharge() // the handler asks for the next message
	if used := bytes.inUse(); used != 200 {
		t.Fatalf("bytes in use %d while held, want 200", used)
	}
	if err := s.Charge(ctx, 25); err != nil { // 100 more
		t.Fatal(err)
	}
	release()
	release()
	if used := bytes.inUse(); used != 100 {
		t.Fatalf("bytes in use %d once released, want the next message's 100", used)
	}
	s.Release()
	if used := bytes.inUse(); used != 0 {
		t.Fatalf("bytes in use %d after the stream ended, want 0", used)
	}
}

// A stream's next message waiting for bytes its own held messages take
// waits past the queue wait until they come back, rather than being refused
// (which would end the stream); with nothing held it is refused as before.
func TestAStreamWaitsForItsOwnHeldMessages(t *testing.T) {
	c := testController(10, 1000)
	c.cfg.MaxQueueWait = 20 * time.Millisecond
	ctx := context.Background()
	s, err := c.OpenStream(System, "executor", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.Charge(ctx, 200); err != nil { // 800 of 1000
		t.Fatal(err)
	}
	release := s.Hold()
	s.Uncharge()
	time.AfterFunc(100*time.Millisecond, release) // five queue waits later
	if err := s.Charge(ctx, 100); err != nil {    // 400: waits for the 800
		t.Fatalf("the next message, its stream's own held: %v", err)
	}
	s.Uncharge()
	other, err := c.OpenStream(System, "other", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if err := s.Charge(ctx, 200); err != nil {
		t.Fatal(err)
	}
	if err := other.Charge(ctx, 100); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a stream holding nothing, beside another's bytes: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// Property: under random load from random flows, a flow with a call waiting
// is served before any other flow is served twice, and everything is given
// back.
func TestPropertyFlowsAreServedInTurn(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			// One unit: the order of service is then the order of grants.
			const capacity = 1
			s := newFairSemaphore(capacity, 1000, prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}))
			flows := 2 + r.IntN(5)
			// Hold the capacity, queue random waiters, then release one
			// grant at a time and record the order of service.
			if _, err := s.acquire(context.Background(), "holder", capacity, time.Minute); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var served []string
			var wg sync.WaitGroup
			queued := map[string]int{}
			for range 10 + r.IntN(40) {
				flow := fmt.Sprint("f", r.IntN(flows))
				queued[flow]++
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.acquire(context.Background(), flow, 1, time.Minute); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					served = append(served, flow)
					mu.Unlock()
					s.release(1)
				}()
				waitQueued(t, s, flow, queued[flow])
			}
			s.release(1)
			wg.Wait()
			if s.inUse() != 0 {
				t.Fatalf("in use %d after everything was released", s.inUse())
			}
			// Between two services of one flow, while it still had
			// waiters, no other flow is served twice.
			left := queued
			for i, f := range served {
				left[f]--
				if left[f] == 0 {
					continue
				}
				seen := map[string]int{}
				for _, g := range served[i+1:] {
					if g == f {
						break
					}
					if seen[g]++; seen[g] > 1 {
						t.Fatalf("flow %s waited while %s was served twice: %v", f, g, served)
					}
				}
			}
		})
	}
}

// A call that waits for its class's seat, then for the level's, waits at
// most the queue wait in all.
func TestTheClassAndLevelWaitsShareTheQueueWait(t *testing.T) {
	const queueWait = 300 * time.Millisecond
	c := New(Config{
		Levels:       map[string]LevelConfig{Workload: {Seats: 2, ClassSeats: 1, Bytes: 1 << 20, StreamsPerFlow: 1, Streams: 1}},
		QueueLength:  10,
		MaxQueueWait: queueWait,
		Expansion:    1,
	}, nil)
	ctx := context.Background()
	read, err := c.Admit(ctx, Workload, "reader", "read")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admit(ctx, Workload, "writer", "write"); err != nil {
		t.Fatal(err)
	}
	// A call of a third class waits for the level's seat, ahead of any read.
	go func() { _, _ = c.Admit(ctx, Workload, "computer", "compute") }()
	waitQueued(t, c.levels[Workload].seats, "computer", 1)
	// The read's class seat frees after 200 ms; the level seat it frees
	// goes to the call waiting before.
	time.AfterFunc(200*time.Millisecond, read.Release)
	start := time.Now()
	_, err = c.Admit(ctx, Workload, "second-reader", "read")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the read: %v, want ResourceExhausted", err)
	}
	if waited := time.Since(start); waited > queueWait+150*time.Millisecond {
		t.Errorf("waited %s for the class then the level, want at most about the queue wait %s", waited, queueWait)
	}
}

// A stream's own held bytes given back just as one of its waits ends are
// its: the charge waits once more for them rather than fail, whatever the
// timing (the held bytes come back at random points around the queue
// waits' ends).
func TestAStreamGetsItsOwnHeldBytesGivenBackAtAnyTime(t *testing.T) {
	c := testController(10, 1000)
	c.cfg.MaxQueueWait = time.Millisecond
	ctx := context.Background()
	s, err := c.OpenStream(System, "executor", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		if err := s.Charge(ctx, 200); err != nil { // 800 of 1000
			t.Fatal(err)
		}
		release := s.Hold()
		s.Uncharge()
		time.AfterFunc(time.Duration(1000+r.IntN(2000))*time.Microsecond, release)
		if err := s.Charge(ctx, 100); err != nil { // 400: waits for the 800
			t.Fatalf("charge %d, its stream's own held given back meanwhile: %v", i, err)
		}
		s.Uncharge()
	}
}
