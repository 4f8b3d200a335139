package svc

import (
	"cmp"
	"container/list"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// DefaultStreamSnapshotMaxPods is the default bound on the pods of the
// snapshots StreamPlanSync keeps as bases of deltas, over all streams.
const DefaultStreamSnapshotMaxPods = 1_000_000

// snapshotStore holds the last snapshot of each Job of each stream, the
// bases of deltas, within a bound on the pods held over all streams: the
// least recently used snapshots are evicted first. A snapshot in use by its
// stream's request is taken out of the store (and out of the count) and put
// back once planned, so eviction never touches a snapshot in use.
type snapshotStore struct {
	maxPods int

	mu   sync.Mutex
	held int        // weight of the snapshots in lru: pods, plus one per Job
	lru  *list.List // of *baseSnapshot, most recently used at the front
}

func newSnapshotStore(maxPods int) *snapshotStore {
	return &snapshotStore{maxPods: maxPods, lru: list.New()}
}

// streamSnapshots are the snapshots of one stream, by Job UID.
type streamSnapshots struct {
	store *snapshotStore
	jobs  map[string]*baseSnapshot // guarded by store.mu
}

// baseSnapshot is a snapshot as planned, kept converted so that a delta
// converts only what changed. The engine modifies neither the Job nor the
// pods, so they are handed to it as they are.
type baseSnapshot struct {
	owner  *streamSnapshots
	elem   *list.Element
	held   int // its weight when put
	jobUID string
	id     string // of the request whose snapshot this is

	jobProto *jobplanev1.Job
	job      *batchv1.Job // converted and defaulted
	pods     []*corev1.Pod
	views    []engine.PodView // of pods, for finalizer
	index    map[string]int   // pod UID to its position in pods and views
	// finalizer is the tracking finalizer the views were worked out for.
	finalizer string
}

// setFinalizer works the views out again when the tracking finalizer of the
// sync is not the one they were worked out for.
func (b *baseSnapshot) setFinalizer(f string) {
	f = cmp.Or(f, engine.DefaultTrackingFinalizer)
	if f == b.finalizer {
		return
	}
	b.finalizer = f
	for i, p := range b.pods {
		b.views[i] = engine.View(p, f)
	}
}

func (st *snapshotStore) stream() *streamSnapshots {
	return &streamSnapshots{store: st, jobs: map[string]*baseSnapshot{}}
}

// take removes and returns the stream's snapshot of the Job; nil when none.
func (s *streamSnapshots) take(jobUID string) *baseSnapshot {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	b := s.jobs[jobUID]
	if b != nil {
		st.remove(b)
	}
	return b
}

// put keeps b as the stream's snapshot of its Job, evicting the least
// recently used snapshots beyond the bound; a snapshot larger than the
// bound is not kept.
func (s *streamSnapshots) put(b *baseSnapshot) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if old := s.jobs[b.jobUID]; old != nil {
		st.remove(old)
	}
	w := b.weight()
	if w > st.maxPods {
		return
	}
	for st.held+w > st.maxPods {
		st.remove(st.lru.Back().Value.(*baseSnapshot))
	}
	b.owner = s
	b.elem = st.lru.PushFront(b)
	b.held = w
	st.held += w
	s.jobs[b.jobUID] = b
}

// weight is what a snapshot counts against the bound: its pods, and its Job
// as one more, so that Jobs without pods are bounded too.
func (b *baseSnapshot) weight() int { return len(b.pods) + 1 }

// close drops every snapshot of the stream.
func (s *streamSnapshots) close() {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, b := range s.jobs {
		st.remove(b)
	}
}

// remove takes b out of the store; st.mu is held.
func (st *snapshotStore) remove(b *baseSnapshot) {
	st.lru.Remove(b.elem)
	st.held -= b.held
	delete(b.owner.jobs, b.jobUID)
	b.elem, b.owner = nil, nil
}

// heldPods is the weight the store holds: pods, plus one per Job.
func (st *snapshotStore) heldPods() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.held
}

// heldSnapshots is the number of snapshots the store holds.
func (st *snapshotStore) heldSnapshots() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lru.Len()
}
