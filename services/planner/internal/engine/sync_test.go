package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestSyncJob mirrors the reference's TestControllerSyncJob
// (pkg/controller/job/job_controller_test.go) with the v1.36 feature gates:
// terminating pods are always reported, terminal conditions are preceded by
// FailureTarget / SuccessCriteriaMet and delayed while pods terminate, and
// podReplacementPolicy is defaulted (TerminatingOrFailed, or Failed with a
// pod failure policy). Every action of the plan is assumed to succeed, so the
// reference's pod-control error cases have no counterpart.

// sjStatus is the status a case expects the sync to write last.
type sjStatus struct {
	active, ready, succeeded, failed, terminating int32
	completedIndexes                              string
	failedIndexes                                 *string
	conditions                                    []sjCond
	uncountedSucceeded, uncountedFailed           int
	// noStartTime: status.startTime must be nil (suspended Jobs).
	noStartTime bool
	// startTime, when set, is the expected status.startTime.
	startTime time.Time
	// completionTime: status.completionTime must be set.
	completionTime bool
}

type sjCond struct {
	Type    batchv1.JobConditionType
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

type sjCase struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	opts []syncOpt

	created        int
	createdIndexes []int
	deleted        int
	// deletedNames, when set, are the pods deleted (in any order).
	deletedNames []string
	// patches counts tracking-finalizer removals, as the reference's
	// FakePodControl.Patches: those done before deleting excess pods and
	// those of finished pods.
	patches int
	// status is the last status written; nil means no status write.
	status *sjStatus
	events []string
	// requeues are the delays of the planned requeues.
	requeues []time.Duration
}

// Builders, prefixed sj.

const (
	sjCompletionsReachedMsg = "Reached expected number of succeeded pods"
	sjBackoffLimitMsg       = "Job has reached the specified backoff limit"
	sjDeadlineMsg           = "Job was active longer than specified deadline"
)

func sjC(t batchv1.JobConditionType, s corev1.ConditionStatus, reason, msg string) sjCond {
	return sjCond{Type: t, Status: s, Reason: reason, Message: msg}
}

// sjComplete are the conditions of a Job completed by reaching completions.
func sjComplete() []sjCond {
	return []sjCond{
		sjC(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, sjCompletionsReachedMsg),
		sjC(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, sjCompletionsReachedMsg),
	}
}

func sjFailureTarget(reason, msg string) sjCond {
	return sjC(batchv1.JobFailureTarget, corev1.ConditionTrue, reason, msg)
}

func sjFailed(reason, msg string) sjCond {
	return sjC(batchv1.JobFailed, corev1.ConditionTrue, reason, msg)
}

// sjFinished gives finished pods a container that terminated an hour ago,
// as the reference's pods (which finished at the epoch), so no pod failure
// backoff is pending.
func sjFinished(code int32) podOpt {
	return exitCode("main", code, now.Add(-time.Hour))
}

// sjSetup mirrors the reference's setPodsStatuses: pending, running (the
// first `ready` of them ready), succeeded, failed and terminating pods, all
// with the tracking finalizer.
func sjSetup(pendingN, runningN, readyN, succ, fail, terminating int) []*corev1.Pod {
	var out []*corev1.Pod
	out = append(out, pods("pending", pendingN, pending)...)
	for i, p := range pods("running", runningN, running) {
		if i < readyN {
			ready(now.Add(-time.Minute))(p)
		}
		out = append(out, p)
	}
	out = append(out, pods("succeeded", succ, succeeded, sjFinished(0))...)
	out = append(out, pods("failed", fail, failed, sjFinished(1))...)
	out = append(out, pods("terminating", terminating, running, sjDeletedLongAgo())...)
	return out
}

// sjDeletedLongAgo marks a pod deleted an hour ago: as a failure it is past
// any pod failure backoff.
func sjDeletedLongAgo() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = timePtr(now.Add(-time.Hour)) }
}

// sjIx mirrors the reference's setPodsStatusesWithIndexes: a pod with the
// given completion index annotation ("" for none) and phase.
func sjIx(name, ix string, ph corev1.PodPhase, opts ...podOpt) *corev1.Pod {
	all := []podOpt{phase(ph)}
	if ix != "" {
		all = append(all, annotation(batchv1.JobCompletionIndexAnnotation, ix))
	}
	if ph == corev1.PodSucceeded {
		all = append(all, sjFinished(0))
	}
	if ph == corev1.PodFailed {
		all = append(all, sjFinished(1))
	}
	return newPod(name, append(all, opts...)...)
}

func sjJoin(lists ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func sjPodList(ps ...*corev1.Pod) []*corev1.Pod { return ps }

func sjStarted() jobOpt { return startedAt(now.Add(-time.Hour)) }

func sjPRP(p batchv1.PodReplacementPolicy) jobOpt { return replacementPolicy(p) }

func sjCounters(active, succeeded, failed int32) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded, s.Failed = active, succeeded, failed
	})
}

func sjReadyTerminating(ready, terminating int32) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.Ready, s.Terminating = ptr.To(ready), ptr.To(terminating)
	})
}

func sjConditionMsg(t batchv1.JobConditionType, st corev1.ConditionStatus, reason, msg string) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.Conditions = append(s.Conditions, *newCondition(t, st, reason, msg, now.Add(-time.Minute)))
	})
}

func sjUncounted(succeeded, failed []types.UID) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: succeeded, Failed: failed}
	})
}

func sjCompleted(indexes string) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) { s.CompletedIndexes = indexes })
}

func sjPendingDeletions(n int32) syncOpt {
	return func(s *Snapshot) {
		s.Expectations = Expectations{PendingDeletions: n, RecordedAt: now.Add(-time.Second)}
	}
}

func sjExpectationsAt(creations int32, at time.Time) syncOpt {
	return func(s *Snapshot) { s.Expectations = Expectations{PendingCreations: creations, RecordedAt: at} }
}

func sjExitCodeRule(action batchv1.PodFailurePolicyAction, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:      action,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes},
	}
}

