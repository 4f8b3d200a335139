package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairorder"
)

// An executor slow for one namespace's Jobs holds every worker with that
// namespace's due CronJobs; another namespace's run waits for one of those
// calls to be given up, about a second, not for the calls' timeout. The run
// given up is still delivered once: its Job, created meanwhile, is found by
// the next sync.
func TestASlowNamespaceGivesAWorkerUpToAnother(t *testing.T) {
	const workers = 5
	f := newFixture(t)
	f.executor.slowFor("slow")
	f.c.seats.setWorkers(workers)
	f.clock.SetTime(testCreated.Add(35 * time.Second)) // 10:01:05: every CronJob is due
	for i := range workers + 1 {
		cj := everyMinute(fmt.Sprintf("hourly-%d", i), func(cj *cronapi.CronJob) { cj.Namespace = "slow" })
		f.putCronJob(cj)
		f.c.queue.Add(cronJobKey(cronapi.APIVersion, cj.Namespace, cj.Name))
	}

	ctx := context.Background()
	var wg sync.WaitGroup
	yielded := make(chan int, workers)
	for w := range workers {
		wg.Go(func() {
			f.c.processNextWorkItem(ctx)
			yielded <- w
		})
	}
	f.waitBlocked(workers)
	quiet := everyMinute("nightly", func(cj *cronapi.CronJob) { cj.Namespace = "quiet" })
	f.putCronJob(quiet)
	f.c.queue.Add(cronJobKey(cronapi.APIVersion, quiet.Namespace, quiet.Name))

	if f.c.seats.giveUpACall() != nil {
		t.Fatalf("a call was given up before it had lasted %v", yieldAfterHeld)
	}
	f.clock.Step(yieldAfterHeld)
	if f.c.seats.giveUpACall() == nil {
		t.Fatalf("no call was given up: every worker busy with namespace slow, namespace quiet waiting")
	}
	if f.c.seats.giveUpACall() != nil {
		t.Errorf("a second call was given up before the first one's worker was free")
	}
	<-yielded
	if got := f.c.queue.Len(); got != 3 {
		t.Errorf("%d keys queued after the call was given up, want 3 (slow's sixth, quiet's, and the one given up)", got)
	}

	// The freed worker takes the quiet namespace's CronJob, whose run is
	// handed over while the slow namespace's four calls still wait.
	f.c.processNextWorkItem(ctx)
	f.executor.mu.Lock()
	quietRun := slices.IndexFunc(f.executor.submitted, func(job string) bool { return strings.HasPrefix(job, "nightly-") })
	blocked := f.executor.blocked
	f.executor.mu.Unlock()
	if quietRun < 0 {
		t.Fatalf("the quiet namespace's run was not handed over by the worker given up")
	}
	if blocked != workers-1 {
		t.Errorf("%d of the slow namespace's calls waiting, want %d", blocked, workers-1)
	}
	for _, e := range f.events() {
		if strings.Contains(e, "Failed") {
			t.Errorf("event %q: a call given up is no failure", e)
		}
	}

	// Once the executor answers, every slow CronJob's run is delivered
	// once, the one given up included.
	close(f.executor.unblocked)
	wg.Wait()
	for f.c.queue.Len() > 0 {
		f.c.processNextWorkItem(ctx)
	}
	jobs, err := f.kube.BatchV1().Jobs("slow").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(jobs.Items); got != workers+1 {
		t.Errorf("%d Jobs in namespace slow, want one run of each of its %d CronJobs", got, workers+1)
	}
	for i := range workers + 1 {
		if active := f.cronJobIn("slow", fmt.Sprintf("hourly-%d", i)).Status.Active; len(active) != 1 {
			t.Errorf("hourly-%d has %d active runs, want 1", i, len(active))
		}
	}
	// The run given up had its Job made (this executor creates before it
	// answers): the next sync finds it unlisted and says so, as the
	// reference does when a creation's answer was lost.
	var warnings []string
	for _, e := range f.events() {
		if strings.HasPrefix(e, "Warning") {
			warnings = append(warnings, e)
		}
	}
	if !slices.Equal(warnings, []string{"Warning UnexpectedJob"}) {
		t.Errorf("warnings %v, want the one UnexpectedJob of the run given up", warnings)
	}
}

