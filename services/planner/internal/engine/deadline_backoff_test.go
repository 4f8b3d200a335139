package engine

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Tests of activeDeadlineSeconds, backoffLimit (restartPolicy Never and
// OnFailure), the pod failure backoff and the ActivePods removal order
// (reference: syncJob, pastActiveDeadline, pastBackoffLimitOnFailure and
// manageJob in pkg/controller/job/job_controller.go, backoff_utils.go, and
// controller.ActivePods in pkg/controller/controller_utils.go, v1.36.3).

func trFT(reason, message string) string {
	return trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, reason, message)
}

func trFailedCond(reason, message string) string {
	return trCond(batchv1.JobFailed, corev1.ConditionTrue, reason, message)
}

func trWantRequeues(t *testing.T, o outcome, want ...time.Duration) {
	t.Helper()
	if want == nil {
		want = []time.Duration{}
	}
	got := o.Requeues
	if got == nil {
		got = []time.Duration{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("requeues %v, want %v", got, want)
	}
}

func trDeletePods(p *Plan) []DeletePods {
	var out []DeletePods
	for _, a := range p.Actions {
		if d, ok := a.(DeletePods); ok {
			out = append(out, d)
		}
	}
	return out
}

func trInitRestarts(container string, n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: container, RestartCount: n,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
}

// trLongAgo is a finish time whose failure backoff is long over.
var trLongAgo = now.Add(-24 * time.Hour)

// ---------------------------------------------------------------------------
// activeDeadlineSeconds (reference TestSyncJobPastDeadline,
// TestPastDeadlineJobFinished, TestSingleJobFailedCondition).

func TestDeadlinePastDeletesActivePodsKeepingFinalizersAndSetsFailureTarget(t *testing.T) {
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	p := runSync(t, job, []*corev1.Pod{newPod("a", running)})
	trWantKinds(t, p, "delete", "write", "rmfinalizers", "write")
	if d := trDeletePods(p); len(d) == 1 && (d[0].RemoveTrackingFinalizer || d[0].ExpectDeletions) {
		t.Errorf("active pods of a finishing Job deleted with finalizer removal %v, expectations %v; want neither",
			d[0].RemoveTrackingFinalizer, d[0].ExpectDeletions)
	}
	o := summarize(p)
	trWantNames(t, "deleted", o.DeletedNames, "a")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
	if ptr.Deref(o.Status.Terminating, -1) != 1 {
		t.Errorf("terminating %v, want 1", o.Status.Terminating)
	}
	trWantRequeues(t, o)
	if len(o.Events) != 0 || o.ReleaseJobState {
		t.Errorf("events %v release %v; the Job is not finished while its pod terminates", o.Events, o.ReleaseJobState)
	}
}

func TestDeadlinePastCountsSucceededAndStoppedPods(t *testing.T) {
	job := newJob(1, 2, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running), newPod("s", succeeded)}))
	if o.Deleted != 1 || o.Created != 0 {
		t.Errorf("deleted %d created %d, want 1 and 0", o.Deleted, o.Created)
	}
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
}

func TestDeadlinePastWithoutPodsFailsInOneSync(t *testing.T) {
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-20*time.Second)))
	p := runSync(t, job, nil)
	o := summarize(p)
	if o.Created != 0 {
		t.Errorf("created %d pods for a Job past its deadline", o.Created)
	}
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline), trFailedCond(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
	if want := []string{"Warning " + batchv1.JobReasonDeadlineExceeded}; !slices.Equal(o.Events, want) {
		t.Errorf("events %v, want %v", o.Events, want)
	}
	if !o.ReleaseJobState || o.Status.CompletionTime != nil {
		t.Errorf("release %v completionTime %v; want release and no completionTime", o.ReleaseJobState, o.Status.CompletionTime)
	}
}

func TestDeadlineReachedExactlyIsPast(t *testing.T) {
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-10*time.Second)))
	o := summarize(runSync(t, job, nil))
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline), trFailedCond(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
	trWantRequeues(t, o)
}

func TestDeadlineNotReachedRequeuesAtTheDeadline(t *testing.T) {
	job := newJob(1, 1, activeDeadline(60), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, nil))
	trWantRequeues(t, o, 45*time.Second)
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
	trWantConds(t, "final", o.Status.Conditions)
}

func TestDeadlineRequeueCountsFromStartTimeSetNow(t *testing.T) {
	job := newJob(1, 1, activeDeadline(30))
	o := summarize(runSync(t, job, nil))
	trWantRequeues(t, o, 30*time.Second)
	if o.Status == nil || o.Status.StartTime == nil || !o.Status.StartTime.Time.Equal(now) {
		t.Errorf("startTime %v, want %v", o.Status, now)
	}
}

func TestDeadlineSuspendedJobIgnoresPastDeadline(t *testing.T) {
	job := newJob(1, 2, suspended(), activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, nil))
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"))
	trWantRequeues(t, o)
	if o.Status.StartTime != nil {
		t.Errorf("startTime %v kept when the Job got suspended", o.Status.StartTime)
	}
}

