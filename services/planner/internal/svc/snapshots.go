package svc

import (
	"cmp"
	"container/list"
	"math"
	"runtime/debug"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// DefaultStreamSnapshotMaxPods is the default bound on the pods of the
// snapshots StreamPlanSync keeps as bases of deltas, over all streams.
const DefaultStreamSnapshotMaxPods = 1_000_000

// DefaultStreamSnapshotMaxBytes is the default bound on the memory of the
// snapshots kept: a quarter of the process's memory limit (GOMEMLIMIT;
// the requests in flight have half), or 512 MiB without one.
func DefaultStreamSnapshotMaxBytes() int64 {
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit / 4
	}
	return 512 << 20
}

// What a kept snapshot costs beyond the bytes it was sent as (its pods'
// strings are views of them): each pod's corev1.Pod, parts, view and slot
// (about 2 KB, BENCHMARKS.md "Planner memory"), and the Job converted (a few KB).
const (
	heldPodBytes = 2 << 10
	heldJobBytes = 4 << 10
)

// snapshotStore holds the last snapshot of each Job of each stream, the
// bases of deltas, within bounds on the pods and on the memory held over
// all streams: the least recently used snapshots are evicted first. The
// memory is counted from the bytes each snapshot was sent as, so that a
// caller sending large pods (the contract's strings, lists and maps are
// unbounded but for the request's size) holds no more than one sending
// small ones. A snapshot in use by its stream's request is taken out of
// the store (and out of the count) and put back once planned, so eviction
// never touches a snapshot in use. The system level's snapshots (the
// executor's) come first: outside callers' are evicted before any of
// theirs, and never evict one, so that a caller sending heavy snapshots
// cannot make the executor resend its Jobs in full. Among outside callers,
// the tenant holding the largest share of the bounds loses its least
// recently used snapshot first, so that a tenant flooding the store evicts
// its own once it holds the most, and a tenant holding a small share keeps
// its snapshots.
type snapshotStore struct {
	maxPods  int
	maxBytes int64

	mu sync.Mutex
	// held is the weight of the snapshots held.
	held weight
	// system holds the system level's snapshots, outside each outside
	// tenant's that holds any.
	system  *holder
	outside map[string]*holder
}

// holder is the snapshots of the system level or of one outside tenant,
// most recently used at the front, and their weight.
type holder struct {
	tenant string
	lru    *list.List // of *baseSnapshot
	held   weight
}

// weight is what a snapshot counts against the bounds: its pods, and its
// Job as one more, so that Jobs without pods are bounded too; and its
// memory.
type weight struct {
	pods  int
	bytes int64
}

func newSnapshotStore(maxPods int, maxBytes int64) *snapshotStore {
	return &snapshotStore{maxPods: maxPods, maxBytes: maxBytes, system: &holder{lru: list.New()}, outside: map[string]*holder{}}
}

// streamSnapshots are the snapshots of one stream, by Job UID.
type streamSnapshots struct {
	store *snapshotStore
	jobs  map[string]*baseSnapshot // guarded by store.mu
	// system: its snapshots are the system level's; else tenant's.
	system bool
	tenant string
}

// baseSnapshot is a snapshot as planned, kept converted so that a delta
// converts only what changed. The engine modifies neither the Job nor the
// pods, so they are handed to it as they are.
type baseSnapshot struct {
	owner  *streamSnapshots
	holder *holder
	elem   *list.Element
	held   weight // its weight when put
	// sent are the bytes it holds of what it was sent as: the full
	// request's (its pods' strings are views of them), and each pod
	// upserted since (decoded alone); jobSent its Job's, decoded apart.
	sent, jobSent int64
	// allocated are the pods it keeps allocated: the full request's
	// array, all of it while any is held, and those decoded alone since.
	allocated int
	jobUID    string
	id        string // of the request whose snapshot this is

	jobProto *jobplanev1.Job
	job      *batchv1.Job // converted and defaulted
	// order holds the pods in the engine's canonical order (name, then
	// UID), which the engine's sort then finds at once.
	order []*slot
	index map[string]*slot // by pod UID
	// finalizer is the tracking finalizer the views were worked out for.
	finalizer string
	// pods and views are order's, as the engine takes them; rebuilt for
	// each sync in the same arrays.
	pods  []*corev1.Pod
	views []engine.PodView
	// release gives back the arrays of its pods decoded together (podSlab:
	// the full snapshot's, and those of the parts continuing it) once the
	// base is dropped; nil when there is none.
	release func()
	// partial: it is a part of a snapshot the next request continues.
	partial bool
}

