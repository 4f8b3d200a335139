// Package jobstate is the executor's memory of each Job that the cluster does
// not show (the reference's ControllerExpectations, uidTrackingExpectations,
// backoffStore and finishedJobExpectations): pod creations and deletions
// issued and not yet observed, finalizer removals and a finishing Job's pod
// deletions in flight, the pod-failure
// backoff record, and Jobs whose finishing write is not yet observed. It is
// sent to the planner with every snapshot. Pure and safe for concurrent use;
// the clock is injected.
package jobstate

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/jobplane/jobplane/lib/plan"
)

// Store holds the state of every Job, by namespace/name key.
type Store struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	jobs     map[string]*jobState
	finished map[types.UID]bool
}

type jobState struct {
	creations, deletions int32
	recordedAt           time.Time
	hasExpectations      bool
	removals             map[types.UID]bool
	// deleting: a finishing Job's pod deletions issued and not yet
	// observed, which count no expectation.
	deleting map[types.UID]bool
	backoff  *plan.BackoffRecord
	// written is the newest resourceVersion this executor wrote, by
	// resource.
	written map[string]string
}

// New returns an empty store reading time from clk.
func New(clk clock.PassiveClock) *Store {
	return &Store{clock: clk, jobs: map[string]*jobState{}, finished: map[types.UID]bool{}}
}

func (s *Store) job(key string) *jobState {
	j, ok := s.jobs[key]
	if !ok {
		j = &jobState{}
		s.jobs[key] = j
	}
	return j
}

// State is what the planner is told of the Job's key.
func (s *Store) State(key string) plan.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok {
		return plan.State{}
	}
	st := plan.State{Backoff: j.backoff}
	if j.hasExpectations {
		st.Expectations = plan.Expectations{PendingCreations: j.creations, PendingDeletions: j.deletions, RecordedAt: j.recordedAt}
	}
	for uid := range j.removals {
		st.FinalizerRemovalsInFlight = append(st.FinalizerRemovalsInFlight, uid)
	}
	slices.Sort(st.FinalizerRemovalsInFlight) // same state, same request
	return st
}

// ExpectCreations records n creations about to be issued, replacing what
// was expected (the planner only creates once earlier expectations are met).
func (s *Store) ExpectCreations(key string, n int) { s.set(key, int32(n), 0) }

// ExpectDeletions records n deletions about to be issued.
func (s *Store) ExpectDeletions(key string, n int) { s.set(key, 0, int32(n)) }

func (s *Store) set(key string, creations, deletions int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(key)
	j.creations, j.deletions, j.recordedAt, j.hasExpectations = creations, deletions, s.clock.Now(), true
}

// CreationsObserved lowers the pending creations by n: pods seen by the
// informer, or creations that failed or were never attempted.
func (s *Store) CreationsObserved(key string, n int) { s.lower(key, int32(n), 0) }

// DeletionsObserved lowers the pending deletions by n.
func (s *Store) DeletionsObserved(key string, n int) { s.lower(key, 0, int32(n)) }

func (s *Store) lower(key string, creations, deletions int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[key]; ok && j.hasExpectations {
		j.creations -= creations
		j.deletions -= deletions
	}
}

// ExpectFinalizersRemoved records removals about to be issued.
func (s *Store) ExpectFinalizersRemoved(key string, uids []types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(key)
	j.removals = withUIDs(j.removals, uids)
}

// FinalizerRemovalObserved forgets a removal: seen by the informer, or failed.
func (s *Store) FinalizerRemovalObserved(key string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[key]; ok {
		delete(j.removals, uid)
		s.dropIfEmpty(key, j)
	}
}

// TrackDeletions records a finishing Job's pod deletions about to be
// issued. They count no expectation (the reference's deleteActivePods sets
// none), yet a sync that gives its worker up in their midst is queued again
// at once, and its cache may not yet show the pods it deleted as deleting:
// the performer skips a pod whose deletion is in flight, rather than
// deleting it twice.
func (s *Store) TrackDeletions(key string, uids []types.UID) {
	if len(uids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(key)
	j.deleting = withUIDs(j.deleting, uids)
}

// withUIDs is set with uids added (made if nil).
func withUIDs(set map[types.UID]bool, uids []types.UID) map[types.UID]bool {
	if set == nil {
		set = make(map[types.UID]bool, len(uids))
	}
	for _, uid := range uids {
		set[uid] = true
	}
	return set
}

// DeletionInFlight says whether the pod's deletion was issued and is not
// yet observed.
func (s *Store) DeletionInFlight(key string, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	return ok && j.deleting[uid]
}

// ForgetDeletion forgets a tracked deletion: seen by the informer, or not
// made.
func (s *Store) ForgetDeletion(key string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[key]; ok {
		delete(j.deleting, uid)
		s.dropIfEmpty(key, j)
	}
}

// SetBackoff stores the Job's pod-failure backoff record.
func (s *Store) SetBackoff(key string, rec plan.BackoffRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.job(key).backoff = &rec
}

// Release drops the expectations and backoff record of a finished Job; its
// finalizer removals and deletions in flight stay until observed.
func (s *Store) Release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[key]; ok {
		j.hasExpectations, j.creations, j.deletions, j.backoff, j.written = false, 0, 0, nil, nil
		s.dropIfEmpty(key, j)
	}
}

// dropIfEmpty forgets a Job of which nothing is left to remember.
func (s *Store) dropIfEmpty(key string, j *jobState) {
	if !j.hasExpectations && j.backoff == nil && j.written == nil && len(j.removals) == 0 && len(j.deleting) == 0 {
		delete(s.jobs, key)
	}
}

// JobDeleted drops, as the informer shows the Job of key deleted, what
// must not carry over to a Job created again with the same name at once
// (before a sync of the key finds it gone): its pod-failure backoff record
// and the writes awaited in the caches. Expectations stay until that sync,
// as the reference keeps them.
func (s *Store) JobDeleted(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[key]; ok {
		j.backoff, j.written = nil, nil
	}
}

// Forget drops everything known of a deleted Job.
func (s *Store) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.jobs, key)
}

// MarkFinished records that a status write finished the Job: until the
// informer shows it, syncs of the Job are skipped, so that a stale cache
// cannot plan the finished Job again.
func (s *Store) MarkFinished(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished[uid] = true
}

// FinishPending says whether the Job's finishing write is not yet observed.
func (s *Store) FinishPending(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished[uid]
}

// FinishObserved forgets the mark of MarkFinished.
func (s *Store) FinishObserved(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.finished, uid)
}