func TestDeadlineSuspendedJobIsNotRequeuedForIt(t *testing.T) {
	job := newJob(1, 2, suspended(), activeDeadline(60), startedAt(now.Add(-15*time.Second)),
		withCondition(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended"))
	o := summarize(runSync(t, job, nil))
	trWantRequeues(t, o)
	if o.conditionOf(batchv1.JobFailureTarget) != nil {
		t.Error("suspended Job got FailureTarget")
	}
}

func TestDeadlineBackoffLimitTakesPrecedence(t *testing.T) {
	job := newJob(1, 1, activeDeadline(1), backoffLimit(0), startedAt(now.Add(-10*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestDeadlineFailedFalseConditionTurnsTrue(t *testing.T) {
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-15*time.Second)), withStatus(func(s *batchv1.JobStatus) {
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobFailed, corev1.ConditionFalse,
			batchv1.JobReasonDeadlineExceeded, trMsgDeadline, now.Add(-time.Hour)))
	}))
	o := summarize(runSync(t, job, nil))
	if o.Deleted != 0 {
		t.Errorf("deleted %d pods", o.Deleted)
	}
	// The False condition is replaced in place; FailureTarget comes after.
	trWantConds(t, "final", o.Status.Conditions,
		trFailedCond(batchv1.JobReasonDeadlineExceeded, trMsgDeadline), trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
}

func TestDeadlineExistingFailureTargetBecomesFailedWithItsReasonAndMessage(t *testing.T) {
	job := newJob(1, 1, trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Failed = 1
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue,
			batchv1.JobReasonDeadlineExceeded, trMsgDeadline, now.Add(-time.Minute)))
	}))
	p := runSync(t, job, nil)
	trWantKinds(t, p, "write", "event:"+batchv1.JobReasonDeadlineExceeded)
	o := summarize(p)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline), trFailedCond(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
}

func TestDeadlinePastWithUnsatisfiedExpectationsDeletesPodsButDeclaresNothing(t *testing.T) {
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running)}, unsatisfiedExpectations()))
	trWantNames(t, "deleted", o.DeletedNames, "a")
	if len(o.FinalizersGone) != 0 {
		t.Errorf("finalizers removed from %v", o.FinalizersGone)
	}
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
	if ptr.Deref(o.Status.Terminating, -1) != 1 {
		t.Errorf("terminating %v, want 1", o.Status.Terminating)
	}
}

func TestDeadlinePastDeletingReadyPodsLeavesNoneReady(t *testing.T) {
	job := newJob(2, 2, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, pods("r", 2, running, ready(now.Add(-10*time.Second)))))
	if o.Deleted != 2 || ptr.Deref(o.Status.Ready, -1) != 0 || ptr.Deref(o.Status.Terminating, -1) != 2 {
		t.Errorf("deleted %d ready %v terminating %v; want 2, 0, 2", o.Deleted, o.Status.Ready, o.Status.Terminating)
	}
}

func TestDeadlinePastDeletesOnlyPodsNotAlreadyTerminating(t *testing.T) {
	job := newJob(2, 2, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running), newPod("b", running, deleting())}))
	trWantNames(t, "deleted", o.DeletedNames, "a")
	trWantNames(t, "finalizers removed", o.FinalizersGone, "a", "b")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	if ptr.Deref(o.Status.Terminating, -1) != 2 {
		t.Errorf("terminating %v, want 2", o.Status.Terminating)
	}
}

// ---------------------------------------------------------------------------
// backoffLimit with restartPolicy Never (reference
// TestJobBackoffOnRestartPolicyNever, TestControllerSyncJob).

func TestBackoffLimitZeroRunningPodIsFine(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, backoffLimit(0)), []*corev1.Pod{newPod("a", running)}))
	if o.Status == nil || o.Status.Active != 1 || o.Deleted != 0 {
		t.Errorf("status %+v deleted %d; want active 1, nothing deleted", o.Status, o.Deleted)
	}
	trWantConds(t, "final", o.Status.Conditions)
}

func TestBackoffLimitZeroOneFailureFailsTheJob(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, backoffLimit(0)), []*corev1.Pod{newPod("a", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
	if o.Created != 0 {
		t.Errorf("created %d", o.Created)
	}
}

func TestBackoffLimitOneFailureWithinLimitOfOneReplacesThePod(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, backoffLimit(1)), []*corev1.Pod{newPod("a", failed, exitCode("c", 1, trLongAgo))}))
	if o.Created != 1 || o.CreationReason != PodRecreateTerminatingOrFailed {
		t.Errorf("created %d (%s), want 1 (%s)", o.Created, o.CreationReason, PodRecreateTerminatingOrFailed)
	}
	trWantDesc(t, "final", *o.Status, `active=1 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
}

func TestBackoffLimitTwoFailuresExceedLimitOfOne(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, backoffLimit(1)), pods("f", 2, failed)))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestBackoffLimitSixFailuresWithinLimitOfSixKeepGoing(t *testing.T) {
	ps := append(pods("f", 6, failed, exitCode("c", 1, trLongAgo)), newPod("r", running))
	o := summarize(runSync(t, newJob(2, 2), ps))
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
	trWantDesc(t, "final", *o.Status, `active=2 succeeded=0 failed=6 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
}