// keep has b give back release's array too once dropped.
func (b *baseSnapshot) keep(release func()) {
	if prev := b.release; prev != nil {
		b.release = func() { prev(); release() }
		return
	}
	b.release = release
}

// dispose gives the base's array of pods back: nothing may use the base
// after. A nil base is none.
func (b *baseSnapshot) dispose() {
	if b != nil && b.release != nil {
		b.release()
		b.release = nil
	}
}

// slot is a pod of a kept snapshot, converted, and its engine view.
type slot struct {
	pod *corev1.Pod
	// alone: the pod was decoded alone (a delta's), sent bytes, rather
	// than into the full request's array, its strings views of its bytes.
	alone bool
	sent  int64
	// annotations are those a sync reads of the pod, not in its map.
	annotations engine.PodAnnotations
	view        engine.PodView
	removed     bool
}

func newSlot(p *corev1.Pod, annotations engine.PodAnnotations, finalizer string) slot {
	return slot{pod: p, annotations: annotations, view: engine.ViewWith(p, finalizer, annotations)}
}

func canonical(a, b *slot) int {
	return cmp.Or(cmp.Compare(a.pod.Name, b.pod.Name), cmp.Compare(a.pod.UID, b.pod.UID))
}

// sortCanonical sorts slots in canonical order. It sorts indexes into keys
// copied side by side: comparing through each slot's pod, in an array of
// 1 KB pods, misses the cache at every step of a sort of thousands, and
// moving 4-byte indexes is cheaper than moving keys.
func sortCanonical(order []*slot) {
	type key struct {
		name string
		uid  types.UID
	}
	keys := make([]key, len(order))
	index := make([]int32, len(order))
	for i, s := range order {
		keys[i], index[i] = key{s.pod.Name, s.pod.UID}, int32(i)
	}
	slices.SortFunc(index, func(i, j int32) int {
		a, b := &keys[i], &keys[j]
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.uid, b.uid))
	})
	sorted := make([]*slot, len(order))
	for i, k := range index {
		sorted[i] = order[k]
	}
	copy(order, sorted)
}

// setFinalizer works the views out again when the tracking finalizer of the
// sync is not the one they were worked out for.
func (b *baseSnapshot) setFinalizer(f string) {
	f = cmp.Or(f, engine.DefaultTrackingFinalizer)
	if f == b.finalizer {
		return
	}
	b.finalizer = f
	for _, s := range b.order {
		s.view = engine.ViewWith(s.pod, f, s.annotations)
	}
}

// reorder restores the canonical order after pods were removed (marked),
// added (in added) or renamed, and rebuilds pods and views.
func (b *baseSnapshot) reorder(removed bool, added []*slot, renamed bool) {
	if removed {
		b.order = slices.DeleteFunc(b.order, func(s *slot) bool { return s.removed })
	}
	switch {
	case renamed:
		b.order = append(b.order, added...)
		sortCanonical(b.order)
	case len(added) > 0:
		slices.SortFunc(added, canonical)
		merged := make([]*slot, 0, len(b.order)+len(added))
		i, j := 0, 0
		for i < len(b.order) && j < len(added) {
			if canonical(added[j], b.order[i]) < 0 {
				merged = append(merged, added[j])
				j++
			} else {
				merged = append(merged, b.order[i])
				i++
			}
		}
		merged = append(append(merged, b.order[i:]...), added[j:]...)
		b.order = merged
	}
	b.pods, b.views = b.pods[:0], b.views[:0]
	for _, s := range b.order {
		b.pods = append(b.pods, s.pod)
		b.views = append(b.views, s.view)
	}
	clear(b.pods[len(b.pods):cap(b.pods)]) // no removed pod kept alive
}

// stream is the snapshots of a new stream, of a system caller or of an
// outside caller of tenant.
func (st *snapshotStore) stream(system bool, tenant string) *streamSnapshots {
	return &streamSnapshots{store: st, jobs: map[string]*baseSnapshot{}, system: system, tenant: tenant}
}

// holderOf is the holder of s's snapshots, made when it has none; st.mu is
// held.
func (st *snapshotStore) holderOf(s *streamSnapshots) *holder {
	if s.system {
		return st.system
	}
	h := st.outside[s.tenant]
	if h == nil {
		h = &holder{tenant: s.tenant, lru: list.New()}
		st.outside[s.tenant] = h
	}
	return h
}

