package svc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// A stream's requests run in the order they came for each Job, those of
// different Jobs at once, and never more pending than the bound: along
// random arrivals of random lengths (run with -race).
func TestStreamWorkKeepsEachJobsOrder(t *testing.T) {
	const bound = 4
	r := rand.New(rand.NewPCG(9, 10))
	w := newStreamWork(bound)
	var (
		mu       sync.Mutex
		done     = map[string][]int{}
		pending  atomic.Int32
		overlaps atomic.Int32
		running  atomic.Int32
	)
	sent := map[string][]int{}
	for i := range 300 {
		job := fmt.Sprint("job-", r.IntN(6))
		sent[job] = append(sent[job], i)
		pause := time.Duration(r.IntN(300)) * time.Microsecond
		w.reserve()
		if n := pending.Add(1); n > bound {
			t.Fatalf("%d requests pending, bound %d", n, bound)
		}
		w.run(job, func() {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			time.Sleep(pause)
			mu.Lock()
			done[job] = append(done[job], i)
			mu.Unlock()
			running.Add(-1)
			pending.Add(-1)
		})
	}
	w.wait()
	for job, order := range sent {
		if fmt.Sprint(done[job]) != fmt.Sprint(order) {
			t.Fatalf("%s's requests ran in the order %v, came in %v", job, done[job], order)
		}
	}
	if overlaps.Load() == 0 {
		t.Error("no two Jobs' requests ever ran at once")
	}
	if n := w.workers.Load(); n > bound {
		t.Errorf("%d workers started, bound %d", n, bound)
	}
	w.close()
}

// With a bound of one, requests run one after another, in the order they
// came, whatever their Jobs: an outside caller's stream.
func TestStreamWorkOfOneRunsInOrder(t *testing.T) {
	w := newStreamWork(1)
	var order []int
	for i := range 50 {
		w.reserve()
		w.run(fmt.Sprint("job-", i%5), func() { order = append(order, i) })
	}
	w.wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("request %d ran %dth", got, i)
		}
	}
}

// Requests that come one after another, each answered before the next, are
// run by one worker, whatever their Jobs; close ends the workers.
func TestStreamWorkReusesItsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	w := newStreamWork(4)
	for i := range 100 {
		done := make(chan struct{})
		w.reserve()
		w.run(fmt.Sprint("job-", i%7), func() { close(done) })
		<-done
		for len(w.pending) > 0 { // the worker gives the room back after its work
			runtime.Gosched()
		}
	}
	w.wait()
	if got := w.workers.Load(); got != 1 {
		t.Errorf("%d workers started for requests one after another, want 1", got)
	}
	w.close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after close, %d before", after, before)
	}
}

// The Job a request is read to be before it is decoded is the one decoding
// finds, however its fields are written: in full, as a delta, repeated
// (messages merge, the last value wins); both is none.
func TestTheJobOfAnEncodedRequestIsTheDecodedOne(t *testing.T) {
	full := func(uid string) *jobplanev1.StreamPlanSyncRequest {
		return &jobplanev1.StreamPlanSyncRequest{Id: "f-" + uid, Request: &jobplanev1.PlanSyncRequest{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Uid: uid, Name: "n"}}}}
	}
	delta := func(uid string) *jobplanev1.StreamPlanSyncRequest {
		return &jobplanev1.StreamPlanSyncRequest{Id: "d-" + uid, Delta: &jobplanev1.PlanSyncDelta{BaseId: "1", JobUid: uid}}
	}
	noUID := &jobplanev1.StreamPlanSyncRequest{Id: "x", Request: &jobplanev1.PlanSyncRequest{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: "n"}}}}
	for _, parts := range [][]*jobplanev1.StreamPlanSyncRequest{
		{full("a")}, {delta("b")}, {full("a"), full("c")}, {delta("b"), delta("d")}, {full("a"), noUID},
		{noUID}, {full("a"), delta("b")},
	} {
		var b []byte
		for _, p := range parts {
			b = append(b, deterministic(t, p)...)
		}
		decoded := &jobplanev1.StreamPlanSyncRequest{}
		if err := proto.Unmarshal(b, decoded); err != nil {
			t.Fatal(err)
		}
		job, one := jobOfEncoded(b)
		want := decoded.GetDelta().GetJobUid()
		if decoded.GetDelta() == nil {
			want = decoded.GetRequest().GetJob().GetMetadata().GetUid()
		}
		both := decoded.GetDelta() != nil && decoded.GetRequest() != nil
		if one == both || (one && job != want) {
			t.Errorf("%v: read as Job %q (one: %v), decoded as %q (both: %v)", parts, job, one, want, both)
		}
		if id := idOfEncoded(b); id != decoded.GetId() {
			t.Errorf("%v: id read as %q, decoded as %q", parts, id, decoded.GetId())
		}
	}
}
