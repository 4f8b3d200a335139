package engine

import (
	"cmp"
	"math"
	"time"
)

// Pod failure backoff bounds of the reference.
const (
	DefaultPodFailureBackoff = 10 * time.Second
	MaxPodFailureBackoff     = 10 * time.Minute
)

// PodFailureBackoff is the delay before pods replace failed ones: Initial
// after the first failure, doubled with each further one up to Max. Zero
// fields are the reference's (DefaultPodFailureBackoff,
// MaxPodFailureBackoff); its integration tests shorten them, as a planner
// flag does here.
type PodFailureBackoff struct {
	Initial, Max time.Duration
}

// nextBackoffRecord folds the newly finished pods into the record.
func nextBackoffRecord(old BackoffRecord, newSucceeded, newFailed []*pod) BackoffRecord {
	rec := old
	sortByFinishedTime(newSucceeded)
	sortByFinishedTime(newFailed)
	if len(newSucceeded) == 0 {
		if len(newFailed) == 0 {
			return rec
		}
		rec.FailuresAfterLastSuccess = plus(rec.FailuresAfterLastSuccess, len(newFailed))
		t := finishedTime(newFailed[len(newFailed)-1].Pod)
		rec.LastFailureTime = &t
		return rec
	}
	rec.FailuresAfterLastSuccess = 0
	rec.LastFailureTime = nil
	lastSuccess := finishedTime(newSucceeded[len(newSucceeded)-1].Pod)
	for i := len(newFailed) - 1; i >= 0; i-- {
		failed := finishedTime(newFailed[i].Pod)
		if !failed.After(lastSuccess) {
			break
		}
		if rec.LastFailureTime == nil {
			rec.LastFailureTime = &failed
		}
		rec.FailuresAfterLastSuccess++
	}
	return rec
}

// remaining is how long to wait before creating pods after failuresCount
// failures, the last at lastFailure: min(initial*2^(n-1), max) since the
// last failure (10 s and 10 min by default).
func (b PodFailureBackoff) remaining(now time.Time, failuresCount int32, lastFailure *time.Time) time.Duration {
	if failuresCount == 0 || lastFailure == nil {
		return 0
	}
	limit := cmp.Or(b.Max, MaxPodFailureBackoff)
	backoff := min(cmp.Or(b.Initial, DefaultPodFailureBackoff), limit)
	for i := 1; i < int(failuresCount); i++ {
		if backoff > (limit-1)/2 { // doubled, it reaches the limit (and never overflows)
			backoff = limit
			break
		}
		backoff *= 2
	}
	elapsed := now.Sub(*lastFailure)
	if backoff < elapsed {
		return 0
	}
	if left := backoff - elapsed; left >= 0 {
		return left
	}
	// A last failure more than 292 years ahead saturates elapsed and the
	// difference wraps around: the wait is the longest there is.
	return math.MaxInt64
}

// remainingForIndex is the wait before replacing lastFailedPod in its
// index, counting every failure of the index so far.
func (b PodFailureBackoff) remainingForIndex(now time.Time, lastFailedPod *pod) time.Duration {
	if lastFailedPod == nil {
		return 0
	}
	t := finishedTime(lastFailedPod.Pod)
	return b.remaining(now, lastFailedPod.absoluteFailures()+1, &t)
}