func TestSyncJob(t *testing.T) {
	ix := func(i int) podOpt { return index(i) }
	cases := map[string]sjCase{
		// ---- Counting and creating (reference: "job start" ... "status change").
		"job start creates parallelism pods": {
			job:     newJob(2, 5),
			created: 2,
			status:  &sjStatus{active: 2},
		},
		"work queue job start creates parallelism pods": {
			job:     newJob(2, -1),
			created: 2,
			status:  &sjStatus{active: 2},
		},
		"pending pods count as active": {
			job:    newJob(2, 5),
			pods:   sjSetup(2, 0, 0, 0, 0, 0),
			status: &sjStatus{active: 2},
		},
		"running pods count as active and ready ones as ready": {
			job:    newJob(3, 5),
			pods:   sjSetup(0, 3, 2, 0, 0, 0),
			status: &sjStatus{active: 3, ready: 2},
		},
		"work queue job with parallelism running pods creates nothing": {
			job:    newJob(2, -1),
			pods:   sjSetup(0, 2, 0, 0, 0, 0),
			status: &sjStatus{active: 2},
		},
		"too few active pods: succeeded pod counted and one pod created": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 1, 0, 1, 0, 0),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 2, succeeded: 1},
		},
		"work queue job with podReplacementPolicy Failed counts the failed pod and does not replace the terminating one": {
			job:     newJob(1, -1, sjPRP(batchv1.Failed)),
			pods:    sjSetup(0, 1, 0, 0, 1, 1),
			patches: 1,
			status:  &sjStatus{active: 1, failed: 1, terminating: 1},
		},
		"defaulted podReplacementPolicy counts terminating pods as failed": {
			job:     newJob(1, 1),
			pods:    sjSetup(0, 1, 0, 0, 1, 1),
			patches: 2,
			status:  &sjStatus{active: 1, failed: 2, terminating: 1},
		},
		"work queue job with podReplacementPolicy TerminatingOrFailed counts terminating pods as failed": {
			job:     newJob(1, -1, sjPRP(batchv1.TerminatingOrFailed)),
			pods:    sjSetup(0, 1, 0, 0, 1, 1),
			patches: 2,
			status:  &sjStatus{active: 1, failed: 2, terminating: 1},
		},
		"more terminating pods than parallelism: excess active pod deleted": {
			job:     newJob(1, 1, sjPRP(batchv1.Failed)),
			pods:    sjSetup(0, 2, 0, 0, 0, 4),
			deleted: 1,
			patches: 1,
			status:  &sjStatus{active: 1, terminating: 5},
		},
		"more terminating pods than parallelism with a pod failure policy": {
			job:     newJob(1, 1, failurePolicy()),
			pods:    sjSetup(0, 2, 0, 0, 0, 4),
			deleted: 1,
			patches: 1,
			status:  &sjStatus{active: 1, terminating: 5},
		},
		"active pod failure backoff delays creations": {
			job:      newJob(1, 1, startedAt(now)),
			opts:     []syncOpt{withBackoff(1, now)},
			requeues: []time.Duration{10 * time.Second},
			status:   &sjStatus{startTime: now},
		},
		"active pod failure backoff keeps the active count of running pods": {
			job:      newJob(2, 2, startedAt(now)),
			pods:     sjSetup(0, 1, 1, 0, 0, 0),
			opts:     []syncOpt{withBackoff(1, now)},
			requeues: []time.Duration{10 * time.Second},
			status:   &sjStatus{active: 1, ready: 1},
		},
		"backoff record without failures does not delay creations": {
			job:     newJob(1, 1),
			opts:    []syncOpt{withBackoff(0, now)},
			created: 1,
			status:  &sjStatus{active: 1},
		},
		"work queue job with too few active pods creates the missing one": {
			job:     newJob(2, -1),
			pods:    sjSetup(0, 1, 0, 0, 0, 0),
			created: 1,
			status:  &sjStatus{active: 2},
		},
		"too many active pods: the excess is deleted and reported terminating": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 3, 0, 0, 0, 0),
			deleted: 1,
			patches: 1,
			status:  &sjStatus{active: 2, terminating: 1},
		},
		"too many ready pods: ready count drops by the deleted ready pod": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 3, 3, 0, 0, 0),
			deleted: 1,
			patches: 1,
			status:  &sjStatus{active: 2, ready: 2, terminating: 1},
		},
		"failed and succeeded pods: both counted, missing pod created": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 1, 0, 1, 1, 0),
			created: 1,
			patches: 2,
			status:  &sjStatus{active: 2, succeeded: 1, failed: 1},
		},
		"new failed pod is counted and replaced": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 1, 0, 0, 1, 0),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 2, failed: 1},
		},
		"failed count from status is kept and nothing is created": {
			job:    newJob(1, 1, sjStarted(), sjCounters(1, 0, 1)),
			pods:   sjSetup(0, 1, 0, 0, 0, 0),
			status: &sjStatus{active: 1, failed: 1},
		},
		"job finishes when completions succeeded": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 0, 0, 5, 0, 0),
			patches: 5,
			status:  &sjStatus{succeeded: 5, conditions: sjComplete(), completionTime: true},
			events:  []string{"Normal Completed"},
		},
		"work queue job with a success waits for running pods": {
			job:     newJob(2, -1),
			pods:    sjSetup(0, 1, 0, 1, 0, 0),
			patches: 1,
			status:  &sjStatus{active: 1, succeeded: 1},
		},
		"work queue job completes once all pods succeeded": {
			job:     newJob(2, -1),
			pods:    sjSetup(0, 0, 0, 2, 0, 0),
			patches: 2,
			status:  &sjStatus{succeeded: 2, conditions: sjComplete(), completionTime: true},
			events:  []string{"Normal Completed"},
		},
		"work queue job completes despite one failure": {
			job:     newJob(2, -1),
			pods:    sjSetup(0, 0, 0, 1, 1, 0),
			patches: 2,
			status:  &sjStatus{succeeded: 1, failed: 1, conditions: sjComplete(), completionTime: true},
			events:  []string{"Normal Completed"},
		},
		"more active pods than parallelism: the excess is deleted": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 10, 0, 0, 0, 0),
			deleted: 8,
			patches: 8,
			status:  &sjStatus{active: 2, terminating: 8},
		},
		"more active pods than remaining completions: the excess is deleted": {
			job:     newJob(3, 4),
			pods:    sjSetup(0, 3, 0, 2, 0, 0),
			deleted: 1,
			patches: 3,
			status:  &sjStatus{active: 2, succeeded: 2, terminating: 1},
		},
		"status change: succeeded pods counted with parallelism running": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 2, 0, 2, 0, 0),
			patches: 2,
			status:  &sjStatus{active: 2, succeeded: 2},
		},
		"deleting job: no pod management, all finalizers removed, successes counted": {
			job:     newJob(2, 5, deletingJob()),
			pods:    sjSetup(1, 1, 0, 1, 0, 0),
			patches: 3,
			status:  &sjStatus{active: 2, succeeded: 1},
		},
		"deleting job does not create pods": {
			job:    newJob(2, 5, deletingJob()),
			status: &sjStatus{},
		},
		"deleting job counts failed pods": {
			job:     newJob(2, 5, deletingJob()),
			pods:    sjSetup(0, 1, 0, 0, 1, 0),
			patches: 2,
			status:  &sjStatus{active: 1, failed: 1},
		},
		"large parallelism creates one pod per missing slot": {
			job:     newJob(100, 200),
			created: 100,
			status:  &sjStatus{active: 100},
		},
		"creations are capped per sync": {
			job:     newJob(1000, 1000),
			created: MaxPodCreateDeletePerSync,
			status:  &sjStatus{active: MaxPodCreateDeletePerSync},
		},
		"deletions are capped per sync": {
			job:     newJob(1, 5),
			pods:    sjSetup(0, 600, 0, 0, 0, 0),
			deleted: MaxPodCreateDeletePerSync,
			patches: MaxPodCreateDeletePerSync,
			status:  &sjStatus{active: 100, terminating: MaxPodCreateDeletePerSync},
		},
		"too many job failures on a deleting job fails it": {
			job:     newJob(2, 5, backoffLimit(0), deletingJob()),
			pods:    sjSetup(0, 0, 0, 0, 1, 0),
			patches: 1,
			status: &sjStatus{failed: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
				sjFailed(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
			events: []string{"Warning " + batchv1.JobReasonBackoffLimitExceeded},
		},
		"job failures with unsatisfied expectations: counted, no condition": {
			job:     newJob(2, 5, backoffLimit(0), deletingJob()),
			pods:    sjSetup(0, 0, 0, 0, 1, 0),
			opts:    []syncOpt{unsatisfiedExpectations()},
			patches: 1,
			status:  &sjStatus{failed: 1},
		},
		"failing job with unsatisfied expectations deletes active pods but adds no condition": {
			job:     newJob(2, 5, backoffLimit(0)),
			pods:    sjSetup(0, 1, 0, 0, 1, 0),
			opts:    []syncOpt{unsatisfiedExpectations()},
			deleted: 1,
			patches: 1,
			status:  &sjStatus{failed: 1, terminating: 1},
		},

		// ---- Indexed Jobs.
		"indexed job start creates the lowest indexes": {
			job:            newJob(2, 5, indexed()),
			created:        2,
			createdIndexes: []int{0, 1},
			status:         &sjStatus{active: 2},
		},
		"indexed job with podReplacementPolicy Failed does not replace a terminating pod": {
			job:            newJob(2, 5, indexed(), sjPRP(batchv1.Failed)),
			pods:           sjSetup(0, 0, 0, 0, 0, 1),
			created:        1,
			createdIndexes: []int{0},
			status:         &sjStatus{active: 1, terminating: 1},
		},
		"indexed job with podReplacementPolicy TerminatingOrFailed replaces a terminating pod": {
			job:            newJob(2, 5, indexed(), sjPRP(batchv1.TerminatingOrFailed)),
			pods:           sjSetup(0, 0, 0, 0, 0, 1),
			created:        2,
			createdIndexes: []int{0, 1},
			patches:        1,
			status:         &sjStatus{active: 2, terminating: 1},
		},
		"indexed job completed": {
			job: newJob(2, 3, indexed()),
			pods: sjPodList(
				sjIx("a", "0", corev1.PodSucceeded),
				sjIx("b", "1", corev1.PodFailed),
				sjIx("c", "1", corev1.PodSucceeded),
				sjIx("d", "2", corev1.PodSucceeded),
			),
			patches: 4,
			status:  &sjStatus{succeeded: 3, failed: 1, completedIndexes: "0-2", conditions: sjComplete(), completionTime: true},
			events:  []string{"Normal Completed"},
		},
		"indexed job past backoff limit: FailureTarget while its pod terminates": {
			job: newJob(2, 3, indexed(), backoffLimit(0)),
			pods: sjPodList(
				sjIx("a", "0", corev1.PodSucceeded),
				sjIx("b", "1", corev1.PodFailed),
				sjIx("c", "2", corev1.PodRunning),
			),
			deleted:      1,
			deletedNames: []string{"c"},
			patches:      3,
			status: &sjStatus{succeeded: 1, failed: 2, terminating: 1, completedIndexes: "0", conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
		},
		"job past backoff limit deletes ready pods and counts them failed": {
			job:     newJob(2, 3, backoffLimit(0)),
			pods:    sjSetup(0, 2, 2, 0, 1, 0),
			deleted: 2,
			patches: 3,
			status: &sjStatus{failed: 3, terminating: 2, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
		},
		"indexed job repeated completed index counted once": {
			job: newJob(2, 3, indexed()),
			pods: sjPodList(
				sjIx("a", "0", corev1.PodSucceeded),
				sjIx("b", "1", corev1.PodSucceeded),
				sjIx("c", "1", corev1.PodSucceeded),
			),
			created:        1,
			createdIndexes: []int{2},
			patches:        3,
			status:         &sjStatus{active: 1, succeeded: 2, completedIndexes: "0,1"},
		},
		"indexed job some running and completed pods: lowest free indexes created": {
			job: newJob(8, 20, indexed()),
			pods: sjPodList(
				sjIx("a", "0", corev1.PodRunning),
				sjIx("b", "2", corev1.PodSucceeded),
				sjIx("c", "3", corev1.PodPending),
				sjIx("d", "4", corev1.PodSucceeded),
				sjIx("e", "5", corev1.PodSucceeded),
				sjIx("f", "7", corev1.PodSucceeded),
				sjIx("g", "8", corev1.PodSucceeded),
				sjIx("h", "9", corev1.PodSucceeded),
			),
			created:        6,
			createdIndexes: []int{1, 6, 10, 11, 12, 13},
			patches:        6,
			status:         &sjStatus{active: 8, succeeded: 6, completedIndexes: "2,4,5,7-9"},
		},
		"indexed job some failed pods: their indexes are recreated": {
			job: newJob(3, 4, indexed()),
			pods: sjPodList(
				sjIx("a", "0", corev1.PodFailed),
				sjIx("b", "1", corev1.PodPending),
				sjIx("c", "2", corev1.PodFailed),
			),
			created:        2,
			createdIndexes: []int{0, 2},
			patches:        2,
			status:         &sjStatus{active: 3, failed: 2},
		},
		"indexed job pods without a valid index are deleted and not counted": {
			job: newJob(2, 5, indexed()),
			pods: sjJoin(sjSetup(0, 1, 0, 1, 1, 0), sjPodList(
				sjIx("inv-running", "invalid", corev1.PodRunning),
				sjIx("inv-succeeded", "invalid", corev1.PodSucceeded),
				sjIx("inv-failed", "invalid", corev1.PodFailed),
				sjIx("inv-pending", "invalid", corev1.PodPending),
				sjIx("ix0", "0", corev1.PodSucceeded),
				sjIx("ix1", "1", corev1.PodRunning),
				sjIx("ix2", "2", corev1.PodRunning),
			)),
			deleted:      3,
			deletedNames: []string{"running-0", "inv-running", "inv-pending"},
			patches:      8,
			status:       &sjStatus{active: 2, succeeded: 1, completedIndexes: "0", terminating: 3},
		},
		"indexed job repeated indexes: invalid and duplicate pods deleted": {
			job: newJob(5, 5, indexed()),
			pods: sjJoin(sjSetup(0, 0, 0, 1, 1, 0), sjPodList(
				sjIx("inv-running", "invalid", corev1.PodRunning),
				sjIx("ix0", "0", corev1.PodSucceeded),
				sjIx("ix1", "1", corev1.PodRunning),
				sjIx("ix2-running", "2", corev1.PodRunning),
				sjIx("ix2-pending", "2", corev1.PodPending),
			)),
			deleted:      2,
			deletedNames: []string{"inv-running", "ix2-pending"},
			patches:      5,
			status:       &sjStatus{active: 2, succeeded: 1, completedIndexes: "0", terminating: 2},
		},
		"indexed job with indexes outside of range: deleted, not counted, nothing created": {
			job: newJob(2, 5, indexed()),
			pods: sjPodList(
				sjIx("ix0", "0", corev1.PodSucceeded),
				sjIx("ix5", "5", corev1.PodRunning),
				sjIx("ix6", "6", corev1.PodSucceeded),
				sjIx("ix7", "7", corev1.PodPending),
				sjIx("ix8", "8", corev1.PodFailed),
			),
			deleted:      2,
			deletedNames: []string{"ix5", "ix7"},
			patches:      5,
			status:       &sjStatus{succeeded: 1, completedIndexes: "0", terminating: 2},
		},
		"indexed job with duplicate index deletes the newer pod": {
			job: newJob(2, 2, indexed()),
			pods: sjPodList(
				newPod("keeper", ix(0), createdAt(now.Add(-time.Hour))),
				newPod("victim", ix(0), createdAt(now.Add(-time.Minute))),
				newPod("other", ix(1)),
			),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 2, terminating: 1},
		},
		"indexed job with duplicate index keeps the ready pod": {
			job: newJob(2, 2, indexed()),
			pods: sjPodList(
				newPod("keeper", ix(0), ready(now.Add(-time.Minute))),
				newPod("victim", ix(0)),
				newPod("other", ix(1)),
			),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 2, ready: 1, terminating: 1},
		},
		"indexed job pod with a negative index is deleted": {
			job: newJob(2, 2, indexed()),
			pods: sjPodList(
				newPod("negative", annotation(batchv1.JobCompletionIndexAnnotation, "-1")),
				newPod("ix0", ix(0)),
			),
			deleted:      1,
			deletedNames: []string{"negative"},
			patches:      1,
			status:       &sjStatus{active: 1, terminating: 1},
		},
		"indexed job merges new successes into completedIndexes": {
			job:            newJob(2, 5, indexed(), sjStarted(), sjCounters(0, 2, 0), sjCompleted("0,1")),
			pods:           sjPodList(sjIx("ix3", "3", corev1.PodSucceeded)),
			created:        2,
			createdIndexes: []int{2, 4},
			patches:        1,
			status:         &sjStatus{active: 2, succeeded: 3, completedIndexes: "0,1,3"},
		},
		"indexed job success of an already completed index is not recounted": {
			job:            newJob(1, 2, indexed(), sjStarted(), sjCounters(0, 1, 0), sjCompleted("0")),
			pods:           sjPodList(sjIx("ix0", "0", corev1.PodSucceeded)),
			created:        1,
			createdIndexes: []int{1},
			patches:        1,
			status:         &sjStatus{active: 1, succeeded: 1, completedIndexes: "0"},
		},
		"indexed job failed pod is replaced at its index": {
			job: newJob(1, 2, indexed()),
			pods: sjPodList(
				sjIx("ix0", "0", corev1.PodFailed),
				sjIx("ix1", "1", corev1.PodSucceeded),
			),
			created:        1,
			createdIndexes: []int{0},
			patches:        2,
			status:         &sjStatus{active: 1, succeeded: 1, failed: 1, completedIndexes: "1"},
		},
		"indexed job with podReplacementPolicy Failed skips the index of a terminating pod": {
			job:            newJob(2, 3, indexed(), sjPRP(batchv1.Failed)),
			pods:           sjPodList(sjIx("ix0", "0", corev1.PodRunning, deleting())),
			created:        1,
			createdIndexes: []int{1},
			status:         &sjStatus{active: 1, terminating: 1},
		},
		"indexed job with podReplacementPolicy TerminatingOrFailed recreates the index of a terminating pod": {
			job:            newJob(2, 3, indexed()),
			pods:           sjPodList(sjIx("ix0", "0", corev1.PodRunning, sjDeletedLongAgo())),
			created:        2,
			createdIndexes: []int{0, 1},
			patches:        1,
			status:         &sjStatus{active: 2, failed: 1, terminating: 1},
		},
		"indexed job success policy met deletes the remaining pods": {
			job: newJob(3, 3, indexed(), successPolicy(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0")})),
			pods: sjPodList(
				sjIx("ix0", "0", corev1.PodSucceeded),
				sjIx("ix1", "1", corev1.PodRunning),
				sjIx("ix2", "2", corev1.PodRunning),
			),
			deleted:      2,
			deletedNames: []string{"ix1", "ix2"},
			patches:      2 + 1,
			status: &sjStatus{succeeded: 1, completedIndexes: "0", terminating: 2, conditions: []sjCond{
				sjC(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0"),
			}},
		},
		"indexed job with backoffLimitPerIndex marks an exhausted index failed and does not recreate it": {
			job: newJob(2, 2, indexed(), backoffLimitPerIndex(0)),
			pods: sjPodList(
				sjIx("ix0", "0", corev1.PodFailed),
				sjIx("ix1", "1", corev1.PodRunning),
			),
			patches: 1,
			status:  &sjStatus{active: 1, failed: 1, failedIndexes: ptr.To("0")},
		},
		"indexed job with backoffLimitPerIndex keeps the failed pod's finalizer until its replacement exists": {
			job:            newJob(2, 2, indexed(), backoffLimitPerIndex(1)),
			pods:           sjPodList(sjIx("ix0", "0", corev1.PodFailed), sjIx("ix1", "1", corev1.PodRunning)),
			created:        1,
			createdIndexes: []int{0},
			status:         &sjStatus{active: 2, failedIndexes: ptr.To("")},
		},

		// ---- Suspend and resume.
		"suspending a job with satisfied expectations deletes its active pods": {
			job:     newJob(2, 4, suspended()),
			pods:    sjSetup(0, 2, 0, 0, 0, 0),
			deleted: 2,
			patches: 2,
			status: &sjStatus{terminating: 2, noStartTime: true, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			}},
			events: []string{"Normal Suspended"},
		},
		"suspending a job with ready pods resets the ready count": {
			job:     newJob(2, 4, suspended()),
			pods:    sjSetup(0, 2, 2, 0, 0, 0),
			deleted: 2,
			patches: 2,
			status: &sjStatus{terminating: 2, noStartTime: true, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			}},
			events: []string{"Normal Suspended"},
		},
		"suspending a started job clears its startTime": {
			job:     newJob(2, 4, suspended(), sjStarted(), sjCounters(1, 0, 0)),
			pods:    sjSetup(0, 1, 0, 0, 0, 0),
			deleted: 1,
			patches: 1,
			status: &sjStatus{terminating: 1, noStartTime: true, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			}},
			events: []string{"Normal Suspended"},
		},
		"suspending a job with unsatisfied expectations waits": {
			job:    newJob(2, 4, suspended()),
			pods:   sjSetup(0, 3, 0, 0, 0, 0),
			opts:   []syncOpt{sjPendingDeletions(1)},
			status: &sjStatus{active: 3, noStartTime: true},
		},
		"suspending a job with unsatisfied expectations counts ready pods": {
			job:    newJob(2, 4, suspended()),
			pods:   sjSetup(0, 3, 3, 0, 0, 0),
			opts:   []syncOpt{sjPendingDeletions(1)},
			status: &sjStatus{active: 3, ready: 3, noStartTime: true},
		},
		"suspended job already marked suspended with no pods writes nothing": {
			job: newJob(2, 4, suspended(), sjReadyTerminating(0, 0),
				sjConditionMsg(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended")),
		},
		"resuming a suspended job creates pods and flips the condition": {
			job:     newJob(2, 4, sjConditionMsg(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended")),
			created: 2,
			status: &sjStatus{active: 2, startTime: now, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed"),
			}},
			events: []string{"Normal Resumed"},
		},
		"resuming a suspended job restarts its startTime": {
			job: newJob(1, 1, startedAt(now.Add(-time.Hour)),
				sjConditionMsg(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended")),
			created: 1,
			status: &sjStatus{active: 1, startTime: now, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed"),
			}},
			events: []string{"Normal Resumed"},
		},
		"suspending a deleted job changes nothing but removes finalizers": {
			job:     newJob(2, 4, suspended(), deletingJob()),
			pods:    sjSetup(0, 2, 0, 0, 0, 0),
			patches: 2,
			status:  &sjStatus{active: 2, noStartTime: true},
		},

		// ---- Manually added conditions and terminal conditions.
		"FailureTarget=False condition added manually is ignored": {
			job: newJob(1, 1, backoffLimit(0), sjStarted(), sjCounters(1, 0, 0),
				sjConditionMsg(batchv1.JobFailureTarget, corev1.ConditionFalse, "ConditionAddedManually", "Testing")),
			pods: sjSetup(0, 1, 1, 0, 0, 0),
			status: &sjStatus{active: 1, ready: 1, conditions: []sjCond{
				sjC(batchv1.JobFailureTarget, corev1.ConditionFalse, "ConditionAddedManually", "Testing"),
			}},
		},
		"SuccessCriteriaMet=False condition added manually is ignored": {
			job: newJob(1, 1, backoffLimit(0), sjStarted(), sjCounters(1, 0, 0),
				sjConditionMsg(batchv1.JobSuccessCriteriaMet, corev1.ConditionFalse, "ConditionAddedManually", "Testing")),
			pods: sjSetup(0, 1, 1, 0, 0, 0),
			status: &sjStatus{active: 1, ready: 1, conditions: []sjCond{
				sjC(batchv1.JobSuccessCriteriaMet, corev1.ConditionFalse, "ConditionAddedManually", "Testing"),
			}},
		},
		"existing FailureTarget fails the job once no pod is left": {
			job: newJob(1, 1, sjStarted(),
				sjConditionMsg(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg)),
			status: &sjStatus{conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
				sjFailed(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
			events: []string{"Warning " + batchv1.JobReasonBackoffLimitExceeded},
		},
		"existing SuccessCriteriaMet deletes running pods without counting them failed": {
			job: newJob(1, 1, sjStarted(), sjCounters(1, 1, 0),
				sjConditionMsg(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, sjCompletionsReachedMsg)),
			pods:    sjSetup(0, 1, 0, 0, 0, 0),
			deleted: 1,
			patches: 1,
			status: &sjStatus{succeeded: 1, terminating: 1, conditions: []sjCond{
				sjC(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, sjCompletionsReachedMsg),
			}},
		},
		"finished job is not synced": {
			job:  newJob(1, 1, sjStarted(), withCondition(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached)),
			pods: sjSetup(0, 1, 0, 0, 0, 0),
		},
		"too many succeeded pods warn on completion": {
			job:     newJob(2, 2),
			pods:    sjSetup(0, 0, 0, 3, 0, 0),
			patches: 3,
			status:  &sjStatus{succeeded: 3, conditions: sjComplete(), completionTime: true},
			events:  []string{"Warning TooManySucceededPods", "Normal Completed"},
		},
		"job with zero completions completes without pods": {
			job:    newJob(1, 0),
			status: &sjStatus{conditions: sjComplete(), completionTime: true},
			events: []string{"Normal Completed"},
		},
		"job whose successes are already counted completes": {
			job:    newJob(2, 2, sjStarted(), sjCounters(0, 2, 0)),
			pods:   pods("s", 2, succeeded, noFinalizer(), sjFinished(0)),
			status: &sjStatus{succeeded: 2, conditions: sjComplete(), completionTime: true},
			events: []string{"Normal Completed"},
		},
		"parallelism zero creates nothing": {
			job:    newJob(0, 5),
			status: &sjStatus{},
		},
		"failures equal to the backoff limit do not fail the job": {
			job:     newJob(1, 1, backoffLimit(2)),
			pods:    sjSetup(0, 0, 0, 0, 2, 0),
			created: 1,
			patches: 2,
			status:  &sjStatus{active: 1, failed: 2},
		},
		"active deadline exceeded fails a job without pods": {
			job: newJob(1, 1, activeDeadline(10), startedAt(now.Add(-time.Minute))),
			status: &sjStatus{startTime: now.Add(-time.Minute), conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonDeadlineExceeded, sjDeadlineMsg),
				sjFailed(batchv1.JobReasonDeadlineExceeded, sjDeadlineMsg),
			}},
			events: []string{"Warning " + batchv1.JobReasonDeadlineExceeded},
		},
		"active deadline exceeded deletes running pods and counts them failed": {
			job:     newJob(1, 1, activeDeadline(10), startedAt(now.Add(-time.Minute))),
			pods:    sjSetup(0, 1, 0, 0, 0, 0),
			deleted: 1,
			patches: 1,
			status: &sjStatus{failed: 1, terminating: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonDeadlineExceeded, sjDeadlineMsg),
			}},
		},
		"active deadline not reached requeues the job": {
			job:      newJob(1, 1, activeDeadline(100), startedAt(now.Add(-10*time.Second))),
			pods:     sjSetup(0, 1, 0, 0, 0, 0),
			requeues: []time.Duration{90 * time.Second},
			status:   &sjStatus{active: 1},
		},
		"restartPolicy OnFailure: container restarts reaching the backoff limit fail the job": {
			job:     newJob(1, 1, restartPolicy(corev1.RestartPolicyOnFailure), backoffLimit(2)),
			pods:    sjPodList(newPod("r", restarts("main", 2))),
			deleted: 1,
			patches: 1,
			status: &sjStatus{failed: 1, terminating: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
		},
		"pod failure policy FailJob rule fails the job": {
			job: newJob(2, 5, failurePolicy(sjExitCodeRule(batchv1.PodFailurePolicyActionFailJob, 42))),
			pods: sjPodList(
				newPod("f", failed, exitCode("main", 42, now.Add(-time.Hour))),
				newPod("r"),
			),
			deleted:      1,
			deletedNames: []string{"r"},
			patches:      2,
			status: &sjStatus{failed: 2, terminating: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonPodFailurePolicy, "Container main for pod default/f failed with exit code 42 matching FailJob rule at index 0"),
			}},
		},
		"pod failure policy Ignore rule does not count the failure": {
			job:     newJob(1, 1, backoffLimit(0), failurePolicy(sjExitCodeRule(batchv1.PodFailurePolicyActionIgnore, 42))),
			pods:    sjPodList(newPod("f", failed, exitCode("main", 42, now.Add(-time.Hour)))),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 1},
		},

		// ---- Finalizers and uncounted pods.
		"finished pods without finalizer are not counted again": {
			job: newJob(1, 3, sjStarted(), sjCounters(1, 1, 1)),
			pods: sjJoin(
				sjSetup(0, 1, 0, 0, 0, 0),
				pods("done-s", 1, succeeded, noFinalizer()),
				pods("done-f", 1, failed, noFinalizer()),
			),
			status: &sjStatus{active: 1, succeeded: 1, failed: 1},
		},
		"uncounted succeeded pod without finalizer moves to the counter": {
			job:     newJob(1, 2, sjStarted(), sjUncounted([]types.UID{"s-0-uid"}, nil)),
			pods:    pods("s", 1, succeeded, noFinalizer()),
			created: 1,
			status:  &sjStatus{active: 1, succeeded: 1},
		},
		"uncounted failed pod that is gone is counted": {
			job:     newJob(1, 1, sjStarted(), sjUncounted(nil, []types.UID{"gone-uid"})),
			created: 1,
			status:  &sjStatus{active: 1, failed: 1},
		},
		"uncounted succeeded pod still carrying its finalizer has it removed and is counted once": {
			job:     newJob(1, 2, sjStarted(), sjUncounted([]types.UID{"s-0-uid"}, nil)),
			pods:    pods("s", 1, succeeded),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 1, succeeded: 1},
		},
		"pod whose finalizer removal is in flight is not counted twice": {
			job:     newJob(1, 1, sjStarted(), sjCounters(0, 0, 0)),
			pods:    pods("f", 1, failed, sjFinished(1)),
			opts:    []syncOpt{finalizerRemovalsInFlight("f-0-uid")},
			created: 1,
			status:  &sjStatus{active: 1},
		},
		"uncounted pods are capped per sync": {
			job:     newJob(1, 600),
			pods:    sjSetup(0, 0, 0, 600, 0, 0),
			patches: MaxUncountedPods,
			status: &sjStatus{succeeded: MaxUncountedPods, conditions: []sjCond{
				sjC(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, sjCompletionsReachedMsg),
			}},
		},
		"succeeded pod being deleted counts as succeeded, not terminating": {
			job:     newJob(1, 2),
			pods:    pods("s", 1, succeeded, deleting(), sjFinished(0)),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 1, succeeded: 1},
		},
		"terminating pod counts as failed and is replaced": {
			job:     newJob(2, 5),
			pods:    sjSetup(0, 1, 0, 0, 0, 1),
			created: 1,
			patches: 1,
			status:  &sjStatus{active: 2, failed: 1, terminating: 1},
		},
		"terminating pod with podReplacementPolicy Failed is neither failed nor replaced": {
			job:    newJob(2, 5, sjPRP(batchv1.Failed)),
			pods:   sjSetup(0, 1, 0, 0, 0, 1),
			status: &sjStatus{active: 1, terminating: 1},
		},
		"fresh failure delays the replacement by the pod failure backoff": {
			job:      newJob(1, 1),
			pods:     pods("f", 1, failed, exitCode("main", 1, now.Add(-time.Second))),
			patches:  1,
			requeues: []time.Duration{9 * time.Second},
			status:   &sjStatus{failed: 1},
		},
		"pod deleted just now counts as a fresh failure and delays its replacement": {
			job:      newJob(2, 5),
			pods:     sjJoin(sjSetup(0, 1, 0, 0, 0, 0), pods("t", 1, running, deleting())),
			patches:  1,
			requeues: []time.Duration{9 * time.Second},
			status:   &sjStatus{active: 1, failed: 1, terminating: 1},
		},
		"new success resets the backoff so pods are created at once": {
			job:     newJob(2, 5),
			pods:    pods("s", 1, succeeded, sjFinished(0)),
			opts:    []syncOpt{withBackoff(3, now)},
			created: 2,
			patches: 1,
			status:  &sjStatus{active: 2, succeeded: 1},
		},

		"indexed job scaled down drops completed indexes out of range": {
			job:    newJob(3, 3, indexed(), sjStarted(), sjCounters(0, 5, 0), sjCompleted("0-4")),
			status: &sjStatus{succeeded: 3, completedIndexes: "0-2", conditions: sjComplete(), completionTime: true},
			events: []string{"Normal Completed"},
		},
		"indexed job running pod of a completed index blocks new indexes": {
			job: newJob(2, 2, indexed()),
			pods: sjPodList(
				sjIx("done", "0", corev1.PodSucceeded),
				sjIx("again", "0", corev1.PodRunning),
			),
			patches: 1,
			status:  &sjStatus{active: 1, succeeded: 1, completedIndexes: "0"},
		},
		"failing job waits for terminating pods before adding Failed": {
			job:     newJob(2, 5, backoffLimit(0)),
			pods:    sjSetup(0, 0, 0, 0, 1, 1),
			patches: 2,
			status: &sjStatus{failed: 2, terminating: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
		},
		"deleting job past its backoff limit still deletes active pods": {
			job:     newJob(2, 5, backoffLimit(0), deletingJob()),
			pods:    sjSetup(0, 1, 0, 0, 1, 0),
			deleted: 1,
			patches: 2,
			status: &sjStatus{failed: 2, terminating: 1, conditions: []sjCond{
				sjFailureTarget(batchv1.JobReasonBackoffLimitExceeded, sjBackoffLimitMsg),
			}},
		},
		"unknown completion mode skips the sync with a warning": {
			job:    newJob(1, 1, func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.CompletionMode("Weird")) }),
			events: []string{"Warning UnknownCompletionMode"},
		},
		"suspended job ignores its active deadline": {
			job: newJob(1, 1, suspended(), activeDeadline(10)),
			status: &sjStatus{noStartTime: true, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			}},
			events: []string{"Normal Suspended"},
		},
		"ready pods being deleted are terminating, not ready": {
			job:    newJob(2, 5, sjPRP(batchv1.Failed)),
			pods:   sjJoin(sjSetup(0, 1, 1, 0, 0, 0), pods("t", 1, running, ready(now.Add(-time.Hour)), sjDeletedLongAgo())),
			status: &sjStatus{active: 1, ready: 1, terminating: 1},
		},

		"indexed job ignores corrupted completedIndexes intervals": {
			job:            newJob(1, 4, indexed(), sjStarted(), sjCounters(0, 2, 0), sjCompleted("0,abc,2")),
			created:        1,
			createdIndexes: []int{1},
			status:         &sjStatus{active: 1, succeeded: 2, completedIndexes: "0,2"},
		},
		"non-indexed job ignores completion index annotations": {
			job:    newJob(2, 2),
			pods:   sjPodList(newPod("a", ix(0)), newPod("b", ix(0))),
			status: &sjStatus{active: 2},
		},
		"suspending a job adds its deleted pods to those already terminating": {
			job:     newJob(2, 4, suspended()),
			pods:    sjSetup(0, 1, 0, 0, 0, 1),
			deleted: 1,
			patches: 2,
			status: &sjStatus{failed: 1, terminating: 2, noStartTime: true, conditions: []sjCond{
				sjC(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			}},
			events: []string{"Normal Suspended"},
		},
		"excess pod without finalizer is deleted without a patch": {
			job:     newJob(1, 5),
			pods:    pods("nf", 2, noFinalizer()),
			deleted: 1,
			status:  &sjStatus{active: 1, terminating: 1},
		},

		// ---- Expectations.
		"unsatisfied expectations: no creations": {
			job:    newJob(2, 5),
			opts:   []syncOpt{unsatisfiedExpectations()},
			status: &sjStatus{},
		},
		"unsatisfied expectations: no deletions": {
			job:    newJob(1, 5),
			pods:   sjSetup(0, 3, 0, 0, 0, 0),
			opts:   []syncOpt{sjPendingDeletions(1)},
			status: &sjStatus{active: 3},
		},
		"expired expectations count as satisfied": {
			job:     newJob(2, 5),
			opts:    []syncOpt{sjExpectationsAt(1, now.Add(-ExpectationsTimeout-time.Second))},
			created: 2,
			status:  &sjStatus{active: 2},
		},
		"steady job writes no status": {
			job:  newJob(1, 1, sjStarted(), sjCounters(1, 0, 0), sjReadyTerminating(0, 0)),
			pods: sjSetup(0, 1, 0, 0, 0, 0),
		},

		// ---- Which active pods are deleted first (controller.ActivePods).
		"deletion order: unscheduled before scheduled": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", pending), newPod("victim", pending, unscheduled())),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, terminating: 1},
		},
		"deletion order: pending before running": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", running), newPod("victim", pending)),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, terminating: 1},
		},
		"deletion order: not ready before ready": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", ready(now.Add(-time.Hour))), newPod("victim")),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, ready: 1, terminating: 1},
		},
		"deletion order: ready more recently before ready longer": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", ready(now.Add(-time.Hour))), newPod("victim", ready(now.Add(-time.Minute)))),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, ready: 1, terminating: 1},
		},
		"deletion order: more container restarts first": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", restarts("main", 0)), newPod("victim", restarts("main", 3))),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, terminating: 1},
		},
		"deletion order: newer before older": {
			job:          newJob(1, 5),
			pods:         sjPodList(newPod("keeper", createdAt(now.Add(-time.Hour))), newPod("victim", createdAt(now.Add(-time.Minute)))),
			deleted:      1,
			deletedNames: []string{"victim"},
			patches:      1,
			status:       &sjStatus{active: 1, terminating: 1},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := runSync(t, tc.job, tc.pods, tc.opts...)
			o := summarize(plan)
			sjCheck(t, tc, plan, o)
		})
	}
}