// Which call is given up, by who holds the workers and whose turn is next.
func TestWhichCallIsGivenUp(t *testing.T) {
	longAgo := 2 * yieldAfterHeld
	for _, tc := range []struct {
		name string
		// holds are the namespaces of the workers' seats, with how long
		// each seat's call has lasted (0: no call in flight).
		holds   []held
		workers int
		next    string
		want    string // the namespace of the call given up; "" none
	}{
		{"one namespace holds every worker", []held{{"a", longAgo}, {"a", longAgo}, {"a", longAgo}}, 3, "b", "a"},
		{"a worker is idle", []held{{"a", longAgo}, {"a", longAgo}}, 3, "b", ""},
		{"nobody waits", []held{{"a", longAgo}, {"a", longAgo}}, 2, "", ""},
		{"the next turn is the holder's own", []held{{"a", longAgo}, {"a", longAgo}}, 2, "a", ""},
		{"the calls are young", []held{{"a", yieldAfterHeld / 2}, {"a", yieldAfterHeld / 2}}, 2, "b", ""},
		{"the holder's syncs call nothing", []held{{"a", 0}, {"a", 0}}, 2, "b", ""},
		{"a namespace's last worker", []held{{"a", longAgo}, {"b", longAgo}}, 2, "c", ""},
		{"holds one apart: handing one over would swap them", []held{{"a", longAgo}, {"a", longAgo}, {"a", longAgo}, {"b", longAgo}, {"b", longAgo}}, 5, "b", ""},
		{"holds two apart", []held{{"a", longAgo}, {"a", longAgo}, {"a", longAgo}, {"b", longAgo}}, 4, "b", "a"},
		{"the namespace holding the most, not the youngest call", []held{{"a", yieldAfterHeld}, {"a", yieldAfterHeld}, {"b", longAgo}, {"b", longAgo}, {"b", longAgo}}, 5, "c", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, given := seatsHolding(t, tc.holds, tc.workers, tc.next)
			if got := s.giveUpACall() != nil; got != (tc.want != "") {
				t.Fatalf("giveUpACall() = %v, want %v", got, tc.want != "")
			}
			if got := given(); got != tc.want {
				t.Errorf("gave up a call of %q, want %q", got, tc.want)
			}
		})
	}
}

// The youngest call of the namespace old enough is the one given up, and no
// other until its worker is free; then the namespace is spared for four
// times what its call had lasted, and after that another call may be.
func TestCallsAreGivenUpOneAtATimeYoungestFirstThenSpared(t *testing.T) {
	s, _ := seatsHolding(t, nil, 3, "b")
	clk := s.clock.(*testingclock.FakeClock)
	var calls []context.Context
	var st []*seat
	for range 3 {
		ctx, seat := s.take(context.Background(), "a/x")
		call, done := s.callExecutor(ctx)
		t.Cleanup(done)
		calls, st = append(calls, call), append(st, seat)
		clk.Step(yieldAfterHeld)
	}
	given := s.giveUpACall()
	if given == nil || !errors.Is(callError(calls[2], status.FromContextError(context.Canceled).Err()), errYielded) {
		t.Fatalf("the youngest call was not given up")
	}
	if given.lasted != yieldAfterHeld {
		t.Errorf("the call given up had lasted %v, want %v", given.lasted, yieldAfterHeld)
	}
	if s.giveUpACall() != nil {
		t.Fatalf("a second call was given up before the first one's worker was free")
	}
	if calls[0].Err() != nil || calls[1].Err() != nil {
		t.Errorf("calls not given up were cancelled")
	}
	if err := callError(calls[1], errors.New("refused")); errors.Is(err, errYielded) {
		t.Errorf("a call not given up reads as given up: %v", err)
	}
	if err := callError(calls[2], errors.New("already exists")); errors.Is(err, errYielded) {
		t.Errorf("a call given up that failed on its own reads as given up: %v", err)
	}

	// Its worker free, a's third CronJob takes it again, with a call as old.
	s.release(st[2])
	ctx, _ := s.take(context.Background(), "a/y")
	call, done := s.callExecutor(ctx)
	t.Cleanup(done)
	clk.Step(yieldAfterHeld)
	if s.giveUpACall() != nil {
		t.Errorf("a call was given up while its namespace was spared")
	}
	clk.Step(sparedPerLost*yieldAfterHeld - yieldAfterHeld)
	if s.giveUpACall() == nil || !errors.Is(context.Cause(call), errYielded) {
		t.Errorf("no call was given up once the namespace was spared no longer")
	}
}

// A sync whose call was given up makes no other call: a call that
// succeeded as it was given up leaves the sync's later calls failing at
// once, so it yields its worker.
func TestASeatGivenUpMakesNoMoreCalls(t *testing.T) {
	s, _ := seatsHolding(t, nil, 1, "")
	ctx, st := s.take(context.Background(), "a/x")
	st.givenUp = true
	call, done := s.callExecutor(ctx)
	defer done()
	if err := callError(call, status.FromContextError(call.Err()).Err()); !errors.Is(err, errYielded) {
		t.Errorf("a call of a seat given up: %v, want it given up at once", err)
	}
}

