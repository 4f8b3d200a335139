// Package engine computes one sync of a Job as the Kubernetes v1.36 Job
// controller does it, as a plan instead of API calls: a pure function of a
// snapshot (the Job, its pods, the executor's expectations and backoff record,
// and the time), with no I/O, no clock and no randomness. The structure
// follows the reference's syncJob so the two can be read side by side.
package engine

import (
	"cmp"
	"fmt"
	"math"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Limits and delays of the reference.
const (
	// MaxUncountedPods bounds status.uncountedTerminatedPods (about 20 KB).
	MaxUncountedPods = 500
	// MaxPodCreateDeletePerSync bounds the pods created or deleted per sync.
	MaxPodCreateDeletePerSync = 500
	// SyncJobBatchPeriod is the shortest delay of a requeue.
	SyncJobBatchPeriod = time.Second
)

// Snapshot is what one sync sees.
type Snapshot struct {
	// Job is the Job with the API server's defaults applied; not modified.
	Job *batchv1.Job
	// Pods are the pods the Job controls, in any order; not modified.
	Pods []*corev1.Pod
	// Now is the time of the sync.
	Now time.Time
	// Expectations are the creations and deletions not yet observed.
	Expectations Expectations
	// FinalizerRemovalsInFlight are pods whose finalizer removal is not yet
	// observed.
	FinalizerRemovalsInFlight []types.UID
	// Backoff is the Job's pod failure backoff record; nil when none.
	Backoff *BackoffRecord
	// TrackingFinalizer is the pod tracking finalizer's name.
	TrackingFinalizer string
	// Backoff of pod failures; zero is the reference's (10 s, at most
	// 10 min).
	PodFailureBackoff PodFailureBackoff
	// Features are the feature gates followed; zero is v1.36's (all on).
	Features Features
	// Views, when not nil, are View(Pods[i], TrackingFinalizer) for each
	// pod (or ViewWith, for pods decoded without the annotations a sync
	// reads), kept by a caller that plans successive snapshots of mostly
	// the same pods; the sync then does not work them out again. Not
	// modified.
	Views []PodView
}

// PodView is what a sync reads of a pod over and over (its completion
// index, tracking finalizer, phase, deletion and readiness), worked out once.
type PodView struct{ view pod }

// View is the view of p for a sync whose tracking finalizer is finalizer
// (empty: the default).
func View(p *corev1.Pod, finalizer string) PodView {
	return PodView{viewOf(p, cmp.Or(finalizer, DefaultTrackingFinalizer))}
}

// ViewWith is View of a pod whose annotations a sync reads are a, not in
// its map: a decoder that keeps them out of the pod (AnnotationKeys) spares
// the map of most pods.
func ViewWith(p *corev1.Pod, finalizer string, a PodAnnotations) PodView {
	return PodView{viewWith(p, cmp.Or(finalizer, DefaultTrackingFinalizer), a)}
}

// syncCtx is the state of one sync (the reference's syncJobCtx).
type syncCtx struct {
	now       time.Time
	backoff   PodFailureBackoff
	features  Features
	finalizer string
	// job is a copy of the snapshot's Job whose status the sync rewrites.
	job         *batchv1.Job
	pods        []*pod
	activePods  []*pod
	indexed     bool
	completions int // meaningful for Indexed Jobs only

	finishedCondition    *batchv1.JobCondition
	succeeded            int32
	failed               int32
	ready                int32
	terminating          int32
	prevSucceededIndexes orderedIntervals
	succeededIndexes     orderedIntervals
	failedIndexes        *orderedIntervals
	newBackoffRecord     BackoffRecord
	expectedRmFinalizers map[types.UID]bool
	uncountedSucceeded   map[types.UID]bool
	uncountedFailed      map[types.UID]bool
	// podsWithDelayedDeletionPerIndex: the last failed pod of each index,
	// kept until its replacement carries its failure count.
	podsWithDelayedDeletionPerIndex map[int]*pod

	plan        *Plan
	startStatus batchv1.JobStatus
}

// Sync plans one sync of the Job in s.
func Sync(s *Snapshot) *Plan {
	plan := &Plan{}
	if jobFinished(s.Job) {
		plan.Summary = "The Job is finished; nothing to do."
		plan.ReleaseJobState = true
		return plan
	}
	if mode := s.Job.Spec.CompletionMode; mode != nil && *mode != batchv1.NonIndexedCompletion && *mode != batchv1.IndexedCompletion {
		plan.Summary = fmt.Sprintf("Unknown completion mode %q; the sync is skipped.", *mode)
		addEvent(plan, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return plan
	}
	c := newSyncCtx(s, plan)
	c.plan.Metrics.CompletionMode = string(batchv1.NonIndexedCompletion)
	if c.indexed {
		c.plan.Metrics.CompletionMode = string(batchv1.IndexedCompletion)
	}
	c.plan.Metrics.SyncAction = SyncActionReconciling
	c.sync(s)
	c.summarize()
	return plan
}

func newSyncCtx(s *Snapshot, plan *Plan) *syncCtx {
	job := *s.Job
	job.Status = *s.Job.Status.DeepCopy()
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	// The reference's results may depend on the order the informer lists
	// pods in; a canonical order (name, then UID, which is unique) makes ours
	// depend on nothing but content.
	finalizer := cmp.Or(s.TrackingFinalizer, DefaultTrackingFinalizer)
	wrapped := make([]pod, len(s.Pods))
	pods := make([]*pod, len(s.Pods))
	for i, p := range s.Pods {
		if s.Views != nil {
			wrapped[i] = s.Views[i].view
		} else {
			wrapped[i] = viewOf(p, finalizer)
		}
		pods[i] = &wrapped[i]
	}
	sortCanonically(pods)
	c := &syncCtx{
		now:                  s.Now,
		backoff:              s.PodFailureBackoff,
		features:             s.Features,
		finalizer:            finalizer,
		job:                  &job,
		pods:                 pods,
		indexed:              isIndexed(&job),
		expectedRmFinalizers: setOf(s.FinalizerRemovalsInFlight),
		uncountedSucceeded:   setOf(job.Status.UncountedTerminatedPods.Succeeded),
		uncountedFailed:      setOf(job.Status.UncountedTerminatedPods.Failed),
		plan:                 plan,
		startStatus:          s.Job.Status, // read only: the sync rewrites its copy
	}
	if c.indexed && job.Spec.Completions != nil {
		c.completions = int(*job.Spec.Completions)
	}
	return c
}

// sync is the reference's syncJob after its early returns.
func (c *syncCtx) sync(s *Snapshot) {
	job := c.job
	satisfiedExpectations := s.Expectations.Satisfied(c.now)

	c.activePods = filterPods(c.pods, (*pod).active)
	c.ready = countPods(c.activePods, (*pod).isReady)
	c.terminating = countPods(c.pods, (*pod).terminating)
	active := int32(len(c.activePods))
	newSucceededPods, newFailedPods := c.newFinishedPods()
	c.succeeded = plus(job.Status.Succeeded, len(newSucceededPods)+len(c.uncountedSucceeded))
	c.failed = plus(job.Status.Failed, int(c.nonIgnoredFailedCount(newFailedPods))+len(c.uncountedFailed))

	if job.Status.StartTime == nil && !jobSuspended(job) {
		job.Status.StartTime = timePtr(c.now)
	}
	var backoff BackoffRecord
	if s.Backoff != nil {
		backoff = *s.Backoff
	}
	c.newBackoffRecord = nextBackoffRecord(backoff, newSucceededPods, newFailedPods)

	// Terminal criteria, in the reference's order: an earlier sync's
	// SuccessCriteriaMet or FailureTarget, the pod failure policy, the
	// backoff limit, the active deadline, the per-index limits, the success
	// policy; completions come last, after manageJob.
	exceedsBackoffLimit := c.failed > *job.Spec.BackoffLimit
	if successCriteriaMetRead(c.features) {
		c.finishedCondition = trueCondition(job, batchv1.JobSuccessCriteriaMet)
	}
	if c.finishedCondition == nil {
		if ft := trueCondition(job, batchv1.JobFailureTarget); ft != nil {
			c.finishedCondition = newCondition(batchv1.JobFailed, corev1.ConditionTrue, ft.Reason, ft.Message, c.now)
		} else if msg := c.failJobMessage(); msg != nil {
			c.finishedCondition = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonPodFailurePolicy, *msg, c.now)
		}
	}
	if c.finishedCondition == nil {
		switch {
		case exceedsBackoffLimit || c.pastBackoffLimitOnFailure():
			c.finishedCondition = c.failureCondition(batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
		case c.pastActiveDeadline():
			c.finishedCondition = c.failureCondition(batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")
		case c.activeDeadline() != nil && !jobSuspended(job):
			left := max(job.Status.StartTime.Add(*c.activeDeadline()).Sub(c.now), 0)
			addRequeue(c.plan, left, "ActiveDeadline",
				fmt.Sprintf("Sync again when the active deadline of %ds is reached, in %s.", *job.Spec.ActiveDeadlineSeconds, left))
		}
	}

	if c.indexed {
		c.prevSucceededIndexes, c.succeededIndexes = c.calculateSucceededIndexes()
		c.succeeded = int32(c.succeededIndexes.total())
		if c.hasBackoffLimitPerIndex() {
			c.failedIndexes = c.calculateFailedIndexes()
			if c.finishedCondition == nil {
				if job.Spec.MaxFailedIndexes != nil && c.failedIndexes.total() > int(*job.Spec.MaxFailedIndexes) {
					c.finishedCondition = c.failureCondition(batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes")
				} else if c.failedIndexes.total() > 0 && c.failedIndexes.total()+c.succeededIndexes.total() >= c.completions {
					c.finishedCondition = c.failureCondition(batchv1.JobReasonFailedIndexes, "Job has failed indexes")
				}
			}
			c.podsWithDelayedDeletionPerIndex = c.podsWithDelayedDeletion()
		}
		if c.finishedCondition == nil {
			if msg, met := c.matchSuccessPolicy(); met {
				c.finishedCondition = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, msg, c.now)
			}
		}
	}

	suspendCondChanged := false
	if c.finishedCondition != nil {
		deleted, deletedReady := c.deleteActivePods()
		if deleted != active || !satisfiedExpectations {
			// Pods may be missing from the snapshot: not finished yet.
			c.finishedCondition = nil
		}
		active -= deleted
		c.terminating += deleted
		c.ready -= deletedReady
	} else {
		manageJobCalled := false
		if satisfiedExpectations && job.DeletionTimestamp == nil {
			active = c.manageJob()
			manageJobCalled = true
		}
		var complete bool
		if job.Spec.Completions == nil {
			// Any success completes the Job once nothing runs.
			complete = c.succeeded > 0 && active == 0
		} else {
			complete = c.succeeded >= *job.Spec.Completions && active == 0
		}
		if complete {
			c.finishedCondition = c.successCondition()
		} else if manageJobCalled {
			suspendCondChanged = c.updateSuspendedCondition()
		}
	}

	needsStatusUpdate := suspendCondChanged || active != job.Status.Active || !int32PtrEqual(&c.ready, job.Status.Ready)
	var terminating *int32
	if !c.features.JobPodReplacementPolicyOff {
		terminating = &c.terminating
	}
	needsStatusUpdate = needsStatusUpdate || !int32PtrEqual(job.Status.Terminating, terminating)
	job.Status.Active = active
	job.Status.Ready = &c.ready
	job.Status.Terminating = terminating
	c.trackJobStatusAndRemoveFinalizers(needsStatusUpdate)
}

// updateSuspendedCondition keeps the Suspended condition in step with
// spec.suspend, with its event; a Job suspended anew loses its start time
// (with MutableSchedulingDirectivesForSuspendedJobs), a resumed one starts
// now.
func (c *syncCtx) updateSuspendedCondition() bool {
	job := c.job
	var updated bool
	if jobSuspended(job) {
		job.Status.Conditions, updated = ensureJobConditionStatus(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", c.now)
		if updated {
			addEvent(c.plan, corev1.EventTypeNormal, "Suspended", "Job suspended")
			if !c.features.MutableSchedulingDirectivesForSuspendedJobsOff {
				job.Status.StartTime = nil
			}
		}
		return updated
	}
	job.Status.Conditions, updated = ensureJobConditionStatus(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", c.now)
	if updated {
		addEvent(c.plan, corev1.EventTypeNormal, "Resumed", "Job resumed")
		// activeDeadlineSeconds counts continuous activity: it restarts now.
		job.Status.StartTime = timePtr(c.now)
	}
	return updated
}

// newFinishedPods are the finished pods not yet counted: they carry the
// finalizer, are not in uncountedTerminatedPods, have no finalizer removal
// in flight and, for Indexed Jobs, have a valid index.
func (c *syncCtx) newFinishedPods() (succeeded, failed []*pod) {
	succeeded = c.validPodsWithFilter(c.uncountedSucceeded, func(p *pod) bool { return p.phase == corev1.PodSucceeded })
	failed = c.validPodsWithFilter(c.uncountedFailed, c.isPodFailed)
	return succeeded, failed
}

func (c *syncCtx) validPodsWithFilter(uncounted map[types.UID]bool, keep func(*pod) bool) []*pod {
	var out []*pod
	for _, p := range c.pods {
		if !p.tracked || uncounted[p.UID] || c.expectedRmFinalizers[p.UID] {
			continue
		}
		if c.indexed && (p.index == unknownCompletionIndex || p.index >= c.completions) {
			continue
		}
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func (c *syncCtx) nonIgnoredFailedCount(failed []*pod) int32 {
	n := int32(len(failed))
	if c.job.Spec.PodFailurePolicy != nil {
		for _, p := range failed {
			if !c.matchPodFailurePolicy(p.Pod).countFailed {
				n--
			}
		}
	}
	return n
}

// failJobMessage is the message of the first failed pod matching a FailJob
// rule.
func (c *syncCtx) failJobMessage() *string {
	if c.job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range c.pods {
		if c.isPodFailed(p) {
			if m := c.matchPodFailurePolicy(p.Pod); m.failJobMessage != nil {
				return m.failJobMessage
			}
		}
	}
	return nil
}

// pastBackoffLimitOnFailure: with restartPolicy OnFailure, container restarts
// of running and pending pods count as failures.
func (c *syncCtx) pastBackoffLimitOnFailure() bool {
	if c.job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range c.pods {
		if p.phase == corev1.PodRunning || p.phase == corev1.PodPending {
			for _, s := range p.Status.InitContainerStatuses {
				restarts += s.RestartCount
			}
			for _, s := range p.Status.ContainerStatuses {
				restarts += s.RestartCount
			}
		}
	}
	if *c.job.Spec.BackoffLimit == 0 {
		return restarts > 0
	}
	return restarts >= *c.job.Spec.BackoffLimit
}

func (c *syncCtx) pastActiveDeadline() bool {
	job := c.job
	deadline := c.activeDeadline()
	if deadline == nil || job.Status.StartTime == nil || jobSuspended(job) {
		return false
	}
	return c.now.Sub(job.Status.StartTime.Time) >= *deadline
}

// activeDeadline is spec.activeDeadlineSeconds as a Duration, nil when
// there is none. One longer than a Duration holds (292 years) is none: the
// reference's product overflows and gives it another deadline, often a
// negative one that fails the Job at once (contract:
// JobSpec.active_deadline_seconds).
func (c *syncCtx) activeDeadline() *time.Duration {
	seconds := c.job.Spec.ActiveDeadlineSeconds
	if seconds == nil || *seconds > math.MaxInt64/int64(time.Second) {
		return nil
	}
	return ptr.To(time.Duration(*seconds) * time.Second)
}

// failureCondition is FailureTarget: Failed is added only once no pod runs
// (Failed at once with the gates that delay it off).
func (c *syncCtx) failureCondition(reason, message string) *batchv1.JobCondition {
	if !delayTerminalCondition(c.features) {
		return newCondition(batchv1.JobFailed, corev1.ConditionTrue, reason, message, c.now)
	}
	return newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, reason, message, c.now)
}

// successCondition is SuccessCriteriaMet on reaching the completions
// (Complete at once with the gates that delay it off, and without reason
// nor message with JobSuccessPolicy off).
func (c *syncCtx) successCondition() *batchv1.JobCondition {
	t := batchv1.JobSuccessCriteriaMet
	if !delayTerminalCondition(c.features) {
		t = batchv1.JobComplete
	}
	var reason, message string
	if !c.features.JobSuccessPolicyOff {
		reason, message = batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"
	}
	return newCondition(t, corev1.ConditionTrue, reason, message, c.now)
}

// matchSuccessPolicy is the success policy's verdict on the succeeded
// indexes, none with JobSuccessPolicy off.
func (c *syncCtx) matchSuccessPolicy() (string, bool) {
	if c.features.JobSuccessPolicyOff {
		return "", false
	}
	return matchSuccessPolicy(c.job.Spec.SuccessPolicy, *c.job.Spec.Completions, c.succeededIndexes)
}

// isSuccessCriteriaMet: cond is a true SuccessCriteriaMet the gates let
// count.
func (c *syncCtx) isSuccessCriteriaMet(cond *batchv1.JobCondition) bool {
	return successCriteriaMetRead(c.features) && isSuccessCriteriaMet(cond)
}

// matchPodFailurePolicy applies the Job's pod failure policy to a failed
// pod.
func (c *syncCtx) matchPodFailurePolicy(p *corev1.Pod) failurePolicyMatch {
	return matchPodFailurePolicy(c.job.Spec.PodFailurePolicy, p, !c.features.JobBackoffLimitPerIndexOff)
}

// isPodFailed: the pod failed, or is being deleted without having succeeded
// (unless only failed pods are replaced).
func (c *syncCtx) isPodFailed(p *pod) bool {
	if p.phase == corev1.PodFailed {
		return true
	}
	if c.onlyReplaceFailedPods() {
		return false
	}
	return p.deleting && p.phase != corev1.PodSucceeded
}

// deleteActivePods stops the pods of a finishing Job, keeping their
// finalizers so they are counted once terminal.
func (c *syncCtx) deleteActivePods() (deleted, deletedReady int32) {
	if len(c.activePods) == 0 {
		return 0, 0
	}
	cond := c.finishedCondition
	c.plan.Add(DeletePods{
		Because: because(cond.Reason, fmt.Sprintf("The Job met its %s criterion (%s): its active pods (%d) are deleted, keeping their tracking finalizers so they are counted once terminal.",
			cond.Type, cond.Reason, len(c.activePods))),
		Pods: c.podRefs(c.activePods),
	})
	return int32(len(c.activePods)), countPods(c.activePods, (*pod).isReady)
}

func (c *syncCtx) podRefs(pods []*pod) []PodRef {
	refs := make([]PodRef, len(pods))
	for i, p := range pods {
		refs[i] = PodRef{Name: p.Name, UID: p.UID}
		if p.index != unknownCompletionIndex && (!c.indexed || p.index < c.completions) {
			v := int32(p.index)
			refs[i].CompletionIndex = &v
		}
	}
	return refs
}

// sortCanonically orders pods by name, then UID (unique). The names of a
// Job's pods share a prefix; the next eight bytes, packed in an integer kept
// beside each pod, settle most comparisons without reading the names again,
// which matters once the pods no longer fit in the CPU caches.
func sortCanonically(pods []*pod) {
	if len(pods) < 2 {
		return
	}
	prefix := len(pods[0].Name)
	for _, p := range pods[1:] {
		prefix = min(prefix, commonPrefixLen(pods[0].Name, p.Name))
	}
	sortByKey(pods, func(p *pod) canonicalKey {
		return canonicalKey{bigEndianWord(p.Name[prefix:]), p}
	}, func(a, b canonicalKey) int {
		if c := cmp.Compare(a.word, b.word); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.pod.Name, b.pod.Name), cmp.Compare(a.pod.UID, b.pod.UID))
	})
}

// canonicalKey is a pod's place in the canonical order: most comparisons
// end at word.
type canonicalKey struct {
	word uint64
	pod  *pod
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// bigEndianWord packs the first eight bytes of s, zero-padded: it orders
// like the strings do (pod names hold no zero bytes).
func bigEndianWord(s string) uint64 {
	var w uint64
	for i := range 8 {
		w <<= 8
		if i < len(s) {
			w |= uint64(s[i])
		}
	}
	return w
}

func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobSuspended(j *batchv1.Job) bool { return j.Spec.Suspend != nil && *j.Spec.Suspend }

func isIndexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

// hasBackoffLimitPerIndex: the Job has per-index backoff limits, which
// JobBackoffLimitPerIndex off ignores.
func (c *syncCtx) hasBackoffLimitPerIndex() bool {
	return !c.features.JobBackoffLimitPerIndexOff && c.job.Spec.BackoffLimitPerIndex != nil
}

// onlyReplaceFailedPods: podReplacementPolicy Failed (read with
// JobPodReplacementPolicy on), implied by a pod failure policy.
func (c *syncCtx) onlyReplaceFailedPods() bool {
	j := c.job
	if !c.features.JobPodReplacementPolicyOff && j.Spec.PodReplacementPolicy != nil && *j.Spec.PodReplacementPolicy == batchv1.Failed {
		return true
	}
	return j.Spec.PodFailurePolicy != nil
}

func setOf(uids []types.UID) map[types.UID]bool {
	set := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		set[u] = true
	}
	return set
}

func int32PtrEqual(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
