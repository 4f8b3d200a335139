package svc

import (
	"runtime"
	"sync"
	"weak"

	batchv1 "k8s.io/api/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// answerCache keeps the contract's form of the informer cache's Jobs, each
// for as long as its object lives: a Job read again and again (a tenant
// listing its Jobs) is converted once, where each conversion costs a JSON
// round trip of its pod template. An informer never changes its objects in
// place (a change is a new object), and answers are only read (encoded),
// so one converted Job serves every answer holding it. At most
// maxCachedAnswers are kept (about as much memory again as the informer's
// Jobs), shared fairly between namespaces: once they are all taken, a
// namespace holding fewer than its share (the bound over the namespaces
// holding any) takes one from the namespace holding the most, so a tenant
// reading more Jobs than the cache holds cannot push the others' out. The
// Jobs read beyond are converted on each call.
type answerCache struct {
	mu   sync.Mutex
	jobs map[weak.Pointer[batchv1.Job]]cachedAnswer
	// byNamespace are the keys of jobs, by their Jobs' namespace.
	byNamespace map[string]map[weak.Pointer[batchv1.Job]]struct{}
}

type cachedAnswer struct {
	job       *jobplanev1.Job
	namespace string
	// cleanup forgets the answer when its object is collected; stopped
	// when the answer is dropped first, so that an object cached again
	// has one.
	cleanup runtime.Cleanup
}

// maxCachedAnswers bounds the Jobs an answerCache keeps.
const maxCachedAnswers = 10_000

// job is the answer's form of job, an object of the informer cache.
func (a *answerCache) job(job *batchv1.Job, convert func(*batchv1.Job) (*jobplanev1.Job, error)) (*jobplanev1.Job, error) {
	if job == nil {
		return convert(job)
	}
	key := weak.Make(job)
	a.mu.Lock()
	kept, ok := a.jobs[key]
	a.mu.Unlock()
	if ok {
		return kept.job, nil
	}
	out, err := convert(job)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept, ok := a.jobs[key]; ok { // converted meanwhile by another call
		return kept.job, nil
	}
	if len(a.jobs) >= maxCachedAnswers && !a.makeRoomFor(job.Namespace) {
		return out, nil
	}
	if a.jobs == nil {
		a.jobs = map[weak.Pointer[batchv1.Job]]cachedAnswer{}
		a.byNamespace = map[string]map[weak.Pointer[batchv1.Job]]struct{}{}
	}
	a.jobs[key] = cachedAnswer{job: out, namespace: job.Namespace, cleanup: runtime.AddCleanup(job, a.forget, key)}
	keys := a.byNamespace[job.Namespace]
	if keys == nil {
		keys = map[weak.Pointer[batchv1.Job]]struct{}{}
		a.byNamespace[job.Namespace] = keys
	}
	keys[key] = struct{}{}
	return out, nil
}

// makeRoomFor drops an answer of the namespace holding the most, when ns
// holds fewer than its share; it says whether it did. a.mu is held.
func (a *answerCache) makeRoomFor(ns string) bool {
	holding := len(a.byNamespace)
	if _, ok := a.byNamespace[ns]; !ok {
		holding++
	}
	if len(a.byNamespace[ns]) >= maxCachedAnswers/holding {
		return false
	}
	most := ""
	for other, keys := range a.byNamespace {
		if len(keys) > len(a.byNamespace[most]) {
			most = other
		}
	}
	for key := range a.byNamespace[most] {
		a.jobs[key].cleanup.Stop()
		a.drop(key)
		return true
	}
	return false
}

// forget drops the answer of an object the informer no longer holds.
func (a *answerCache) forget(key weak.Pointer[batchv1.Job]) {
	a.mu.Lock()
	a.drop(key)
	a.mu.Unlock()
}

// drop removes key's answer, if kept. a.mu is held.
func (a *answerCache) drop(key weak.Pointer[batchv1.Job]) {
	kept, ok := a.jobs[key]
	if !ok {
		return
	}
	delete(a.jobs, key)
	keys := a.byNamespace[kept.namespace]
	delete(keys, key)
	if len(keys) == 0 {
		delete(a.byNamespace, kept.namespace)
	}
}

// size is how many answers are kept.
func (a *answerCache) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.jobs)
}
