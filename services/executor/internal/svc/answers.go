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
// Jobs); the Jobs read beyond them are converted on each call.
type answerCache struct {
	mu   sync.Mutex
	jobs map[weak.Pointer[batchv1.Job]]*jobplanev1.Job
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
	out, ok := a.jobs[key]
	a.mu.Unlock()
	if ok {
		return out, nil
	}
	out, err := convert(job)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if kept, ok := a.jobs[key]; ok { // converted meanwhile by another call
		return kept, nil
	}
	if len(a.jobs) >= maxCachedAnswers {
		return out, nil
	}
	if a.jobs == nil {
		a.jobs = map[weak.Pointer[batchv1.Job]]*jobplanev1.Job{}
	}
	a.jobs[key] = out
	runtime.AddCleanup(job, a.forget, key)
	return out, nil
}

// forget drops the answer of an object the informer no longer holds.
func (a *answerCache) forget(key weak.Pointer[batchv1.Job]) {
	a.mu.Lock()
	delete(a.jobs, key)
	a.mu.Unlock()
}

// size is how many answers are kept.
func (a *answerCache) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.jobs)
}
