package controller

import (
	"sync"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// writtenStatuses remembers the CronJobs whose status this controller last
// wrote, until the cache shows the write: the sync that follows a write
// (woken by a Job event) often runs before the informer has the new
// version, and a decision on the old one would repeat its events and fail
// its own write with a conflict. Keyed by namespace/name.
type writtenStatuses struct {
	mu      sync.Mutex
	written map[string]written
}

type written struct {
	before string // the resourceVersion the write replaced
	after  *cronapi.CronJob
}

// record notes that the CronJob at resourceVersion before is now after.
func (w *writtenStatuses) record(key, before string, after *cronapi.CronJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil {
		w.written = map[string]written{}
	}
	w.written[key] = written{before: before, after: after}
}

// freshest is the CronJob to decide on: what this controller wrote when the
// cache still has the version the write replaced, else the cache's.
func (w *writtenStatuses) freshest(key string, cached *cronapi.CronJob) *cronapi.CronJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.written[key]
	if !ok {
		return cached
	}
	if cached.ResourceVersion == last.before {
		return last.after.DeepCopy()
	}
	delete(w.written, key) // the cache caught up, or someone else wrote since
	return cached
}

func (w *writtenStatuses) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, key)
}
