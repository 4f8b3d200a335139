package engine

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// calculateSucceededIndexes returns status.completedIndexes and the same with
// the indexes of succeeded pods not yet counted (still carrying the
// finalizer) added.
func (c *syncCtx) calculateSucceededIndexes() (prev, all orderedIntervals) {
	prev = parseIndexes(c.job.Status.CompletedIndexes, c.completions)
	var newSucceeded []int
	for _, p := range c.pods {
		ix := p.index
		if p.phase == corev1.PodSucceeded && ix != unknownCompletionIndex && ix < c.completions && p.tracked {
			newSucceeded = append(newSucceeded, ix)
		}
	}
	slices.Sort(newSucceeded)
	return prev, prev.withOrderedIndexes(slices.Compact(newSucceeded))
}

// calculateFailedIndexes returns status.failedIndexes with the indexes that
// failed since added.
func (c *syncCtx) calculateFailedIndexes() *orderedIntervals {
	var prev orderedIntervals
	if c.job.Status.FailedIndexes != nil {
		prev = parseIndexes(*c.job.Status.FailedIndexes, c.completions)
	}
	var newFailed []int
	for _, p := range c.pods {
		ix := p.index
		if ix != unknownCompletionIndex && ix < c.completions && p.tracked && c.isIndexFailed(p) {
			newFailed = append(newFailed, ix)
		}
	}
	slices.Sort(newFailed)
	result := prev.withOrderedIndexes(slices.Compact(newFailed))
	return &result
}

// isIndexFailed: the pod's failure fails its index, by a FailIndex rule or by
// exhausting backoffLimitPerIndex.
func (c *syncCtx) isIndexFailed(p *pod) bool {
	counted := false
	if c.isPodFailed(p) {
		if c.job.Spec.PodFailurePolicy != nil {
			m := c.matchPodFailurePolicy(p.Pod)
			if m.action != nil && *m.action == batchv1.PodFailurePolicyActionFailIndex {
				return true
			}
			counted = m.countFailed
		} else {
			counted = true
		}
	}
	return counted && p.failures >= *c.job.Spec.BackoffLimitPerIndex
}

// firstPendingIndexes returns up to count of the lowest indexes that are
// neither succeeded, active, failed, nor (when only failed pods are
// replaced) held by a terminating pod.
func (c *syncCtx) firstPendingIndexes(count int) []int {
	if count == 0 {
		return nil
	}
	nonPending := c.succeededIndexes.withOrderedIndexes(indexesOf(c.activePods))
	if c.onlyReplaceFailedPods() {
		nonPending = nonPending.withOrderedIndexes(indexesOf(filterPods(c.pods, (*pod).terminating)))
	}
	if c.failedIndexes != nil {
		nonPending = nonPending.merge(*c.failedIndexes)
	}
	result := make([]int, 0, count)
	candidate := 0
	for _, iv := range nonPending {
		for ; candidate < c.completions && len(result) < count && candidate < iv.First; candidate++ {
			result = append(result, candidate)
		}
		if candidate < iv.Last+1 {
			candidate = iv.Last + 1
		}
	}
	for ; candidate < c.completions && len(result) < count; candidate++ {
		result = append(result, candidate)
	}
	return result
}

// podsWithDelayedDeletion picks, for each index with neither a success, a
// failure nor an active pod, its last failed pod: its finalizer stays until
// a replacement inherits its failure count.
func (c *syncCtx) podsWithDelayedDeletion() map[int]*pod {
	active := indexesOf(c.activePods)
	delayed := map[int]*pod{}
	c.validPodsWithFilter(nil, func(p *pod) bool {
		if !c.isPodFailed(p) {
			return false
		}
		ix := p.index
		if c.succeededIndexes.has(ix) || c.failedIndexes.has(ix) {
			return false
		}
		if _, isActive := slices.BinarySearch(active, ix); isActive {
			return false
		}
		if last, ok := delayed[ix]; ok {
			if last.absoluteFailures() <= p.absoluteFailures() && !finishedTime(p.Pod).Before(finishedTime(last.Pod)) {
				delayed[ix] = p
			}
		} else {
			delayed[ix] = p
		}
		return false
	})
	return delayed
}

// indexesReadyForCreation keeps the indexes whose failure backoff is over;
// when none is, it returns the shortest wait.
func (c *syncCtx) indexesReadyForCreation(indexes []int) ([]int, time.Duration) {
	var ready []int
	var minWait *time.Duration
	for _, ix := range indexes {
		wait := c.backoff.remainingForIndex(c.now, c.podsWithDelayedDeletionPerIndex[ix])
		if wait == 0 {
			ready = append(ready, ix)
		} else if minWait == nil || wait < *minWait {
			minWait = &wait
		}
	}
	if len(ready) > 0 || minWait == nil {
		return ready, 0
	}
	return nil, *minWait
}