func sjCheck(t *testing.T, tc sjCase, plan *Plan, o outcome) {
	t.Helper()
	if o.Created != tc.created {
		t.Errorf("created %d pods, want %d", o.Created, tc.created)
	}
	if isIndexed(tc.job) || tc.createdIndexes != nil {
		got := slices.Clone(o.CreatedIndexes)
		slices.Sort(got)
		if diff := cmp.Diff(tc.createdIndexes, got, sjEmptyEqual()); diff != "" {
			t.Errorf("created indexes (-want,+got):\n%s", diff)
		}
	}
	if o.Deleted != tc.deleted {
		t.Errorf("deleted %d pods (%v), want %d", o.Deleted, sjFirst(o.DeletedNames), tc.deleted)
	}
	if tc.deletedNames != nil {
		got, want := slices.Clone(o.DeletedNames), slices.Clone(tc.deletedNames)
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("deleted pods (-want,+got):\n%s", diff)
		}
	}
	if got := sjPatches(plan, tc.pods); got != tc.patches {
		t.Errorf("got %d finalizer patches, want %d", got, tc.patches)
	}
	if diff := cmp.Diff(tc.events, o.Events, sjEmptyEqual()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(tc.requeues, o.Requeues, sjEmptyEqual()); diff != "" {
		t.Errorf("requeues (-want,+got):\n%s", diff)
	}
	if tc.status == nil {
		if o.Status != nil {
			t.Errorf("unexpected status write: %+v", *o.Status)
		}
		return
	}
	if o.Status == nil {
		t.Fatalf("no status written, want %+v", *tc.status)
	}
	sjCheckStatus(t, *tc.status, o.Status)
}