// heaviestOutside is the outside tenant holding the largest share of the
// bounds (pods or bytes, whichever is larger); nil when none holds any.
func (st *snapshotStore) heaviestOutside() *holder {
	var heaviest *holder
	share := func(h *holder) float64 {
		return max(float64(h.held.pods)/float64(max(st.maxPods, 1)), float64(h.held.bytes)/float64(max(st.maxBytes, 1)))
	}
	for _, h := range st.outside {
		if heaviest == nil || share(h) > share(heaviest) || (share(h) == share(heaviest) && h.tenant < heaviest.tenant) {
			heaviest = h
		}
	}
	return heaviest
}

// continues reports whether the stream's snapshot of the Job is a part of
// one that the next request continues.
func (s *streamSnapshots) continues(jobUID string) bool {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	b := s.jobs[jobUID]
	return b != nil && b.partial
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

// put keeps b as the stream's snapshot of its Job, evicting snapshots
// beyond the bound: the least recently used of the outside tenant holding
// the largest share first, the system level's only for the system level's
// (a snapshot of an outside caller's evicts none of them); a snapshot that
// does not fit so is not kept (false), and disposed of.
func (s *streamSnapshots) put(b *baseSnapshot) (kept bool) {
	kept = true
	for _, dropped := range s.keep(b) {
		kept = kept && dropped != b
		dropped.dispose() // outside the lock: it clears the pods
	}
	return kept
}

// keep is put but for disposing of the snapshots it drops, which it
// returns.
func (s *streamSnapshots) keep(b *baseSnapshot) (dropped []*baseSnapshot) {
	st := s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if old := s.jobs[b.jobUID]; old != nil {
		st.remove(old)
		dropped = append(dropped, old)
	}
	w := b.weight()
	if !st.fits(w) {
		return append(dropped, b)
	}
	for !st.fits(st.held.add(w)) {
		from := st.heaviestOutside()
		if from == nil && s.system && st.system.lru.Len() > 0 {
			from = st.system
		}
		if from == nil {
			return append(dropped, b)
		}
		evicted := from.lru.Back().Value.(*baseSnapshot)
		st.remove(evicted)
		dropped = append(dropped, evicted)
	}
	h := st.holderOf(s)
	b.owner, b.holder = s, h
	b.elem = h.lru.PushFront(b)
	b.held = w
	h.held = h.held.add(w)
	st.held = st.held.add(w)
	s.jobs[b.jobUID] = b
	return dropped
}

// fits: w is within the store's bounds.
func (st *snapshotStore) fits(w weight) bool {
	return w.pods <= st.maxPods && w.bytes <= st.maxBytes
}

func (w weight) add(o weight) weight {
	return weight{pods: w.pods + o.pods, bytes: w.bytes + o.bytes}
}

func (b *baseSnapshot) weight() weight {
	return weight{pods: len(b.order) + 1, bytes: b.sent + b.jobSent + int64(b.allocated)*heldPodBytes + heldJobBytes}
}

// close drops every snapshot of the stream.
func (s *streamSnapshots) close() {
	st := s.store
	st.mu.Lock()
	var dropped []*baseSnapshot
	for _, b := range s.jobs {
		st.remove(b)
		dropped = append(dropped, b)
	}
	st.mu.Unlock()
	for _, b := range dropped {
		b.dispose()
	}
}

// remove takes b out of the store; st.mu is held.
func (st *snapshotStore) remove(b *baseSnapshot) {
	h := b.holder
	h.lru.Remove(b.elem)
	released := weight{pods: -b.held.pods, bytes: -b.held.bytes}
	h.held = h.held.add(released)
	if h != st.system && h.lru.Len() == 0 {
		delete(st.outside, h.tenant)
	}
	st.held = st.held.add(released)
	delete(b.owner.jobs, b.jobUID)
	b.elem, b.owner, b.holder = nil, nil, nil
}

// heldWeight is the weight the store holds.
func (st *snapshotStore) heldWeight() weight {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.held
}

// heldSnapshots is the number of snapshots the store holds.
func (st *snapshotStore) heldSnapshots() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.system.lru.Len()
	for _, h := range st.outside {
		n += h.lru.Len()
	}
	return n
}
