package engine

import (
	"fmt"
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// trackJobStatusAndRemoveFinalizers is the reference's tracking protocol:
//  1. finished pods go into status.uncountedTerminatedPods (Indexed
//     successes into completedIndexes), with any interim FailureTarget or
//     SuccessCriteriaMet condition: first status write;
//  2. their tracking finalizers are removed;
//  3. they move from uncountedTerminatedPods to the counters, and the Job
//     gets Failed or Complete when nothing is left running: second write.
//
// At most MaxUncountedPods pods are handled per sync.
func (c *syncCtx) trackJobStatusAndRemoveFinalizers(needsFlush bool) {
	job := c.job
	uncounted := job.Status.UncountedTerminatedPods
	if c.indexed {
		sortByCompletionIndex(c.pods)
	}
	// Only uncounted pods are looked up in this set: those already in
	// uncountedTerminatedPods, and those added below, whose finalizers this
	// plan removes.
	uidsWithFinalizer := map[types.UID]bool{}
	for _, p := range c.pods {
		if p.tracked && !c.expectedRmFinalizers[p.UID] && (c.uncountedSucceeded[p.UID] || c.uncountedFailed[p.UID]) {
			uidsWithFinalizer[p.UID] = true
		}
	}
	if cleanUncountedPodsWithoutFinalizers(&job.Status, uidsWithFinalizer) {
		needsFlush = true
	}

	var podsToRemoveFinalizer []*pod
	var newSucceededIndexes []int
	var failuresByAction map[string]int32
	reachedMaxUncountedPods := false
	for _, p := range c.pods {
		if !p.tracked || c.expectedRmFinalizers[p.UID] {
			continue // handled by an earlier sync
		}
		considerFailed := c.isPodFailed(p)
		if !c.canRemoveFinalizer(p, considerFailed) {
			continue
		}
		podsToRemoveFinalizer = append(podsToRemoveFinalizer, p)
		if p.phase == corev1.PodSucceeded && !c.uncountedFailed[p.UID] {
			if c.indexed {
				// The index says enough: no UID is tracked.
				if ix := p.index; ix != unknownCompletionIndex && ix < c.completions && !c.prevSucceededIndexes.has(ix) {
					newSucceededIndexes = append(newSucceededIndexes, ix)
					needsFlush = true
				}
			} else if !c.uncountedSucceeded[p.UID] {
				needsFlush = true
				uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
			}
		} else if considerFailed || (c.finishedCondition != nil && !c.isSuccessCriteriaMet(c.finishedCondition)) {
			// A failing Job counts every pod it stops as failed.
			ix := p.index
			if !c.uncountedFailed[p.UID] && (!c.indexed || (ix != unknownCompletionIndex && ix < c.completions)) {
				countFailed := true
				if c.job.Spec.PodFailurePolicy != nil {
					m := c.matchPodFailurePolicy(p.Pod)
					if m.action != nil {
						if failuresByAction == nil {
							failuresByAction = map[string]int32{}
						}
						failuresByAction[string(*m.action)]++
					}
					countFailed = m.countFailed
				}
				if countFailed {
					needsFlush = true
					uncounted.Failed = append(uncounted.Failed, p.UID)
				}
			}
		}
		if len(newSucceededIndexes)+len(uncounted.Succeeded)+len(uncounted.Failed) >= MaxUncountedPods {
			// The rest waits for the next sync, which the writes trigger.
			reachedMaxUncountedPods = true
			break
		}
	}
	if c.indexed {
		c.succeededIndexes = c.succeededIndexes.withOrderedIndexes(newSucceededIndexes)
		completed := c.succeededIndexes.String()
		if completed != job.Status.CompletedIndexes {
			needsFlush = true
		}
		job.Status.Succeeded = int32(c.succeededIndexes.total())
		job.Status.CompletedIndexes = completed
		var failedIndexes *string
		if c.failedIndexes != nil {
			s := c.failedIndexes.String()
			failedIndexes = &s
		}
		if !stringPtrEqual(job.Status.FailedIndexes, failedIndexes) {
			job.Status.FailedIndexes = failedIndexes
			needsFlush = true
		}
	}
	if c.finishedCondition != nil && c.finishedCondition.Type == batchv1.JobFailureTarget {
		// The interim condition is written before any finalizer goes.
		job.Status.Conditions = append(job.Status.Conditions, *c.finishedCondition)
		needsFlush = true
		c.finishedCondition = newCondition(batchv1.JobFailed, corev1.ConditionTrue, c.finishedCondition.Reason, c.finishedCondition.Message, c.now)
	}
	if c.isSuccessCriteriaMet(c.finishedCondition) {
		if trueCondition(job, batchv1.JobSuccessCriteriaMet) == nil {
			job.Status.Conditions = append(job.Status.Conditions, *c.finishedCondition)
			needsFlush = true
		}
		c.finishedCondition = newCondition(batchv1.JobComplete, corev1.ConditionTrue, c.finishedCondition.Reason, c.finishedCondition.Message, c.now)
	}

	// Flush, remove finalizers, count.
	if needsFlush {
		record := c.newBackoffRecord
		c.plan.Add(WriteStatus{
			Because:       because("AddUncountedPods", "Record the finished pods and conditions before removing finalizers: "+describeStatusChange(&c.startStatus, &job.Status)+"."),
			Status:        *job.Status.DeepCopy(),
			BackoffRecord: &record,
		})
		needsFlush = false
	}
	c.plan.Metrics.PodFailuresByPolicyAction = failuresByAction
	if len(podsToRemoveFinalizer) > 0 {
		c.plan.Add(RemoveFinalizers{
			Because: because("PodsFinished", fmt.Sprintf("Pods finished or no longer needed, and recorded in the status: %d; their tracking finalizer %s is removed.",
				len(podsToRemoveFinalizer), c.finalizer)),
			Pods: c.podRefs(podsToRemoveFinalizer),
		})
		for _, p := range podsToRemoveFinalizer {
			delete(uidsWithFinalizer, p.UID)
		}
	}
	beforeCounting := *job.Status.DeepCopy()
	if cleanUncountedPodsWithoutFinalizers(&job.Status, uidsWithFinalizer) {
		needsFlush = true
	}
	finished := !reachedMaxUncountedPods && c.enactJobFinished()
	if finished {
		needsFlush = true
	}
	if needsFlush {
		reason, what := "CountUncountedPods", "Count the pods whose finalizer is gone"
		if finished {
			reason, what = "JobFinished", fmt.Sprintf("The Job is %s", c.finishedCondition.Type)
		}
		c.plan.Add(WriteStatus{
			Because: because(reason, what+": "+describeStatusChange(&beforeCounting, &job.Status)+"."),
			Status:  *job.Status.DeepCopy(),
		})
		if finished {
			c.recordJobFinished()
		}
	}
	c.recordPodsFinished()
}

// canRemoveFinalizer: the Job is being deleted or finishing, the pod
// succeeded, or it failed and is not the last failed pod of its index
// awaiting its replacement.
func (c *syncCtx) canRemoveFinalizer(p *pod, considerFailed bool) bool {
	if c.job.DeletionTimestamp != nil || c.finishedCondition != nil || p.phase == corev1.PodSucceeded {
		return true
	}
	if !considerFailed {
		return false
	}
	if c.hasBackoffLimitPerIndex() {
		if p.index != unknownCompletionIndex {
			if delayed, ok := c.podsWithDelayedDeletionPerIndex[p.index]; ok && delayed.UID == p.UID {
				return false
			}
		}
	}
	return true
}

// cleanUncountedPodsWithoutFinalizers moves the UIDs of pods whose finalizer
// is gone from uncountedTerminatedPods to the counters.
func cleanUncountedPodsWithoutFinalizers(status *batchv1.JobStatus, uidsWithFinalizer map[types.UID]bool) bool {
	updated := false
	u := status.UncountedTerminatedPods
	if kept := keepUIDs(u.Succeeded, uidsWithFinalizer); len(kept) != len(u.Succeeded) {
		updated = true
		status.Succeeded = plus(status.Succeeded, len(u.Succeeded)-len(kept))
		u.Succeeded = kept
	}
	if kept := keepUIDs(u.Failed, uidsWithFinalizer); len(kept) != len(u.Failed) {
		updated = true
		status.Failed = plus(status.Failed, len(u.Failed)-len(kept))
		u.Failed = kept
	}
	return updated
}

func keepUIDs(uids []types.UID, keep map[types.UID]bool) []types.UID {
	var out []types.UID
	for _, u := range uids {
		if keep[u] {
			out = append(out, u)
		}
	}
	return out
}

// enactJobFinished adds the terminal condition once nothing is uncounted or
// terminating; Complete comes with the completion time.
func (c *syncCtx) enactJobFinished() bool {
	cond := c.finishedCondition
	if cond == nil {
		return false
	}
	job := c.job
	if u := job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if delayTerminalCondition(c.features) && c.terminating > 0 {
		return false
	}
	job.Status.Conditions, _ = ensureJobConditionStatus(job.Status.Conditions, cond.Type, cond.Status, cond.Reason, cond.Message, c.now)
	if cond.Type == batchv1.JobComplete {
		t := cond.LastTransitionTime
		job.Status.CompletionTime = &t
	}
	return true
}

// recordJobFinished plans the events and metrics of a finished Job.
func (c *syncCtx) recordJobFinished() {
	job, cond := c.job, c.finishedCondition
	c.plan.ReleaseJobState = true
	c.plan.Metrics.FinishedReason = cond.Reason
	if cond.Type == batchv1.JobComplete {
		c.plan.Metrics.FinishedResult = "succeeded"
		if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
			addEvent(c.plan, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
		}
		addEvent(c.plan, corev1.EventTypeNormal, "Completed", "Job completed")
		return
	}
	c.plan.Metrics.FinishedResult = "failed"
	addEvent(c.plan, corev1.EventTypeWarning, cond.Reason, cond.Message)
}

// recordPodsFinished sets the job_pods_finished_total increments of the
// status writes planned.
func (c *syncCtx) recordPodsFinished() {
	var written *batchv1.JobStatus
	for _, a := range c.plan.Actions {
		if w, ok := a.(WriteStatus); ok {
			written = &w.Status
		}
	}
	if written == nil {
		return
	}
	if c.indexed {
		// The last write's completedIndexes are succeededIndexes.
		c.plan.Metrics.PodsSucceeded = int32(c.succeededIndexes.total() - c.prevSucceededIndexes.total())
		c.plan.Metrics.IndexesSucceeded = c.plan.Metrics.PodsSucceeded
		c.plan.Metrics.BackoffLimit = "global"
		if c.hasBackoffLimitPerIndex() {
			c.plan.Metrics.BackoffLimit = "perIndex"
			var before int
			if c.startStatus.FailedIndexes != nil {
				before = parseIndexes(*c.startStatus.FailedIndexes, c.completions).total()
			}
			c.plan.Metrics.IndexesFailed = int32(max(c.failedIndexes.total()-before, 0))
		}
	} else {
		c.plan.Metrics.PodsSucceeded = written.Succeeded - c.startStatus.Succeeded
	}
	c.plan.Metrics.PodsFailed = written.Failed - c.startStatus.Failed
}

func stringPtrEqual(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// plus is a + n, held at math.MaxInt32: a counter a caller sends at its
// limit stays there rather than wrapping around to a negative one, which
// the next request would be refused for (the API server refuses the
// reference's status write then).
func plus(a int32, n int) int32 {
	return int32(min(int64(a)+int64(n), math.MaxInt32))
}