func sjCheckStatus(t *testing.T, want sjStatus, got *batchv1.JobStatus) {
	t.Helper()
	type counters struct {
		Active, Ready, Succeeded, Failed, Terminating int32
		CompletedIndexes                              string
		FailedIndexes                                 *string
		UncountedSucceeded, UncountedFailed           int
	}
	w := counters{want.active, want.ready, want.succeeded, want.failed, want.terminating, want.completedIndexes, want.failedIndexes, want.uncountedSucceeded, want.uncountedFailed}
	g := counters{Active: got.Active, Succeeded: got.Succeeded, Failed: got.Failed, CompletedIndexes: got.CompletedIndexes, FailedIndexes: got.FailedIndexes}
	g.Ready, g.Terminating = -1, -1 // nil
	if got.Ready != nil {
		g.Ready = *got.Ready
	}
	if got.Terminating != nil {
		g.Terminating = *got.Terminating
	}
	if u := got.UncountedTerminatedPods; u != nil {
		g.UncountedSucceeded, g.UncountedFailed = len(u.Succeeded), len(u.Failed)
	}
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("status counters (-want,+got):\n%s", diff)
	}
	var conds []sjCond
	for _, c := range got.Conditions {
		conds = append(conds, sjCond{c.Type, c.Status, c.Reason, c.Message})
	}
	if diff := cmp.Diff(want.conditions, conds, sjEmptyEqual()); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
	switch {
	case want.noStartTime && got.StartTime != nil:
		t.Errorf("startTime %v, want none", got.StartTime)
	case !want.noStartTime && got.StartTime == nil:
		t.Errorf("no startTime")
	case !want.startTime.IsZero() && !got.StartTime.Time.Equal(want.startTime):
		t.Errorf("startTime %v, want %v", got.StartTime, want.startTime)
	}
	if want.completionTime != (got.CompletionTime != nil) {
		t.Errorf("completionTime %v, want set=%v", got.CompletionTime, want.completionTime)
	}
}

// sjPatches counts the tracking-finalizer removals a plan performs, as the
// reference's pod patches: on deletion of unwanted pods and on finished ones.
func sjPatches(plan *Plan, in []*corev1.Pod) int {
	withFinalizer := map[types.UID]bool{}
	for _, p := range in {
		if slices.Contains(p.Finalizers, DefaultTrackingFinalizer) {
			withFinalizer[p.UID] = true
		}
	}
	n := 0
	for _, a := range plan.Actions {
		switch a := a.(type) {
		case DeletePods:
			if a.RemoveTrackingFinalizer {
				for _, r := range a.Pods {
					if withFinalizer[r.UID] {
						n++
					}
				}
			}
		case RemoveFinalizers:
			n += len(a.Pods)
		}
	}
	return n
}

// sjEmptyEqual treats nil and empty slices alike.
func sjEmptyEqual() cmp.Option { return cmpopts.EquateEmpty() }

func sjFirst(names []string) string {
	if len(names) > 5 {
		return fmt.Sprintf("%v...", names[:5])
	}
	return fmt.Sprint(names)
}
