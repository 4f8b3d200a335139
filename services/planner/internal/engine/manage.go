package engine

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

// completionIndexEnvName is the variable Indexed Jobs' containers read their
// index from.
const completionIndexEnvName = "JOB_COMPLETION_INDEX"

// maxGeneratedNameLength is the apiserver's limit on a generateName prefix
// before it appends its random suffix.
const maxGeneratedNameLength = 58

// manageJob brings the number of active pods to what the Job wants: all
// deleted when suspended, excess deleted (deletion wins over creation), or
// missing ones created after the pod failure backoff. It returns the active
// count once the plan is performed.
func (c *syncCtx) manageJob() int32 {
	job := c.job
	active := int32(len(c.activePods))
	parallelism := *job.Spec.Parallelism

	if jobSuspended(job) {
		c.plan.Metrics.SyncAction = SyncActionPodsDeleted
		toDelete := c.activePodsForRemoval(int(active))
		c.deleteJobPods(toDelete, "JobSuspended", fmt.Sprintf("The Job is suspended: its active pods (%d) are deleted.", len(toDelete)))
		active -= int32(len(toDelete))
		return active
	}

	var wantActive int32
	if job.Spec.Completions == nil {
		// Without completions, once a pod succeeded nothing new starts.
		if c.succeeded > 0 {
			wantActive = active
		} else {
			wantActive = parallelism
		}
	} else {
		wantActive = min(*job.Spec.Completions-c.succeeded, parallelism)
		wantActive = max(wantActive, 0)
	}

	rmAtLeast := max(active-wantActive, 0)
	toDelete := c.activePodsForRemoval(int(rmAtLeast))
	if len(toDelete) > MaxPodCreateDeletePerSync {
		toDelete = toDelete[:MaxPodCreateDeletePerSync]
	}
	if len(toDelete) > 0 {
		c.plan.Metrics.SyncAction = SyncActionPodsDeleted
		why := fmt.Sprintf("active pods: %d, wanted: %d", active, wantActive)
		if c.indexed && int32(len(toDelete)) > rmAtLeast {
			why += "; pods with a duplicate, missing or out-of-range completion index go first"
		}
		c.deleteJobPods(toDelete, "TooManyActivePods", fmt.Sprintf("Deleting pods (%d): %s.", len(toDelete), why))
		return active - int32(len(toDelete))
	}

	var terminating int32
	if c.onlyReplaceFailedPods() {
		// Pods being deleted are replaced only once they have failed.
		terminating = c.terminating
	}
	diff := wantActive - terminating - active
	if diff <= 0 {
		c.plan.Metrics.SyncAction = SyncActionTracking
		return active
	}
	c.plan.Metrics.SyncAction = SyncActionPodsCreated
	if !c.hasBackoffLimitPerIndex() {
		if wait := c.backoff.remaining(c.now, c.newBackoffRecord.FailuresAfterLastSuccess, c.newBackoffRecord.LastFailureTime); wait > 0 {
			addRequeue(c.plan, max(wait, SyncJobBatchPeriod), "PodFailureBackoff", fmt.Sprintf(
				"Pods missing: %d, but pod failures since the last success: %d; new pods wait %s for the failure backoff.",
				diff, c.newBackoffRecord.FailuresAfterLastSuccess, wait))
			return active
		}
	}
	diff = min(diff, MaxPodCreateDeletePerSync)

	var indexes []int
	if c.indexed {
		indexes = c.firstPendingIndexes(int(diff))
		if c.hasBackoffLimitPerIndex() {
			var wait time.Duration
			if indexes, wait = c.indexesReadyForCreation(indexes); wait > 0 {
				addRequeue(c.plan, max(wait, SyncJobBatchPeriod), "IndexFailureBackoff", fmt.Sprintf(
					"The missing indexes wait for their failure backoff; the first is ready in %s.", wait))
				return active
			}
		}
		diff = int32(len(indexes))
	}
	if diff == 0 {
		return active
	}
	c.plan.Add(CreatePods{
		Because: because("TooFewActivePods", fmt.Sprintf("Active pods: %d (terminating: %d), wanted: %d; creating %d.",
			active, c.terminating, wantActive, diff)),
		Pods:           c.podsToCreate(int(diff), indexes),
		CreationReason: c.creationReason(),
	})
	return active + diff
}

// deleteJobPods deletes pods the Job no longer wants, removing their tracking
// finalizer first: they are not counted.
func (c *syncCtx) deleteJobPods(pods []*pod, reason, explanation string) {
	if len(pods) == 0 {
		return
	}
	c.plan.Add(DeletePods{
		Because:                 because(reason, explanation),
		Pods:                    c.podRefs(pods),
		RemoveTrackingFinalizer: true,
		ExpectDeletions:         true,
	})
	c.terminating += int32(len(pods))
	c.ready -= countPods(pods, (*pod).isReady)
}

