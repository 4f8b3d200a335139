package jobstate

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/jobplane/jobplane/lib/plan"
)

const key = "ns/job"

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestState(t *testing.T) {
	failedAt := t0.Add(-time.Minute)
	backoff := plan.BackoffRecord{FailuresAfterLastSuccess: 2, LastFailureTime: &failedAt}
	cases := []struct {
		name string
		// ops run in order on an empty store whose clock reads t0.
		ops  func(s *Store)
		want plan.State
	}{{
		name: "a Job never seen has nothing pending",
		ops:  func(*Store) {},
		want: plan.State{},
	}, {
		name: "expected creations are pending since the clock's now",
		ops:  func(s *Store) { s.ExpectCreations(key, 3) },
		want: plan.State{Expectations: plan.Expectations{PendingCreations: 3, RecordedAt: t0}},
	}, {
		name: "observed creations lower the pending creations",
		ops: func(s *Store) {
			s.ExpectCreations(key, 3)
			s.CreationsObserved(key, 1)
			s.CreationsObserved(key, 1)
		},
		want: plan.State{Expectations: plan.Expectations{PendingCreations: 1, RecordedAt: t0}},
	}, {
		name: "observed deletions lower the pending deletions",
		ops: func(s *Store) {
			s.ExpectDeletions(key, 2)
			s.DeletionsObserved(key, 1)
		},
		want: plan.State{Expectations: plan.Expectations{PendingDeletions: 1, RecordedAt: t0}},
	}, {
		name: "new expectations replace the earlier ones",
		ops: func(s *Store) {
			s.ExpectCreations(key, 3)
			s.ExpectDeletions(key, 2)
		},
		want: plan.State{Expectations: plan.Expectations{PendingDeletions: 2, RecordedAt: t0}},
	}, {
		name: "observations without expectations are ignored",
		ops: func(s *Store) {
			s.CreationsObserved(key, 1)
			s.DeletionsObserved(key, 1)
		},
		want: plan.State{},
	}, {
		name: "more observations than expected go below zero, as the reference's counters",
		ops: func(s *Store) {
			s.ExpectCreations(key, 1)
			s.CreationsObserved(key, 2)
		},
		want: plan.State{Expectations: plan.Expectations{PendingCreations: -1, RecordedAt: t0}},
	}, {
		name: "finalizer removals in flight are listed sorted until observed",
		ops: func(s *Store) {
			s.ExpectFinalizersRemoved(key, []types.UID{"c", "a"})
			s.ExpectFinalizersRemoved(key, []types.UID{"b"})
			s.FinalizerRemovalObserved(key, "c")
		},
		want: plan.State{FinalizerRemovalsInFlight: []types.UID{"a", "b"}},
	}, {
		name: "the backoff record is kept",
		ops:  func(s *Store) { s.SetBackoff(key, backoff) },
		want: plan.State{Backoff: &backoff},
	}, {
		name: "release drops expectations and backoff but keeps removals in flight",
		ops: func(s *Store) {
			s.ExpectCreations(key, 2)
			s.SetBackoff(key, backoff)
			s.ExpectFinalizersRemoved(key, []types.UID{"a"})
			s.Release(key)
		},
		want: plan.State{FinalizerRemovalsInFlight: []types.UID{"a"}},
	}, {
		name: "after release, observations are ignored until expectations are set again",
		ops: func(s *Store) {
			s.ExpectCreations(key, 2)
			s.Release(key)
			s.CreationsObserved(key, 1)
		},
		want: plan.State{},
	}, {
		name: "forget drops everything, removals in flight included",
		ops: func(s *Store) {
			s.ExpectCreations(key, 2)
			s.SetBackoff(key, backoff)
			s.ExpectFinalizersRemoved(key, []types.UID{"a"})
			s.Forget(key)
		},
		want: plan.State{},
	}, {
		name: "other Jobs are not affected",
		ops: func(s *Store) {
			s.ExpectCreations("ns/other", 2)
			s.ExpectFinalizersRemoved("ns/other", []types.UID{"a"})
			s.SetBackoff("ns/other", backoff)
		},
		want: plan.State{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(testingclock.NewFakePassiveClock(t0))
			tc.ops(s)
			if got := s.State(key); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("State = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReleaseForgetsJobWithoutRemovals(t *testing.T) {
	s := New(testingclock.NewFakePassiveClock(t0))
	s.ExpectCreations(key, 1)
	s.Release(key)
	if _, ok := s.jobs[key]; ok {
		t.Errorf("released Job with no removals in flight still held: %+v", s.jobs[key])
	}
	s.ExpectFinalizersRemoved(key, []types.UID{"a"})
	s.Release(key)
	if _, ok := s.jobs[key]; !ok {
		t.Errorf("released Job with a removal in flight was dropped")
	}
}

// A finishing Job's deletions are in flight from their tracking to their
// observation, across the Job's release; the released Job is forgotten once
// the last is observed.
func TestDeletionsInFlight(t *testing.T) {
	s := New(testingclock.NewFakePassiveClock(t0))
	s.TrackDeletions(key, []types.UID{"a", "b"})
	if !s.DeletionInFlight(key, "a") || !s.DeletionInFlight(key, "b") || s.DeletionInFlight(key, "c") || s.DeletionInFlight("ns/other", "a") {
		t.Fatal("want a and b in flight for the Job, and nothing else")
	}
	if st := s.State(key); !reflect.DeepEqual(st, plan.State{}) {
		t.Errorf("state %+v, want nothing told to the planner", st)
	}
	s.Release(key)
	s.ForgetDeletion(key, "a")
	if s.DeletionInFlight(key, "a") || !s.DeletionInFlight(key, "b") {
		t.Error("want only b in flight after a's observation, the release notwithstanding")
	}
	s.ForgetDeletion(key, "b")
	if _, ok := s.jobs[key]; ok {
		t.Errorf("released Job with nothing in flight still held: %+v", s.jobs[key])
	}
}

// The reference's TestImmediateJobRecreation: a Job deleted and created
// again with the same name before a sync saw it gone does not inherit the
// old one's backoff record (nor its awaited writes); expectations stay
// until that sync.
func TestJobDeletedDropsTheBackoffRecord(t *testing.T) {
	s := New(testingclock.NewFakePassiveClock(t0))
	last := t0
	s.SetBackoff(key, plan.BackoffRecord{FailuresAfterLastSuccess: 3, LastFailureTime: &last})
	s.WroteAt(key, Pods, "7")
	s.ExpectCreations(key, 1)
	s.JobDeleted(key)
	st := s.State(key)
	if st.Backoff != nil {
		t.Errorf("backoff record %+v kept for the next Job of the name", *st.Backoff)
	}
	if st.Expectations.PendingCreations != 1 {
		t.Errorf("expectations %+v, want the creation still expected", st.Expectations)
	}
	if err := s.EnsureReady(key, map[string]LastSyncRVGetter{Pods: storeAt("1")}); err != nil {
		t.Errorf("a write of the deleted Job still awaited: %v", err)
	}
}

func TestExpectationsExpireOnTheInjectedClock(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	s := New(clk)
	s.ExpectCreations(key, 1)
	clk.SetTime(t0.Add(plan.ExpectationsTimeout))
	if e := s.State(key).Expectations; e.Satisfied(clk.Now()) {
		t.Errorf("expectations %+v satisfied at exactly the timeout", e)
	}
	clk.SetTime(t0.Add(plan.ExpectationsTimeout + time.Second))
	if e := s.State(key).Expectations; !e.Satisfied(clk.Now()) {
		t.Errorf("expectations %+v not satisfied after the timeout", e)
	}
}

func TestFinishedMarks(t *testing.T) {
	s := New(testingclock.NewFakePassiveClock(t0))
	if s.FinishPending("uid-1") {
		t.Fatal("a Job never marked is pending finish")
	}
	s.MarkFinished("uid-1")
	if !s.FinishPending("uid-1") {
		t.Error("marked Job is not pending finish")
	}
	if s.FinishPending("uid-2") {
		t.Error("the mark of uid-1 applies to uid-2")
	}
	s.Forget(key) // the marks are by UID, not by key
	if !s.FinishPending("uid-1") {
		t.Error("Forget of a key dropped a finish mark")
	}
	s.FinishObserved("uid-1")
	if s.FinishPending("uid-1") {
		t.Error("observed finish still pending")
	}
	s.FinishObserved("uid-1") // twice is harmless
}

// TestConcurrentObservations lowers expectations from many goroutines, as
// informer handlers and creation goroutines do.
func TestConcurrentObservations(t *testing.T) {
	s := New(testingclock.NewFakePassiveClock(t0))
	s.ExpectCreations(key, 100)
	s.ExpectFinalizersRemoved(key, uidsN(100))
	var wg sync.WaitGroup
	for _, uid := range uidsN(100) {
		wg.Go(func() {
			s.CreationsObserved(key, 1)
			s.FinalizerRemovalObserved(key, uid)
			_ = s.State(key)
		})
	}
	wg.Wait()
	want := plan.State{Expectations: plan.Expectations{RecordedAt: t0}}
	if got := s.State(key); !reflect.DeepEqual(got, want) {
		t.Errorf("State = %+v, want %+v", got, want)
	}
}

func uidsN(n int) []types.UID {
	out := make([]types.UID, n)
	for i := range out {
		out[i] = types.UID(fmt.Sprintf("pod-%03d", i))
	}
	return out
}