func TestBackoffLimitSevenFailuresExceedLimitOfSix(t *testing.T) {
	o := summarize(runSync(t, newJob(2, 2), pods("f", 7, failed, exitCode("c", 1, trLongAgo))))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=7 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestBackoffLimitCountsFailuresAlreadyInStatus(t *testing.T) {
	job := newJob(1, 1, withStatus(func(s *batchv1.JobStatus) { s.Failed = 6 }))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=7 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestBackoffLimitCountsUncountedFailures(t *testing.T) {
	job := newJob(1, 1, withStatus(func(s *batchv1.JobStatus) { s.Failed = 5 }), trUncounted(nil, []string{"x", "y"}))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("x", failed), newPod("y", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=7 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestBackoffLimitExceededStopsRunningPodsAndCountsThemFailed(t *testing.T) {
	ps := append(pods("r", 2, running, ready(now.Add(-time.Minute))), newPod("f", failed))
	o := summarize(runSync(t, newJob(2, 3, backoffLimit(0)), ps))
	trWantNames(t, "deleted", o.DeletedNames, "r-0", "r-1")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=3 uncounted=[]/[] completed=""`)
	if ptr.Deref(o.Status.Ready, -1) != 0 {
		t.Errorf("ready %v, want 0", o.Status.Ready)
	}
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestBackoffLimitCountsFailuresBeforeASuccessToo(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("f0", failed, exitCode("c", 1, now.Add(-3*time.Minute))),
		newPod("f1", failed, exitCode("c", 1, now.Add(-2*time.Minute))),
		newPod("s", succeeded, exitCode("c", 0, now.Add(-time.Minute))),
	}
	o := summarize(runSync(t, newJob(1, 3, backoffLimit(1)), ps))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=1 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff), trFailedCond(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

// ---------------------------------------------------------------------------
// backoffLimit with restartPolicy OnFailure (reference
// TestJobBackoffForOnFailure).

func trOnFailureJob(parallelism, completions, limit int32, opts ...jobOpt) *batchv1.Job {
	return newJob(parallelism, completions, append([]jobOpt{restartPolicy(corev1.RestartPolicyOnFailure), backoffLimit(limit)}, opts...)...)
}

func TestOnFailureRestartsBelowLimitKeepPodsRunning(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", running, restarts("c", 1)), newPod("b", running, restarts("c", 1))}
	o := summarize(runSync(t, trOnFailureJob(2, 5, 3), ps))
	if o.Deleted != 0 || o.Status.Active != 2 {
		t.Errorf("deleted %d active %d; want 0 and 2", o.Deleted, o.Status.Active)
	}
	trWantConds(t, "final", o.Status.Conditions)
}

func TestOnFailureRestartsReachingLimitFailTheJob(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", running, restarts("c", 1)), newPod("b", running, restarts("c", 1))}
	o := summarize(runSync(t, trOnFailureJob(2, 5, 2), ps))
	trWantNames(t, "deleted", o.DeletedNames, "a", "b")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestOnFailureRunningPodRestartsEqualToLimitFailTheJob(t *testing.T) {
	o := summarize(runSync(t, trOnFailureJob(1, 1, 1), []*corev1.Pod{newPod("a", running, restarts("c", 1))}))
	trWantNames(t, "deleted", o.DeletedNames, "a")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestOnFailurePendingPodRestartsCount(t *testing.T) {
	o := summarize(runSync(t, trOnFailureJob(1, 5, 2), []*corev1.Pod{newPod("a", pending, restarts("c", 2))}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestOnFailureBackoffLimitZeroWithoutRestartsIsFine(t *testing.T) {
	o := summarize(runSync(t, trOnFailureJob(1, 1, 0), []*corev1.Pod{newPod("a", running, restarts("c", 0))}))
	if o.Deleted != 0 || o.Status.Active != 1 {
		t.Errorf("deleted %d active %d; want 0 and 1", o.Deleted, o.Status.Active)
	}
	trWantConds(t, "final", o.Status.Conditions)
}

func TestOnFailureBackoffLimitZeroAnyRestartFails(t *testing.T) {
	o := summarize(runSync(t, trOnFailureJob(1, 1, 0), []*corev1.Pod{newPod("a", running, restarts("c", 1))}))
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestOnFailureInitContainerRestartsCount(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", pending, trInitRestarts("init", 1), restarts("c", 1))}
	o := summarize(runSync(t, trOnFailureJob(1, 1, 2), ps))
	trWantConds(t, "final", o.Status.Conditions, trFT(batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestOnFailureRestartsOfFinishedPodsIgnored(t *testing.T) {
	ps := []*corev1.Pod{newPod("s", succeeded, restarts("c", 5)), newPod("a", running)}
	o := summarize(runSync(t, trOnFailureJob(1, 3, 2, trSteady(1)), ps))
	trWantConds(t, "final", o.Status.Conditions)
	if o.Deleted != 0 {
		t.Errorf("deleted %d", o.Deleted)
	}
}

func TestNeverRestartPolicyIgnoresRestartCounts(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, backoffLimit(2)), []*corev1.Pod{newPod("a", running, restarts("c", 5))}))
	trWantConds(t, "final", o.Status.Conditions)
	if o.Deleted != 0 {
		t.Errorf("deleted %d", o.Deleted)
	}
}

func TestOnFailureSuspendedJobWithAllCompletionsSucceededCompletes(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("s0", succeeded, restarts("c", 1)), newPod("s1", succeeded, restarts("c", 1)),
		newPod("s2", succeeded, restarts("c", 2)), newPod("s3", succeeded, restarts("c", 0)),
	}
	o := summarize(runSync(t, trOnFailureJob(2, 4, 6, suspended()), ps))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=4 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted),
		trCond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted))
}

// ---------------------------------------------------------------------------
// The backoff record (reference TestNewBackoffRecord).

var trT0 = time.Date(2009, time.November, 10, 23, 0, 0, 0, time.UTC)

func trFinished(ph corev1.PodPhase, at ...time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for i, t := range at {
		code := int32(0)
		if ph == corev1.PodFailed {
			code = 1
		}
		out = append(out, newPod(string(ph)+string(rune('a'+i)), phase(ph), exitCode("c", code, t)))
	}
	return out
}

func TestNextBackoffRecord(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name      string
		old       BackoffRecord
		succeeded []time.Time
		failed    []time.Time
		want      int32
		wantLast  *time.Time
	}{
		{name: "one new failure starts the count", failed: []time.Time{trT0}, want: 1, wantLast: &trT0},
		{name: "two new failures keep the latest finish time", failed: []time.Time{trT0, trT0.Add(-ms)}, want: 2, wantLast: &trT0},
		{name: "a success after the failures resets the count", succeeded: []time.Time{trT0}, failed: []time.Time{trT0.Add(-2 * ms), trT0.Add(-ms)}},
		{name: "only failures after the latest success count", succeeded: []time.Time{trT0.Add(-2 * ms)},
			failed: []time.Time{trT0, trT0.Add(-4 * ms), trT0.Add(-3 * ms), trT0.Add(-ms)}, want: 2, wantLast: &trT0},
		{name: "new failures add to the stored count", old: BackoffRecord{FailuresAfterLastSuccess: 2}, failed: []time.Time{trT0}, want: 3, wantLast: &trT0},
		{name: "a failure at the time of a success is not after it", succeeded: []time.Time{trT0}, failed: []time.Time{trT0}},
		{name: "nothing new on an empty record"},
		{name: "nothing new keeps the stored record", old: BackoffRecord{FailuresAfterLastSuccess: 3, LastFailureTime: &trT0}, want: 3, wantLast: &trT0},
		{name: "a success alone resets the stored record", old: BackoffRecord{FailuresAfterLastSuccess: 3, LastFailureTime: &trT0}, succeeded: []time.Time{trT0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := nextBackoffRecord(tc.old, wrapPods(trFinished(corev1.PodSucceeded, tc.succeeded...)), wrapPods(trFinished(corev1.PodFailed, tc.failed...)))
			if got.FailuresAfterLastSuccess != tc.want {
				t.Errorf("failures %d, want %d", got.FailuresAfterLastSuccess, tc.want)
			}
			if (got.LastFailureTime == nil) != (tc.wantLast == nil) || (got.LastFailureTime != nil && !got.LastFailureTime.Equal(*tc.wantLast)) {
				t.Errorf("last failure %v, want %v", got.LastFailureTime, tc.wantLast)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The finish time of a pod (reference TestGetFinishedTime).

func trTerminated(name string, at time.Time) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}
}

func trRunning(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func TestFinishedTime(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecarSpec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}}
	cases := []struct {
		name string
		pod  corev1.Pod
		want time.Time
	}{
		{
			name: "latest finish of all terminated containers",
			pod: corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				trTerminated("a", trT0.Add(-time.Second)), trTerminated("b", trT0), trTerminated("c", trT0.Add(-2*time.Second)),
			}}},
			want: trT0,
		},
		{
			name: "a running container falls back to the deletion timestamp",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: trT0}},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
					trTerminated("a", trT0.Add(-time.Second)), trRunning("b"), trTerminated("c", trT0.Add(-2*time.Second)),
				}},
			},
			want: trT0,
		},
		{
			name: "deletion timestamp minus the grace period",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: trT0}, DeletionGracePeriodSeconds: ptr.To[int64](30)},
				Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{trRunning("a")}},
			},
			want: trT0.Add(-30 * time.Second),
		},
		{
			name: "Ready=False transition when containers give no time",
			pod: corev1.Pod{Status: corev1.PodStatus{
				ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}},
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(trT0)}},
			}},
			want: trT0,
		},
		{
			name: "Ready=True transition is not a finish time",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: trT0}},
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}},
					Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(trT0.Add(-30 * time.Second))}},
				},
			},
			want: trT0,
		},
		{
			name: "creation timestamp as last resort",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(trT0)},
				Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}},
			},
			want: trT0,
		},
		{
			name: "a sidecar finishing after the regular containers",
			pod: corev1.Pod{Spec: sidecarSpec, Status: corev1.PodStatus{
				ContainerStatuses:     []corev1.ContainerStatus{trTerminated("main", trT0.Add(-time.Second))},
				InitContainerStatuses: []corev1.ContainerStatus{trTerminated("sidecar", trT0)},
			}},
			want: trT0,
		},
		{
			name: "a regular init container's finish is ignored",
			pod: corev1.Pod{
				Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}}},
				Status: corev1.PodStatus{
					ContainerStatuses:     []corev1.ContainerStatus{trTerminated("main", trT0)},
					InitContainerStatuses: []corev1.ContainerStatus{trTerminated("init", trT0.Add(time.Hour))},
				},
			},
			want: trT0,
		},
		{
			// Reference getFinishTimeFromContainers: the regular containers
			// give nil, then the sidecars are folded into nil.
			name: "a finished sidecar gives the time when a regular container has not finished",
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: trT0.Add(time.Hour)}},
				Spec:       sidecarSpec,
				Status: corev1.PodStatus{
					ContainerStatuses:     []corev1.ContainerStatus{trRunning("main")},
					InitContainerStatuses: []corev1.ContainerStatus{trTerminated("sidecar", trT0)},
				},
			},
			want: trT0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := finishedTime(&tc.pod); !got.Equal(tc.want) {
				t.Errorf("finished at %v, want %v", got, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The remaining backoff: min(10s*2^(n-1), 10m) since the last failure
// (reference TestGetRemainingBackoffTime, TestGetRemainingBackoffTimePerIndex,
// with the controller's DefaultJobPodFailureBackOff and
// MaxJobPodFailureBackOff).

func TestRemainingBackoff(t *testing.T) {
	cases := []struct {
		name     string
		failures int32
		elapsed  time.Duration
		want     time.Duration
	}{
		{name: "no failures, no backoff", failures: 0, want: 0},
		{name: "one failure just now waits 10s", failures: 1, want: 10 * time.Second},
		{name: "one failure a second ago waits 9s", failures: 1, elapsed: time.Second, want: 9 * time.Second},
		{name: "one failure 10s ago waits no more", failures: 1, elapsed: 10 * time.Second, want: 0},
		{name: "one failure 11s ago waits no more", failures: 1, elapsed: 11 * time.Second, want: 0},
		{name: "three failures wait 40s", failures: 3, want: 40 * time.Second},
		{name: "six failures wait 320s", failures: 6, want: 320 * time.Second},
		{name: "seven failures are capped at 10m", failures: 7, want: 10 * time.Minute},
		{name: "many failures are capped at 10m", failures: 30, want: 10 * time.Minute},
		{name: "capped backoff counts from the last failure", failures: 30, elapsed: 4 * time.Minute, want: 6 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			last := now.Add(-tc.elapsed)
			if got := (PodFailureBackoff{}).remaining(now, tc.failures, &last); got != tc.want {
				t.Errorf("remaining %v, want %v", got, tc.want)
			}
		})
	}
}

// A configured backoff (the planner's -pod-failure-backoff and
// -max-pod-failure-backoff, as the reference's integration tests set its
// package variables) replaces the reference's 10 s and 10 min, through a
// whole sync too.
func TestConfiguredPodFailureBackoff(t *testing.T) {
	fast := PodFailureBackoff{Initial: time.Second, Max: 4 * time.Second}
	for _, tc := range []struct {
		failures int32
		b        PodFailureBackoff
		want     time.Duration
	}{
		{failures: 1, b: fast, want: time.Second},
		{failures: 3, b: fast, want: 4 * time.Second},
		{failures: 9, b: fast, want: 4 * time.Second},
		{failures: 1, b: PodFailureBackoff{Initial: time.Minute, Max: 30 * time.Second}, want: 30 * time.Second},
		{failures: 2, b: PodFailureBackoff{Max: time.Hour}, want: 20 * time.Second},
	} {
		last := now
		if got := tc.b.remaining(now, tc.failures, &last); got != tc.want {
			t.Errorf("%+v after %d failures: %v, want %v", tc.b, tc.failures, got, tc.want)
		}
	}

	// A sync whose replacement is held back by the per-index backoff: the
	// requeue is the configured backoff, not 10 s.
	snap := &Snapshot{Job: ixJob(2, 2, backoffLimitPerIndex(1)), Now: now, PodFailureBackoff: fast, Pods: []*corev1.Pod{
		ixPod("a", 0, running, failureCount(0)),
		ixPod("b", 1, failed, failureCount(0), exitCode("x", 1, now)),
	}}
	if got := summarize(Sync(snap)).Requeues; !slices.Equal(got, []time.Duration{time.Second}) {
		t.Errorf("requeues %v, want the configured 1s", got)
	}
}

func TestRemainingBackoffForIndex(t *testing.T) {
	deletedNow := func(p *corev1.Pod) { p.DeletionTimestamp = timePtr(now) }
	cases := []struct {
		name string
		pod  *corev1.Pod
		want time.Duration
	}{
		{name: "no failed pod, no backoff", pod: nil, want: 0},
		{name: "two earlier failures wait 40s", pod: newPod("a", failed, failureCount(2), deletedNow), want: 40 * time.Second},
		{name: "ignored failures count toward the backoff", pod: newPod("a", failed, failureCount(1),
			annotation(batchv1.JobIndexIgnoredFailureCountAnnotation, "1"), deletedNow), want: 40 * time.Second},
		{name: "first failure of an index waits 10s", pod: newPod("a", failed, deletedNow), want: 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var last *pod
			if tc.pod != nil {
				view := viewOf(tc.pod, DefaultTrackingFinalizer)
				last = &view
			}
			if got := (PodFailureBackoff{}).remainingForIndex(now, last); got != tc.want {
				t.Errorf("remaining %v, want %v", got, tc.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The requeue the pod failure backoff implies (reference manageJob and
// enqueueSyncJobWithDelay).

func TestBackoffDelaysCreationAndRequeuesForTheRest(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(1, now.Add(-3*time.Second))))
	if o.Created != 0 {
		t.Errorf("created %d during the backoff", o.Created)
	}
	trWantRequeues(t, o, 7*time.Second)
	if o.SyncAction != SyncActionPodsCreated {
		t.Errorf("sync action %q, want %q", o.SyncAction, SyncActionPodsCreated)
	}
}

func TestBackoffRequeueIsAtLeastOneSecond(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(1, now.Add(-9500*time.Millisecond))))
	trWantRequeues(t, o, time.Second)
}

func TestBackoffDoublesPerFailure(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(3, now)))
	trWantRequeues(t, o, 40*time.Second)
}

func TestBackoffIsCappedAtTenMinutes(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(10, now)))
	trWantRequeues(t, o, 10*time.Minute)
}

func TestBackoffElapsedCreatesAtOnce(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(2, now.Add(-30*time.Second))))
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
	trWantRequeues(t, o)
}

func TestBackoffWithZeroFailuresDoesNotDelay(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), nil, withBackoff(0, now)))
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
	trWantRequeues(t, o)
}

func TestBackoffNotConsultedWhenNoPodIsMissing(t *testing.T) {
	o := summarize(runSync(t, newJob(1, 1, trSteady(1)), []*corev1.Pod{newPod("a", running)}, withBackoff(3, now)))
	trWantRequeues(t, o)
	if o.SyncAction != SyncActionTracking {
		t.Errorf("sync action %q, want %q", o.SyncAction, SyncActionTracking)
	}
}

func TestBackoffNewFailureStartsTheBackoffAndIsStored(t *testing.T) {
	p := runSync(t, newJob(1, 1, trSteady(0)), []*corev1.Pod{newPod("a", failed, exitCode("c", 1, now.Add(-2*time.Second)))})
	o := summarize(p)
	trWantRequeues(t, o, 8*time.Second)
	if o.Created != 0 {
		t.Errorf("created %d during the backoff", o.Created)
	}
	w := trWrites(p)
	if len(w) == 0 || w[0].BackoffRecord == nil {
		t.Fatalf("no backoff record stored")
	}
	if r := w[0].BackoffRecord; r.FailuresAfterLastSuccess != 1 || r.LastFailureTime == nil || !r.LastFailureTime.Equal(now.Add(-2*time.Second)) {
		t.Errorf("record %d failures at %v, want 1 at %v", r.FailuresAfterLastSuccess, r.LastFailureTime, now.Add(-2*time.Second))
	}
}

func TestBackoffTwoNewFailuresCountFromTheLatest(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("a", failed, exitCode("c", 1, now.Add(-5*time.Second))),
		newPod("b", failed, exitCode("c", 1, now.Add(-time.Second))),
	}
	o := summarize(runSync(t, newJob(1, 3, trSteady(0)), ps))
	trWantRequeues(t, o, 19*time.Second)
}

func TestBackoffNewFailureAddsToTheStoredRecord(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", failed, exitCode("c", 1, now.Add(-5*time.Second)))}
	p := runSync(t, newJob(1, 3, trSteady(0)), ps, withBackoff(2, now.Add(-time.Minute)))
	trWantRequeues(t, summarize(p), 35*time.Second)
	if w := trWrites(p); len(w) == 0 || w[0].BackoffRecord == nil || w[0].BackoffRecord.FailuresAfterLastSuccess != 3 {
		t.Errorf("stored record %+v, want 3 failures", w)
	}
}

func TestBackoffResetBySuccess(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("f", failed, exitCode("c", 1, now.Add(-3*time.Second))),
		newPod("s", succeeded, exitCode("c", 0, now.Add(-time.Second))),
	}
	p := runSync(t, newJob(1, 3, trSteady(0)), ps, withBackoff(3, now.Add(-5*time.Second)))
	o := summarize(p)
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
	trWantRequeues(t, o)
	if w := trWrites(p); len(w) == 0 || w[0].BackoffRecord == nil ||
		w[0].BackoffRecord.FailuresAfterLastSuccess != 0 || w[0].BackoffRecord.LastFailureTime != nil {
		t.Errorf("stored record %+v, want the empty record", w)
	}
}

func TestBackoffFailuresAfterTheLatestSuccessStillBackOff(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("s", succeeded, exitCode("c", 0, now.Add(-10*time.Second))),
		newPod("f", failed, exitCode("c", 1, now.Add(-4*time.Second))),
	}
	o := summarize(runSync(t, newJob(1, 3, trSteady(0)), ps, withBackoff(5, now.Add(-20*time.Second))))
	trWantRequeues(t, o, 6*time.Second)
	if o.Created != 0 {
		t.Errorf("created %d during the backoff", o.Created)
	}
}

func TestBackoffKeepsActiveAndReadyCountsOfRunningPods(t *testing.T) {
	o := summarize(runSync(t, newJob(2, 2), []*corev1.Pod{newPod("a", running, ready(now.Add(-time.Minute)))}, withBackoff(1, now)))
	trWantRequeues(t, o, 10*time.Second)
	if o.Status == nil || o.Status.Active != 1 || ptr.Deref(o.Status.Ready, -1) != 1 {
		t.Errorf("status %+v, want active 1 ready 1", o.Status)
	}
}

func TestBackoffStoredRecordUnchangedWhenNothingFinished(t *testing.T) {
	p := runSync(t, newJob(1, 1), nil, withBackoff(2, now.Add(-time.Hour)))
	w := trWrites(p)
	if len(w) == 0 || w[0].BackoffRecord == nil {
		t.Fatal("no backoff record in the first write")
	}
	if r := w[0].BackoffRecord; r.FailuresAfterLastSuccess != 2 || r.LastFailureTime == nil || !r.LastFailureTime.Equal(now.Add(-time.Hour)) {
		t.Errorf("record %+v, want 2 failures an hour ago", r)
	}
}

// ---------------------------------------------------------------------------
// The order active pods are removed in (reference controller.ActivePods).

func TestLessActive(t *testing.T) {
	older, newer := now.Add(-time.Hour), now.Add(-time.Minute)
	always := corev1.ContainerRestartPolicyAlways
	sidecarRestarts := func(n int32) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", RestartCount: n}}
		}
	}
	unknown := phase(corev1.PodUnknown)
	cases := []struct {
		name        string
		first, then *corev1.Pod
	}{
		{"unscheduled before scheduled", newPod("a", pending, unscheduled()), newPod("b", pending)},
		{"unscheduled before scheduled whatever the phase", newPod("a", running, unscheduled()), newPod("b", pending)},
		{"pending before unknown", newPod("a", pending), newPod("b", unknown)},
		{"unknown before running", newPod("a", unknown), newPod("b", running)},
		{"pending before running whatever the readiness", newPod("a", pending, ready(older)), newPod("b", running)},
		{"not ready before ready", newPod("a", running), newPod("b", running, ready(older))},
		{"ready more recently before ready longer", newPod("a", running, ready(newer)), newPod("b", running, ready(older))},
		{"readiness time wins over restarts", newPod("a", running, ready(newer)), newPod("b", running, ready(older), restarts("c", 9))},
		{"more restarts first", newPod("a", running, restarts("c", 3)), newPod("b", running, restarts("c", 1))},
		{"sidecar restarts break ties of regular restarts", newPod("a", running, sidecarRestarts(2)), newPod("b", running, sidecarRestarts(1))},
		{"regular restarts win over sidecar restarts", newPod("a", running, restarts("c", 2)), newPod("b", running, restarts("c", 1), sidecarRestarts(5))},
		{"newer before older", newPod("a", running, createdAt(newer)), newPod("b", running, createdAt(older))},
		{"restarts win over creation time", newPod("a", running, restarts("c", 1), createdAt(older)), newPod("b", running, createdAt(newer))},
		{"zero creation time first", newPod("a", running, createdAt(time.Time{})), newPod("b", running, createdAt(newer))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !lessActive(tc.first, tc.then) {
				t.Error("first is not less")
			}
			if lessActive(tc.then, tc.first) {
				t.Error("second is less")
			}
		})
	}
	t.Run("equivalent pods are not less", func(t *testing.T) {
		a, b := newPod("a", running), newPod("b", running)
		if lessActive(a, b) || lessActive(b, a) {
			t.Error("one of two equivalent pods is less")
		}
	})
}

func TestSortActiveOrdersCheapestToRemoveFirst(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("ready-old", running, ready(now.Add(-time.Hour))),
		newPod("running", running),
		newPod("ready-new", running, ready(now.Add(-time.Minute))),
		newPod("pending", pending),
		newPod("unscheduled", pending, unscheduled()),
	}
	wrapped := wrapPods(ps)
	sortActive(wrapped)
	var got []string
	for _, p := range wrapped {
		got = append(got, p.Name)
	}
	if want := []string{"unscheduled", "pending", "running", "ready-new", "ready-old"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestActivePodsRemovalKeepsTheMostValuable(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("ready", running, ready(now.Add(-time.Hour))),
		newPod("notready", running),
		newPod("pending", pending),
	}
	p := runSync(t, newJob(1, 5, trSteady(3)), ps)
	o := summarize(p)
	trWantNames(t, "deleted", o.DeletedNames, "pending", "notready")
	if !o.DeletesFinalizer {
		t.Error("excess pods deleted without removing their finalizer first")
	}
	if d := trDeletePods(p); len(d) != 1 || !d[0].ExpectDeletions {
		t.Errorf("delete actions %+v, want one expecting its deletions", d)
	}
	if o.Status == nil || o.Status.Active != 1 || ptr.Deref(o.Status.Terminating, -1) != 2 {
		t.Errorf("status %+v, want active 1 terminating 2", o.Status)
	}
}

func TestActivePodsRemovalPrefersMoreRestartedAmongEquals(t *testing.T) {
	ps := []*corev1.Pod{newPod("calm", running), newPod("flaky", running, restarts("c", 4))}
	o := summarize(runSync(t, newJob(1, 5, trSteady(2)), ps))
	trWantNames(t, "deleted", o.DeletedNames, "flaky")
}

// ---------------------------------------------------------------------------
// ensureJobConditionStatus (reference TestEnsureJobConditions).

func TestEnsureJobConditionStatus(t *testing.T) {
	earlier := now.Add(-time.Hour)
	cond := func(s corev1.ConditionStatus, reason, message string) batchv1.JobCondition {
		return *newCondition(batchv1.JobSuspended, s, reason, message, earlier)
	}
	cases := []struct {
		name     string
		have     []batchv1.JobCondition
		status   corev1.ConditionStatus
		reason   string
		message  string
		want     []string
		wantUpdt bool
	}{
		{name: "a True condition is appended", status: corev1.ConditionTrue, reason: "foo",
			want: []string{trCond(batchv1.JobSuspended, corev1.ConditionTrue, "foo", "")}, wantUpdt: true},
		{name: "an absent False condition is not appended", status: corev1.ConditionFalse, reason: "foo", want: []string{}},
		{name: "a new reason replaces the condition", have: []batchv1.JobCondition{cond(corev1.ConditionTrue, "foo", "")},
			status: corev1.ConditionTrue, reason: "bar", want: []string{trCond(batchv1.JobSuspended, corev1.ConditionTrue, "bar", "")}, wantUpdt: true},
		{name: "True turns False", have: []batchv1.JobCondition{cond(corev1.ConditionTrue, "foo", "")},
			status: corev1.ConditionFalse, reason: "foo", want: []string{trCond(batchv1.JobSuspended, corev1.ConditionFalse, "foo", "")}, wantUpdt: true},
		{name: "False turns True", have: []batchv1.JobCondition{cond(corev1.ConditionFalse, "foo", "")},
			status: corev1.ConditionTrue, reason: "foo", want: []string{trCond(batchv1.JobSuspended, corev1.ConditionTrue, "foo", "")}, wantUpdt: true},
		{name: "the same condition is left alone", have: []batchv1.JobCondition{cond(corev1.ConditionTrue, "foo", "")},
			status: corev1.ConditionTrue, reason: "foo", want: []string{trCond(batchv1.JobSuspended, corev1.ConditionTrue, "foo", "")}},
		{name: "a new message replaces the condition", have: []batchv1.JobCondition{cond(corev1.ConditionTrue, "foo", "old")},
			status: corev1.ConditionTrue, reason: "foo", message: "new", want: []string{trCond(batchv1.JobSuspended, corev1.ConditionTrue, "foo", "new")}, wantUpdt: true},
		{name: "other conditions are kept", have: []batchv1.JobCondition{*newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, "x", "", earlier)},
			status: corev1.ConditionTrue, reason: "foo",
			want: []string{trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, "x", ""), trCond(batchv1.JobSuspended, corev1.ConditionTrue, "foo", "")}, wantUpdt: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, updated := ensureJobConditionStatus(slices.Clone(tc.have), batchv1.JobSuspended, tc.status, tc.reason, tc.message, now)
			if updated != tc.wantUpdt {
				t.Errorf("updated %v, want %v", updated, tc.wantUpdt)
			}
			if g := trConds(got); !slices.Equal(g, tc.want) {
				t.Errorf("conditions %v, want %v", g, tc.want)
			}
			if c := findCondition(got, batchv1.JobSuspended); c != nil {
				wantTime := earlier
				if updated {
					wantTime = now
				}
				if !c.LastTransitionTime.Time.Equal(wantTime) {
					t.Errorf("transition time %v, want %v", c.LastTransitionTime, wantTime)
				}
			}
		})
	}
}

func TestDeadlineNotRequeuedWhenTheJobFailsForAnotherReason(t *testing.T) {
	job := newJob(1, 1, activeDeadline(60), backoffLimit(0), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}))
	trWantRequeues(t, o)
}

func TestDeadlineNotRequeuedOnceSuccessCriteriaMet(t *testing.T) {
	job := newJob(1, 1, activeDeadline(60), startedAt(now.Add(-15*time.Second)), withStatus(func(s *batchv1.JobStatus) {
		s.Succeeded = 1
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue,
			batchv1.JobReasonCompletionsReached, trMsgCompleted, now.Add(-time.Second)))
	}))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("r", running, deleting(), noFinalizer())}))
	trWantRequeues(t, o)
}

func TestDeadlinePastOverridesSuccessThisSync(t *testing.T) {
	// Failure criteria are evaluated before completions.
	job := newJob(1, 1, activeDeadline(10), startedAt(now.Add(-15*time.Second)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("s", succeeded)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trFT(batchv1.JobReasonDeadlineExceeded, trMsgDeadline), trFailedCond(batchv1.JobReasonDeadlineExceeded, trMsgDeadline))
}

func TestBackoffCountsFromSidecarFinishWhenMainContainerNeverRan(t *testing.T) {
	// Reference getFinishTimeFromContainers: the regular container gives no
	// time, the terminated sidecar does (2s ago), so the 10s backoff has 8s
	// left; the creation time (a minute ago) is not reached.
	always := corev1.ContainerRestartPolicyAlways
	pod := newPod("a", failed, func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{trTerminated("sidecar", now.Add(-2*time.Second))}
	})
	o := summarize(runSync(t, newJob(1, 1, trSteady(0)), []*corev1.Pod{pod}))
	trWantRequeues(t, o, 8*time.Second)
	if o.Created != 0 {
		t.Errorf("created %d during the backoff", o.Created)
	}
}