// activePodsForRemoval chooses the active pods to delete: for Indexed Jobs
// first those with a duplicate (all but one), missing or out-of-range index,
// then, to reach rmAtLeast, the cheapest to lose (see lessActive).
func (c *syncCtx) activePodsForRemoval(rmAtLeast int) []*pod {
	var rm, left []*pod
	if c.indexed {
		rm, left = duplicatedIndexPodsForRemoval(slices.Clone(c.activePods), c.completions)
	} else {
		left = slices.Clone(c.activePods)
	}
	if len(rm) < rmAtLeast {
		sortActive(left)
		rm = append(rm, left[:rmAtLeast-len(rm)]...)
	}
	return rm
}

// duplicatedIndexPodsForRemoval splits pods into those to remove (no valid
// index, index out of range, all but the best of each duplicated index) and
// those left.
func duplicatedIndexPodsForRemoval(pods []*pod, completions int) (rm, left []*pod) {
	sortByCompletionIndex(pods)
	lastIndex := unknownCompletionIndex
	first, looped := 0, 0
	for i, p := range pods {
		ix := p.index
		if ix >= completions {
			rm = append(rm, pods[i:]...)
			break
		}
		if ix != lastIndex {
			rm, left = splitSameIndex(rm, left, pods[first:i], lastIndex)
			first, lastIndex = i, ix
		}
		looped++
	}
	return splitSameIndex(rm, left, pods[first:looped], lastIndex)
}

// splitSameIndex keeps the pod of an index least cheap to lose and removes
// the others; pods without an index are all removed.
func splitSameIndex(rm, left, pods []*pod, ix int) ([]*pod, []*pod) {
	if ix == unknownCompletionIndex {
		return append(rm, pods...), left
	}
	if len(pods) == 1 {
		return rm, append(left, pods[0])
	}
	sortActive(pods)
	return append(rm, pods[:len(pods)-1]...), append(left, pods[len(pods)-1])
}

// podsToCreate describes n new pods: for Indexed Jobs one per index, with the
// index annotation, label, hostname, generateName and failure counts.
func (c *syncCtx) podsToCreate(n int, indexes []int) []PodToCreate {
	job := c.job
	var finalizers []string
	if !slices.Contains(job.Spec.Template.Finalizers, c.finalizer) {
		finalizers = []string{c.finalizer}
	}
	pods := make([]PodToCreate, n)
	for i := range pods {
		pod := PodToCreate{GenerateName: podsPrefix(job.Name), Finalizers: finalizers}
		if c.indexed {
			ix := indexes[i]
			ixStr := strconv.Itoa(ix)
			v := int32(ix)
			pod.CompletionIndex = &v
			pod.GenerateName = podGenerateNameWithIndex(job.Name, ix)
			pod.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
			pod.Labels = map[string]string{batchv1.JobCompletionIndexAnnotation: ixStr}
			pod.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ixStr}
			pod.Env = []EnvVarFromField{{
				Name:      completionIndexEnvName,
				FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation),
			}}
			if c.hasBackoffLimitPerIndex() {
				failures, ignored := c.newIndexFailureCounts(c.podsWithDelayedDeletionPerIndex[ix])
				pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failures))
				if ignored > 0 {
					pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
				}
			}
		}
		pods[i] = pod
	}
	return pods
}

// newIndexFailureCounts are the failure counts a pod replacing
// podBeingReplaced inherits, its own failure included.
func (c *syncCtx) newIndexFailureCounts(podBeingReplaced *pod) (failures, ignored int32) {
	if podBeingReplaced == nil {
		return 0, 0
	}
	failures, ignored = podBeingReplaced.failures, podBeingReplaced.ignoredFailures
	if c.job.Spec.PodFailurePolicy != nil && !c.matchPodFailurePolicy(podBeingReplaced.Pod).countFailed {
		ignored = plus(ignored, 1)
	} else {
		failures = plus(failures, 1)
	}
	return failures, ignored
}

func (c *syncCtx) creationReason() string {
	if c.features.JobPodReplacementPolicyOff {
		return PodCreateNew
	}
	prp := batchv1.TerminatingOrFailed
	if c.job.Spec.PodReplacementPolicy != nil {
		prp = *c.job.Spec.PodReplacementPolicy
	}
	switch {
	case prp == batchv1.Failed && c.failed > 0:
		return PodRecreateFailed
	case c.failed > 0 || c.terminating > 0:
		return PodRecreateTerminatingOrFailed
	}
	return PodCreateNew
}

// podsPrefix is "<job>-", or the name alone when the dash would make an
// invalid pod name.
func podsPrefix(jobName string) string {
	if len(jobName)+1 > 253 {
		return jobName
	}
	return jobName + "-"
}

// podGenerateNameWithIndex is "<job>-<index>-", the job name cut so the
// apiserver's random suffix still fits.
func podGenerateNameWithIndex(jobName string, index int) string {
	suffix := "-" + strconv.Itoa(index) + "-"
	prefix := jobName + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}
