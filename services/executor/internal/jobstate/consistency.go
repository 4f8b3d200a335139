package jobstate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Resources whose writes a sync waits to see in its cache.
const (
	Pods = "pods"
	Jobs = "jobs"
)

// LastSyncRVGetter is an informer store's newest resourceVersion seen.
type LastSyncRVGetter interface {
	LastStoreSyncResourceVersion() string
}

// WroteAt records that a write of the Job key's pods or of the Job itself
// answered resourceVersion rv (the reference's consistency store, on by
// default in v1.36 as StaleControllerConsistencyJob).
func (s *Store) WroteAt(key, resource, rv string) {
	if rv == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.job(key)
	if j.written == nil {
		j.written = map[string]string{}
	}
	if old, ok := j.written[resource]; ok {
		if cmp, err := resourceversion.CompareResourceVersion(old, rv); err == nil && cmp >= 0 {
			return
		}
	}
	j.written[resource] = rv
}

// StaleCacheError: the cache of Resource has not yet seen the executor's
// own last write to it.
type StaleCacheError struct {
	Resource, Read, Written string
}

func (e *StaleCacheError) Error() string {
	return fmt.Sprintf("the %s cache has seen resourceVersion %s, older than the %s written", e.Resource, e.Read, e.Written)
}

// EnsureReady fails (StaleCacheError) while a store has not yet seen the
// Job's last write of its resource, so that a sync never plans from a cache
// older than its own writes; once every store caught up the record is
// dropped.
func (s *Store) EnsureReady(key string, stores map[string]LastSyncRVGetter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[key]
	if !ok || len(j.written) == 0 {
		return nil
	}
	for resource, wrote := range j.written {
		store := stores[resource]
		if store == nil {
			continue
		}
		read := store.LastStoreSyncResourceVersion()
		if read == "" {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(wrote, read); err == nil && cmp > 0 {
			return &StaleCacheError{Resource: resource, Read: read, Written: wrote}
		}
	}
	j.written = nil
	return nil
}