// Seats.run looks at the calls on its clock's ticks, and reports what it
// gave up.
func TestRunGivesUpOnItsTicks(t *testing.T) {
	s, given := seatsHolding(t, []held{{"a", 2 * yieldAfterHeld}, {"a", 2 * yieldAfterHeld}}, 2, "b")
	clk := s.clock.(*testingclock.FakeClock)
	ctx, cancel := context.WithCancel(context.Background())
	reported := make(chan *givenUp, 1)
	stopped := make(chan struct{})
	go func() {
		s.run(ctx, func(g *givenUp) { reported <- g })
		close(stopped)
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(yieldCheckEvery)
	select {
	case g := <-reported:
		if g.namespace != "a" || g.to != "b" || given() != "a" {
			t.Errorf("reported %+v, gave up a call of %q; want one of a's, for b", g, given())
		}
	case <-time.After(10 * time.Second):
		t.Errorf("nothing given up at the tick")
	}
	cancel()
	<-stopped
}

// A Replace whose deletion was given up keeps the old Job active and
// creates nothing, without a Failed event; the sync yields its worker.
func TestAReplaceGivenUpKeepsTheOldJob(t *testing.T) {
	f, previous := replacingPreviousRun(t)
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	ctx, st := f.c.seats.take(context.Background(), testNamespace+"/cj")
	st.givenUp = true
	_, err := f.c.sync(ctx, testNamespace+"/cj")
	if !errors.Is(err, errYielded) {
		t.Fatalf("sync: %v, want it to yield its worker", err)
	}
	got := f.cronJob("cj")
	if len(f.executor.deleted) != 0 || len(f.executor.submitted) != 0 || len(got.Status.Active) != 1 || got.Status.Active[0].UID != previous.UID {
		t.Errorf("deleted %v, submitted %v, active %+v; want nothing deleted or created, the old Job still active", f.executor.deleted, f.executor.submitted, got.Status.Active)
	}
	for _, e := range f.events() {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			t.Errorf("event %q: a call given up is no failure", e)
		}
	}
}

// A call made outside a worker's sync (Trigger, Backfill) is never given up.
func TestACallOutsideAWorkerIsNeverGivenUp(t *testing.T) {
	s, _ := seatsHolding(t, []held{{"a", 0}, {"a", 0}}, 2, "b")
	call, done := s.callExecutor(context.Background())
	defer done()
	s.clock.(*testingclock.FakeClock).Step(time.Minute)
	if s.giveUpACall() != nil || call.Err() != nil {
		t.Errorf("a call without a worker's seat was given up")
	}
	if deadline, ok := call.Deadline(); !ok || time.Until(deadline) > executorCallTimeout {
		t.Errorf("the call is not bounded by %v", executorCallTimeout)
	}
}

type held struct {
	namespace string
	lasted    time.Duration
}

// seatsHolding returns seats of workers, held as holds says, with next's
// key queued, and a function naming the namespace of the call given up.
func seatsHolding(t *testing.T, holds []held, workers int, next string) (*seats, func() string) {
	t.Helper()
	clk := testingclock.NewFakeClock(testCreated)
	order := fairorder.NewOrder(nil)
	if next != "" {
		order.Push(next + "/waiting")
	}
	s := newSeats(clk, order)
	s.setWorkers(workers)
	calls := map[string][]context.Context{}
	for _, h := range holds {
		ctx, _ := s.take(context.Background(), h.namespace+"/x")
		if h.lasted == 0 {
			continue
		}
		clk.Step(-h.lasted)
		call, done := s.callExecutor(ctx)
		t.Cleanup(done)
		clk.Step(h.lasted)
		calls[h.namespace] = append(calls[h.namespace], call)
	}
	return s, func() string {
		for ns, cs := range calls {
			for _, call := range cs {
				if errors.Is(context.Cause(call), errYielded) {
					return ns
				}
			}
		}
		return ""
	}
}

// waitBlocked waits until n submissions wait on the slow executor.
func (f *fixture) waitBlocked(n int) {
	f.t.Helper()
	for range 1000 {
		f.executor.mu.Lock()
		blocked := f.executor.blocked
		f.executor.mu.Unlock()
		if blocked == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.t.Fatalf("%d submissions never waited on the executor", n)
}
