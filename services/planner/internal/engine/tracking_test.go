package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Tests of the pod tracking protocol (reference: trackJobStatusAndRemoveFinalizers,
// flushUncountedAndRemoveFinalizers, cleanUncountedPodsWithoutFinalizers,
// enactJobFinished, recordJobFinished, getNewFinishedPods in
// pkg/controller/job/job_controller.go of Kubernetes v1.36.3).

const (
	trMsgBackoff   = "Job has reached the specified backoff limit"
	trMsgDeadline  = "Job was active longer than specified deadline"
	trMsgCompleted = "Reached expected number of succeeded pods"
)

// trCond renders a condition the way tests compare them: type, status,
// reason and message; times are ignored.
func trCond(t batchv1.JobConditionType, s corev1.ConditionStatus, reason, message string) string {
	return fmt.Sprintf("%s=%s/%s/%q", t, s, reason, message)
}

func trConds(list []batchv1.JobCondition) []string {
	out := []string{}
	for _, c := range list {
		out = append(out, trCond(c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

func trWantConds(t *testing.T, label string, got []batchv1.JobCondition, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if g := trConds(got); !slices.Equal(g, want) {
		t.Errorf("%s: conditions\n got  %v\n want %v", label, g, want)
	}
}

// trUIDNames strips the "-uid" suffix of the test pods' UIDs.
func trUIDNames(uids []types.UID) []string {
	out := []string{}
	for _, u := range uids {
		out = append(out, strings.TrimSuffix(string(u), "-uid"))
	}
	return out
}

func trUIDs(names ...string) []types.UID {
	out := make([]types.UID, len(names))
	for i, n := range names {
		out[i] = types.UID(n + "-uid")
	}
	return out
}

// trDesc describes the counters of a status.
func trDesc(s batchv1.JobStatus) string {
	var us, uf []string
	if u := s.UncountedTerminatedPods; u != nil {
		us, uf = trUIDNames(u.Succeeded), trUIDNames(u.Failed)
	}
	return fmt.Sprintf("active=%d succeeded=%d failed=%d uncounted=%v/%v completed=%q",
		s.Active, s.Succeeded, s.Failed, us, uf, s.CompletedIndexes)
}

func trWantDesc(t *testing.T, label string, got batchv1.JobStatus, want string) {
	t.Helper()
	if g := trDesc(got); g != want {
		t.Errorf("%s:\n got  %s\n want %s", label, g, want)
	}
}

// trWrites returns the statuses the plan writes, in order.
func trWrites(p *Plan) []WriteStatus {
	var out []WriteStatus
	for _, a := range p.Actions {
		if w, ok := a.(WriteStatus); ok {
			out = append(out, w)
		}
	}
	return out
}

// trKinds names the plan's actions in order.
func trKinds(p *Plan) []string {
	var out []string
	for _, a := range p.Actions {
		switch a := a.(type) {
		case CreatePods:
			out = append(out, "create")
		case DeletePods:
			out = append(out, "delete")
		case RemoveFinalizers:
			out = append(out, "rmfinalizers")
		case WriteStatus:
			out = append(out, "write")
		case RecordEvent:
			out = append(out, "event:"+a.Reason)
		case Requeue:
			out = append(out, "requeue")
		}
	}
	return out
}

func trWantKinds(t *testing.T, p *Plan, want ...string) {
	t.Helper()
	if got := trKinds(p); !slices.Equal(got, want) {
		t.Errorf("actions\n got  %v\n want %v", got, want)
	}
}

func trSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func trWantNames(t *testing.T, label string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got == nil {
		got = []string{}
	}
	if g, w := trSorted(got), trSorted(want); !slices.Equal(g, w) {
		t.Errorf("%s\n got  %v\n want %v", label, g, w)
	}
}

// trTrack runs only the tracking step, as the reference's
// TestTrackJobStatusAndRemoveFinalizers does: the sync context is built
// from the snapshot, with the given finished condition.
func trTrack(t *testing.T, job *batchv1.Job, pods []*corev1.Pod, finished *batchv1.JobCondition, needsFlush bool, opts ...syncOpt) *Plan {
	t.Helper()
	s := &Snapshot{Job: job, Pods: pods, Now: now, TrackingFinalizer: DefaultTrackingFinalizer}
	for _, o := range opts {
		o(s)
	}
	plan := &Plan{}
	c := newSyncCtx(s, plan)
	c.activePods = filterPods(c.pods, (*pod).active)
	c.terminating = countPods(c.pods, (*pod).terminating)
	c.finishedCondition = finished
	if c.indexed {
		// As the reference's test: the completed indexes of the status
		// only; the step adds those of the succeeded pods it handles.
		c.succeededIndexes = parseIndexes(job.Status.CompletedIndexes, c.completions)
	}
	c.trackJobStatusAndRemoveFinalizers(needsFlush)
	return plan
}

func trCondition(t batchv1.JobConditionType, reason, message string) *batchv1.JobCondition {
	return newCondition(t, corev1.ConditionTrue, reason, message, now)
}

// trSteady is a Job status that matches the pods' active, ready and
// terminating counts, so no write is needed for them.
func trSteady(active int32) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.Active = active
		s.Ready = ptr.To[int32](0)
		s.Terminating = ptr.To[int32](0)
		if s.StartTime == nil {
			s.StartTime = timePtr(now.Add(-time.Hour))
		}
	})
}

func trUncounted(succeeded, failed []string) jobOpt {
	return withStatus(func(s *batchv1.JobStatus) {
		s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: trUIDs(succeeded...), Failed: trUIDs(failed...)}
	})
}

// ---------------------------------------------------------------------------
// The tracking step alone (reference TestTrackJobStatusAndRemoveFinalizers).

func TestTrackNoPodsNoFlushPlansNothing(t *testing.T) {
	p := trTrack(t, newJob(1, 1), nil, nil, false)
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
}

func TestTrackNeedsFlushWritesStatusOnce(t *testing.T) {
	job := newJob(1, 1, withStatus(func(s *batchv1.JobStatus) { s.Active = 1 }))
	p := trTrack(t, job, nil, nil, true)
	trWantKinds(t, p, "write")
	w := trWrites(p)
	if len(w) == 1 {
		trWantDesc(t, "status", w[0].Status, "active=1 succeeded=0 failed=0 uncounted=[]/[] completed=\"\"")
		if w[0].BackoffRecord == nil {
			t.Error("the first status write carries no backoff record")
		}
	}
}

func TestTrackFinishedPodsGoThroughUncountedThenCounters(t *testing.T) {
	ps := []*corev1.Pod{
		newPod("a", succeeded),
		newPod("b", failed),
		newPod("c", succeeded, deleting()),
		newPod("d", failed, deleting()),
		newPod("e", pending, deleting()),
		newPod("f", pending),
		newPod("g", running),
	}
	p := trTrack(t, newJob(2, 10), ps, nil, false)
	trWantKinds(t, p, "write", "rmfinalizers", "write")
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=0 failed=0 uncounted=[a c]/[b d e] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=2 failed=3 uncounted=[]/[] completed=""`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c", "d", "e")
}

func TestTrackPastAndNewFinishedPods(t *testing.T) {
	job := newJob(2, 10, withStatus(func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded, s.Failed = 1, 2, 3
	}), trUncounted([]string{"a", "e"}, []string{"b", "f"}))
	ps := []*corev1.Pod{
		newPod("e", succeeded, noFinalizer()),
		newPod("x", failed, noFinalizer()),
		newPod("y", pending, noFinalizer()),
		newPod("a", succeeded),
		newPod("b", failed),
		newPod("c", succeeded),
		newPod("d", failed),
	}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	// e and f lost their finalizer: counted before anything else.
	trWantDesc(t, "first write", w[0].Status, `active=1 succeeded=3 failed=4 uncounted=[a c]/[b d] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=1 succeeded=5 failed=6 uncounted=[]/[] completed=""`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c", "d")
}

func TestTrackFinalizerRemovalsInFlightAreNeitherRemovedAgainNorRecounted(t *testing.T) {
	job := newJob(2, 10, withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 2, 3 }),
		trUncounted([]string{"a", "g"}, []string{"b", "h"}))
	ps := []*corev1.Pod{
		newPod("a", succeeded), newPod("b", failed),
		newPod("c", succeeded), newPod("d", failed),
		newPod("e", succeeded), newPod("f", failed),
		newPod("g", succeeded), newPod("h", failed),
	}
	p := trTrack(t, job, ps, nil, false, finalizerRemovalsInFlight(trUIDs("c", "d", "g", "h")...))
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	// g and h are uncounted with a removal in flight: counted at once.
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=3 failed=4 uncounted=[a e]/[b f] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=5 failed=6 uncounted=[]/[] completed=""`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "e", "f")
}

func TestTrackSuccessCriteriaMetWrittenFirstCompleteSecond(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", succeeded), newPod("b", failed), newPod("c", pending)}
	scm := trCondition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0")
	p := trTrack(t, newJob(2, 10), ps, scm, false)
	trWantKinds(t, p, "write", "rmfinalizers", "write", "event:Completed")
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=0 failed=0 uncounted=[a]/[b] completed=""`)
	trWantConds(t, "first write", w[0].Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0"))
	if w[0].Status.CompletionTime != nil {
		t.Error("completionTime set in the first write")
	}
	// The pending pod of a succeeding Job is not counted as failed.
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0"),
		trCond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0"))
	if ct := w[1].Status.CompletionTime; ct == nil || !ct.Time.Equal(now) {
		t.Errorf("completionTime %v, want %v", ct, now)
	}
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c")
}

func TestTrackCompleteConditionAddedOnlyInSecondWrite(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", succeeded), newPod("b", failed)}
	p := trTrack(t, newJob(2, 10), ps, trCondition(batchv1.JobComplete, "", ""), false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantConds(t, "first write", w[0].Status.Conditions)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions, trCond(batchv1.JobComplete, corev1.ConditionTrue, "", ""))
	if w[1].Status.CompletionTime == nil {
		t.Error("completionTime not set")
	}
}

func TestTrackFailingJobCountsRunningPodsAsFailed(t *testing.T) {
	ps := []*corev1.Pod{newPod("a", succeeded), newPod("b", failed), newPod("c", running)}
	p := trTrack(t, newJob(2, 10), ps, trCondition(batchv1.JobFailed, "", ""), false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=0 failed=0 uncounted=[a]/[b c] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=1 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions, trCond(batchv1.JobFailed, corev1.ConditionTrue, "", ""))
	if w[1].Status.CompletionTime != nil {
		t.Error("a failed Job got a completionTime")
	}
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c")
}

func TestTrackPodFlippedFromFailedToSucceededStaysFailed(t *testing.T) {
	job := newJob(2, 2, trUncounted(nil, []string{"a", "b"}))
	ps := []*corev1.Pod{newPod("a", failed), newPod("b", succeeded)}
	p := trTrack(t, job, ps, trCondition(batchv1.JobFailed, "", ""), false)
	trWantKinds(t, p, "rmfinalizers", "write", "event:")
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "write", w[0].Status.Conditions, trCond(batchv1.JobFailed, corev1.ConditionTrue, "", ""))
}

func TestTrackUncountedTerminalPodCountedAndJobFailedInOneWrite(t *testing.T) {
	job := newJob(1, 1, trUncounted(nil, []string{"a"}))
	p := trTrack(t, job, []*corev1.Pod{newPod("a", failed)}, trCondition(batchv1.JobFailed, "", ""), false)
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "write", w[0].Status.Conditions, trCond(batchv1.JobFailed, corev1.ConditionTrue, "", ""))
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a")
}

func TestTrackTerminatingPodDelaysFailedCondition(t *testing.T) {
	job := newJob(1, 1, trUncounted(nil, []string{"a"}),
		withCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, ""))
	ps := []*corev1.Pod{newPod("a", running, deleting(), noFinalizer())}
	p := trTrack(t, job, ps, trCondition(batchv1.JobFailed, "", ""), false)
	trWantKinds(t, p, "write")
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "write", w[0].Status.Conditions, trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, "", ""))
	if p.ReleaseJobState {
		t.Error("the Job is not finished yet")
	}
}

func TestTrackTerminatingPodDelaysCompleteCondition(t *testing.T) {
	job := newJob(1, 1, trUncounted([]string{"b"}, []string{"a"}),
		withCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, ""))
	ps := []*corev1.Pod{newPod("a", running, deleting(), noFinalizer())}
	p := trTrack(t, job, ps, trCondition(batchv1.JobComplete, "", ""), false)
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=0 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "write", w[0].Status.Conditions, trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, "", ""))
	if w[0].Status.CompletionTime != nil {
		t.Error("completionTime set while a pod terminates")
	}
}

func TestTrackIndexedSuccessesRecordedAsCompletedIndexesInOneWrite(t *testing.T) {
	job := newJob(1, 6, indexed(), withStatus(func(s *batchv1.JobStatus) { s.Active = 1 }))
	ps := []*corev1.Pod{
		newPod("a", succeeded, index(1)),
		newPod("b", succeeded, index(3)),
		newPod("c", succeeded, index(3)),
		newPod("d", running, index(5)),
		newPod("e", succeeded),
	}
	p := trTrack(t, job, ps, nil, false)
	trWantKinds(t, p, "write", "rmfinalizers")
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=1 succeeded=2 failed=0 uncounted=[]/[] completed="1,3"`)
	// The pod without index loses its finalizer too.
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c", "e")
}

func TestTrackIndexedCompletedIndexesBeyondCompletionsAreDropped(t *testing.T) {
	job := newJob(2, 2, indexed(), withStatus(func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded, s.CompletedIndexes = 2, 1, "3"
	}))
	ps := []*corev1.Pod{newPod("a", running, index(0)), newPod("b", running, index(1))}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=2 succeeded=0 failed=0 uncounted=[]/[] completed=""`)
	if got := summarize(p).FinalizersGone; len(got) != 0 {
		t.Errorf("finalizers removed from %v", got)
	}
}

func TestTrackIndexedNewSuccessReplacesOutOfRangeCompletedIndexes(t *testing.T) {
	job := newJob(2, 2, indexed(), withStatus(func(s *batchv1.JobStatus) {
		s.Active, s.Succeeded, s.CompletedIndexes = 2, 1, "3"
	}))
	ps := []*corev1.Pod{newPod("a", running, index(0)), newPod("b", succeeded, index(1))}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=2 succeeded=1 failed=0 uncounted=[]/[] completed="1"`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "b")
}

func TestTrackIndexedFailuresTrackedByUIDOnlyWithValidIndex(t *testing.T) {
	job := newJob(1, 6, indexed(), withStatus(func(s *batchv1.JobStatus) { s.Active = 1 }))
	ps := []*corev1.Pod{
		newPod("a", failed, index(1)),
		newPod("b", failed, index(3)),
		newPod("c", failed, index(3)),
		newPod("d", running, index(5)),
		newPod("e", failed),
	}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=1 succeeded=0 failed=0 uncounted=[]/[a b c] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=1 succeeded=0 failed=3 uncounted=[]/[] completed=""`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "a", "b", "c", "e")
}

func TestTrackIndexedPastAndNewPods(t *testing.T) {
	job := newJob(1, 7, indexed(), withStatus(func(s *batchv1.JobStatus) {
		s.Failed, s.Succeeded, s.CompletedIndexes = 2, 5, "0-2,4,6,7"
	}))
	ps := []*corev1.Pod{
		newPod("p0", succeeded, index(0), noFinalizer()),
		newPod("p1", failed, index(1), noFinalizer()),
		newPod("p1b", succeeded, index(1)),
		newPod("p3", succeeded, index(3)),
		newPod("a", failed, index(2)),
		newPod("b", failed, index(5)),
	}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=6 failed=2 uncounted=[]/[a b] completed="0-4,6"`)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=6 failed=4 uncounted=[]/[] completed="0-4,6"`)
	trWantNames(t, "finalizers removed", summarize(p).FinalizersGone, "p1b", "p3", "a", "b")
}

func TestTrackAtMost500UncountedPodsPerSync(t *testing.T) {
	job := newJob(0, 1000, trUncounted(nil, []string{"gone", "z"}))
	var ps []*corev1.Pod
	for i := range 500 {
		ps = append(ps, newPod(fmt.Sprintf("p%03d", i), succeeded))
	}
	ps = append(ps, newPod("z", failed))
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	u := w[0].Status.UncountedTerminatedPods
	if len(u.Succeeded) != 499 || !slices.Equal(trUIDNames(u.Failed), []string{"z"}) || w[0].Status.Failed != 1 {
		t.Errorf("first write: %d uncounted succeeded, failed %v, counted failed %d; want 499, [z], 1",
			len(u.Succeeded), trUIDNames(u.Failed), w[0].Status.Failed)
	}
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=499 failed=1 uncounted=[]/[z] completed=""`)
	if got := len(summarize(p).FinalizersGone); got != 499 {
		t.Errorf("%d finalizers removed, want 499", got)
	}
}

func TestTrackAtMost500CompletedIndexesPerSync(t *testing.T) {
	job := newJob(0, 501, indexed())
	var ps []*corev1.Pod
	for i := range 501 {
		ps = append(ps, newPod(fmt.Sprintf("p%03d", i), succeeded, index(i)))
	}
	p := trTrack(t, job, ps, nil, false)
	w := trWrites(p)
	if len(w) != 1 {
		t.Fatalf("%d writes, want 1", len(w))
	}
	trWantDesc(t, "write", w[0].Status, `active=0 succeeded=500 failed=0 uncounted=[]/[] completed="0-499"`)
	if got := len(summarize(p).FinalizersGone); got != 500 {
		t.Errorf("%d finalizers removed, want 500", got)
	}
}

func TestTrackUncountedUIDOfVanishedPodCountedBeforeFirstWrite(t *testing.T) {
	job := newJob(1, 5, trUncounted([]string{"gone"}, nil))
	p := trTrack(t, job, nil, nil, false)
	trWantKinds(t, p, "write")
	if w := trWrites(p); len(w) == 1 {
		trWantDesc(t, "write", w[0].Status, `active=0 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
	}
}

// ---------------------------------------------------------------------------
// cleanUncountedPodsWithoutFinalizers and newFinishedPods (reference
// TestGetNewFinshedPods).

func TestCleanUncountedPodsWithoutFinalizersMovesThemToCounters(t *testing.T) {
	st := &batchv1.JobStatus{Succeeded: 1, Failed: 2, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{
		Succeeded: trUIDs("a", "b"), Failed: trUIDs("c", "d", "e"),
	}}
	changed := cleanUncountedPodsWithoutFinalizers(st, setOf(trUIDs("b", "d")))
	if !changed {
		t.Error("reported no change")
	}
	trWantDesc(t, "status", *st, `active=0 succeeded=2 failed=4 uncounted=[b]/[d] completed=""`)
}

func TestCleanUncountedPodsWithoutFinalizersNoChangeWhenAllKeepFinalizers(t *testing.T) {
	st := &batchv1.JobStatus{Succeeded: 1, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{
		Succeeded: trUIDs("a"), Failed: trUIDs("b"),
	}}
	if cleanUncountedPodsWithoutFinalizers(st, setOf(trUIDs("a", "b"))) {
		t.Error("reported a change")
	}
	trWantDesc(t, "status", *st, `active=0 succeeded=1 failed=0 uncounted=[a]/[b] completed=""`)
}

// trFinishedCounts is the succeeded and failed counts a sync starts from.
func trFinishedCounts(job *batchv1.Job, ps []*corev1.Pod, inflight ...types.UID) (int32, int32) {
	c := newSyncCtx(&Snapshot{Job: job, Pods: ps, Now: now, FinalizerRemovalsInFlight: inflight}, &Plan{})
	s, f := c.newFinishedPods()
	return job.Status.Succeeded + int32(len(s)) + int32(len(c.uncountedSucceeded)),
		job.Status.Failed + int32(len(f)) + int32(len(c.uncountedFailed))
}

func TestNewFinishedPodsSkipsPodsWithoutFinalizer(t *testing.T) {
	job := newJob(1, 10, withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 2, 1 }))
	ps := []*corev1.Pod{
		newPod("a", succeeded, noFinalizer()), newPod("b", succeeded), newPod("c", succeeded),
		newPod("d", failed, noFinalizer()), newPod("e", failed), newPod("f", running, noFinalizer()),
	}
	if s, f := trFinishedCounts(job, ps); s != 4 || f != 2 {
		t.Errorf("succeeded %d failed %d, want 4 and 2", s, f)
	}
}

func TestNewFinishedPodsSkipsUncountedPods(t *testing.T) {
	job := newJob(1, 10, withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 1, 1 }),
		trUncounted([]string{"a", "c"}, []string{"e", "f"}))
	ps := []*corev1.Pod{
		newPod("a", succeeded, noFinalizer()), newPod("b", succeeded, noFinalizer()), newPod("c", succeeded),
		newPod("d", succeeded), newPod("e", failed, noFinalizer()), newPod("f", failed), newPod("g", failed),
	}
	if s, f := trFinishedCounts(job, ps); s != 4 || f != 4 {
		t.Errorf("succeeded %d failed %d, want 4 and 4", s, f)
	}
}

func TestNewFinishedPodsSkipsFinalizerRemovalsInFlight(t *testing.T) {
	job := newJob(1, 10, withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 2, 2 }),
		trUncounted([]string{"a"}, []string{"d"}))
	ps := []*corev1.Pod{
		newPod("a", succeeded, noFinalizer()), newPod("b", succeeded), newPod("c", succeeded),
		newPod("d", failed, noFinalizer()), newPod("e", failed), newPod("f", failed), newPod("g", failed),
	}
	if s, f := trFinishedCounts(job, ps, trUIDs("b", "f")...); s != 4 || f != 5 {
		t.Errorf("succeeded %d failed %d, want 4 and 5", s, f)
	}
}

func TestNewFinishedPodsCountsDeletedUnfinishedPodsAsFailed(t *testing.T) {
	job := newJob(1, 10, withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 1, 1 }))
	ps := []*corev1.Pod{
		newPod("a", succeeded, deleting()), newPod("b", failed, deleting()),
		newPod("c", running, deleting()), newPod("d", pending, deleting()),
		newPod("e", running, deleting(), noFinalizer()), newPod("f", pending, deleting(), noFinalizer()),
	}
	if s, f := trFinishedCounts(job, ps); s != 2 || f != 4 {
		t.Errorf("succeeded %d failed %d, want 2 and 4", s, f)
	}
}

func TestNewFinishedPodsDeletedUnfinishedPodsNotFailedWhenOnlyFailedReplaced(t *testing.T) {
	job := newJob(1, 10, replacementPolicy(batchv1.Failed), withStatus(func(s *batchv1.JobStatus) { s.Succeeded, s.Failed = 1, 1 }))
	ps := []*corev1.Pod{
		newPod("a", succeeded, deleting()), newPod("b", failed, deleting()),
		newPod("c", running, deleting()), newPod("d", pending, deleting()),
	}
	if s, f := trFinishedCounts(job, ps); s != 2 || f != 2 {
		t.Errorf("succeeded %d failed %d, want 2 and 2", s, f)
	}
}

// ---------------------------------------------------------------------------
// Whole syncs.

func TestTrackSyncWritesUncountedThenRemovesFinalizersThenCounts(t *testing.T) {
	job := newJob(1, 3, trSteady(1))
	ps := []*corev1.Pod{newPod("a", succeeded), newPod("b", running)}
	p := runSync(t, job, ps)
	trWantKinds(t, p, "write", "rmfinalizers", "write")
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	trWantDesc(t, "first write", w[0].Status, `active=1 succeeded=0 failed=0 uncounted=[a]/[] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=1 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
	if o := summarize(p); o.SyncAction != SyncActionTracking {
		t.Errorf("sync action %q, want %q", o.SyncAction, SyncActionTracking)
	}
}

func TestTrackSyncBackoffRecordCarriedByFirstWriteOnly(t *testing.T) {
	job := newJob(1, 3, trSteady(1))
	ps := []*corev1.Pod{newPod("a", failed, exitCode("c", 1, now.Add(-time.Hour))), newPod("b", running)}
	p := runSync(t, job, ps)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	rec := w[0].BackoffRecord
	if rec == nil || rec.FailuresAfterLastSuccess != 1 || rec.LastFailureTime == nil || !rec.LastFailureTime.Equal(now.Add(-time.Hour)) {
		t.Errorf("first write's backoff record %+v, want 1 failure at %v", rec, now.Add(-time.Hour))
	}
	if w[1].BackoffRecord != nil {
		t.Errorf("second write carries a backoff record %+v", w[1].BackoffRecord)
	}
}

func TestTrackSyncBackoffRecordNotStoredWithoutFirstWrite(t *testing.T) {
	// The failed pod is already uncounted: only the counting write happens,
	// and the reference stores no backoff record then.
	job := newJob(1, 3, trSteady(1), trUncounted(nil, []string{"a"}))
	ps := []*corev1.Pod{newPod("a", failed), newPod("b", running)}
	p := runSync(t, job, ps, withBackoff(2, now.Add(-time.Hour)))
	trWantKinds(t, p, "rmfinalizers", "write")
	for i, w := range trWrites(p) {
		if w.BackoffRecord != nil {
			t.Errorf("write %d carries a backoff record %+v", i, w.BackoffRecord)
		}
	}
	if o := summarize(p); o.Status == nil || o.Status.Failed != 1 {
		t.Errorf("final status %+v, want failed 1", o.Status)
	}
}

func TestTrackSyncNothingChangedPlansNoWrite(t *testing.T) {
	job := newJob(1, 3, trSteady(1))
	p := runSync(t, job, []*corev1.Pod{newPod("b", running)})
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
}

func TestTrackSyncFailureTargetFirstFailedSecondThenEvent(t *testing.T) {
	job := newJob(1, 1, backoffLimit(0), trSteady(0))
	p := runSync(t, job, []*corev1.Pod{newPod("a", failed)})
	trWantKinds(t, p, "write", "rmfinalizers", "write", "event:"+batchv1.JobReasonBackoffLimitExceeded)
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	ft := trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff)
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=0 failed=0 uncounted=[]/[a] completed=""`)
	trWantConds(t, "first write", w[0].Status.Conditions, ft)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions, ft,
		trCond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
	o := summarize(p)
	if !o.ReleaseJobState || o.Status.CompletionTime != nil {
		t.Errorf("release %v, completionTime %v; want release and no completionTime", o.ReleaseJobState, o.Status.CompletionTime)
	}
	if len(o.Events) != 1 || o.Events[0] != "Warning "+batchv1.JobReasonBackoffLimitExceeded {
		t.Errorf("events %v", o.Events)
	}
}

func TestTrackSyncSuccessCriteriaMetFirstCompleteSecondWithCompletionTime(t *testing.T) {
	job := newJob(2, 5, trSteady(0))
	p := runSync(t, job, pods("s", 5, succeeded))
	trWantKinds(t, p, "write", "rmfinalizers", "write", "event:Completed")
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	scm := trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted)
	trWantDesc(t, "first write", w[0].Status, `active=0 succeeded=0 failed=0 uncounted=[s-0 s-1 s-2 s-3 s-4]/[] completed=""`)
	trWantConds(t, "first write", w[0].Status.Conditions, scm)
	if w[0].Status.CompletionTime != nil {
		t.Error("completionTime in the first write")
	}
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=5 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions, scm,
		trCond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted))
	if ct := w[1].Status.CompletionTime; ct == nil || !ct.Time.Equal(now) {
		t.Errorf("completionTime %v, want %v", ct, now)
	}
	if o := summarize(p); !o.ReleaseJobState || len(o.Events) != 1 || o.Events[0] != "Normal Completed" {
		t.Errorf("release %v events %v", o.ReleaseJobState, o.Events)
	}
}

func TestTrackSyncTerminalConditionWaitsForTerminatingPods(t *testing.T) {
	job := newJob(2, 5, backoffLimit(0), trSteady(1))
	p := runSync(t, job, []*corev1.Pod{newPod("a", failed), newPod("b", running, ready(now.Add(-time.Minute)))})
	o := summarize(p)
	trWantNames(t, "deleted", o.DeletedNames, "b")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
	if got := ptr.Deref(o.Status.Terminating, -1); got != 1 {
		t.Errorf("terminating %d, want 1", got)
	}
	if got := ptr.Deref(o.Status.Ready, -1); got != 0 {
		t.Errorf("ready %d, want 0", got)
	}
	if o.ReleaseJobState || len(o.Events) != 0 {
		t.Errorf("release %v events %v; the Job is not finished", o.ReleaseJobState, o.Events)
	}
}

func TestTrackSyncExistingFailureTargetFailsOnceNothingTerminates(t *testing.T) {
	job := newJob(2, 5, trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Failed = 2
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue,
			batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff, now.Add(-time.Minute)))
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("b", failed, noFinalizer())})
	trWantKinds(t, p, "write", "event:"+batchv1.JobReasonBackoffLimitExceeded)
	o := summarize(p)
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=2 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff),
		trCond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
	if !o.ReleaseJobState {
		t.Error("ReleaseJobState not set")
	}
}

func TestTrackSyncExistingFailureTargetWaitsForTerminatingPod(t *testing.T) {
	job := newJob(2, 5, trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Failed = 2
		s.Terminating = ptr.To[int32](1)
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue,
			batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff, now.Add(-time.Minute)))
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("b", running, deleting(), noFinalizer())})
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
	if p.ReleaseJobState {
		t.Error("ReleaseJobState set")
	}
}

func TestTrackSyncExistingSuccessCriteriaMetCompletesWithoutDuplicatingIt(t *testing.T) {
	job := newJob(1, 3, trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Succeeded = 3
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue,
			batchv1.JobReasonCompletionsReached, trMsgCompleted, now.Add(-time.Minute)))
	}))
	p := runSync(t, job, nil)
	trWantKinds(t, p, "write", "event:Completed")
	o := summarize(p)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted),
		trCond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted))
	if o.Status.CompletionTime == nil || !o.Status.CompletionTime.Time.Equal(now) {
		t.Errorf("completionTime %v, want %v", o.Status.CompletionTime, now)
	}
}

func TestTrackSyncCapDelaysTerminalCondition(t *testing.T) {
	job := newJob(0, 501, indexed(), trSteady(0))
	var ps []*corev1.Pod
	for i := range 501 {
		ps = append(ps, newPod(fmt.Sprintf("p%03d", i), succeeded, index(i)))
	}
	p := runSync(t, job, ps)
	o := summarize(p)
	if o.StatusWrites != 1 || len(o.FinalizersGone) != 500 {
		t.Errorf("%d writes, %d finalizers removed; want 1 and 500", o.StatusWrites, len(o.FinalizersGone))
	}
	// The sync computes the completed indexes from every succeeded pod
	// still carrying its finalizer, the one left for the next sync included
	// (reference syncJob: calculateSucceededIndexes before the tracking).
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=501 failed=0 uncounted=[]/[] completed="0-500"`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted))
	if o.ReleaseJobState || len(o.Events) != 0 {
		t.Errorf("release %v events %v; the Job is not finished", o.ReleaseJobState, o.Events)
	}
}

func TestTrackSyncDeletedJobRemovesAllFinalizersWithoutManagingPods(t *testing.T) {
	job := newJob(2, 5, deletingJob(), trSteady(1))
	ps := []*corev1.Pod{newPod("a", succeeded), newPod("b", failed), newPod("c", running)}
	p := runSync(t, job, ps)
	trWantKinds(t, p, "write", "rmfinalizers", "write")
	o := summarize(p)
	trWantNames(t, "finalizers removed", o.FinalizersGone, "a", "b", "c")
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	// The running pod loses its finalizer but is not counted.
	trWantDesc(t, "first write", w[0].Status, `active=1 succeeded=0 failed=0 uncounted=[a]/[b] completed=""`)
	trWantDesc(t, "second write", w[1].Status, `active=1 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
}

func TestTrackSyncDeletedJobCreatesNoPods(t *testing.T) {
	job := newJob(2, 5, deletingJob(), startedAt(now.Add(-time.Minute)))
	o := summarize(runSync(t, job, nil))
	if o.Created != 0 || o.Deleted != 0 {
		t.Errorf("created %d deleted %d, want none", o.Created, o.Deleted)
	}
}

func TestTrackSyncDeletedJobPendingAndRunningPodsStayActive(t *testing.T) {
	job := newJob(2, 5, deletingJob(), trSteady(2))
	ps := []*corev1.Pod{newPod("a", pending), newPod("b", running), newPod("c", succeeded)}
	o := summarize(runSync(t, job, ps))
	trWantNames(t, "finalizers removed", o.FinalizersGone, "a", "b", "c")
	trWantDesc(t, "final", *o.Status, `active=2 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
}

func TestTrackSyncDeletedJobPastBackoffLimitFails(t *testing.T) {
	job := newJob(2, 5, deletingJob(), backoffLimit(0), trSteady(0))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff),
		trCond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestTrackSyncUnsatisfiedExpectationsCountFailuresButDeclareNothing(t *testing.T) {
	job := newJob(2, 5, deletingJob(), backoffLimit(0), trSteady(0))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}, unsatisfiedExpectations()))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=0 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
	if o.ReleaseJobState {
		t.Error("ReleaseJobState set")
	}
}

func TestTrackSyncInFlightUncountedPodCountedWithoutNewRemoval(t *testing.T) {
	job := newJob(1, 3, trSteady(1), trUncounted([]string{"a"}, nil))
	p := runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", running)},
		finalizerRemovalsInFlight(trUIDs("a")...))
	trWantKinds(t, p, "write")
	o := summarize(p)
	trWantDesc(t, "final", *o.Status, `active=1 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
}

func TestTrackSyncInFlightCountedPodIgnored(t *testing.T) {
	job := newJob(1, 3, trSteady(1), withStatus(func(s *batchv1.JobStatus) { s.Succeeded = 1 }))
	p := runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", running)},
		finalizerRemovalsInFlight(trUIDs("a")...))
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
}

func TestTrackSyncPodWithoutFinalizerNotCountedAgain(t *testing.T) {
	job := newJob(1, 2, trSteady(0), withStatus(func(s *batchv1.JobStatus) { s.Succeeded = 1 }))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", succeeded, noFinalizer())}))
	if o.Created != 1 || len(o.FinalizersGone) != 0 {
		t.Errorf("created %d, finalizers removed %v; want 1 and none", o.Created, o.FinalizersGone)
	}
	if o.Status == nil || o.Status.Succeeded != 1 {
		t.Errorf("final status %+v, want succeeded 1", o.Status)
	}
}

func TestTrackSyncTerminatingPodWithFinalizerCountedAsFailed(t *testing.T) {
	job := newJob(1, 3, trSteady(0))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running, deleting())}))
	trWantNames(t, "finalizers removed", o.FinalizersGone, "a")
	if o.Status == nil || o.Status.Failed != 1 {
		t.Errorf("final status %+v, want failed 1", o.Status)
	}
	// It is a new failure, finished at its deletion: its replacement waits
	// for the failure backoff.
	if o.Created != 0 || !slices.Equal(o.Requeues, []time.Duration{9 * time.Second}) {
		t.Errorf("created %d, requeues %v; want 0 and [9s]", o.Created, o.Requeues)
	}
}

func TestTrackSyncTerminatingPodKeepsFinalizerWhenOnlyFailedReplaced(t *testing.T) {
	job := newJob(1, 3, replacementPolicy(batchv1.Failed), trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Terminating = ptr.To[int32](1)
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("a", running, deleting())})
	o := summarize(p)
	if len(o.FinalizersGone) != 0 || o.Created != 0 || o.StatusWrites != 0 {
		t.Errorf("finalizers removed %v, created %d, writes %d; want none", o.FinalizersGone, o.Created, o.StatusWrites)
	}
}

func TestTrackSyncTooManySucceededPodsEvent(t *testing.T) {
	job := newJob(3, 2, trSteady(0))
	o := summarize(runSync(t, job, pods("s", 3, succeeded)))
	if o.Status == nil || o.Status.Succeeded != 3 || o.conditionOf(batchv1.JobComplete) == nil {
		t.Fatalf("final status %+v, want succeeded 3 and Complete", o.Status)
	}
	want := []string{"Warning TooManySucceededPods", "Normal Completed"}
	if !slices.Equal(o.Events, want) {
		t.Errorf("events %v, want %v", o.Events, want)
	}
}

func TestTrackSyncNoTooManySucceededPodsEventAtExactCompletions(t *testing.T) {
	job := newJob(2, 2, trSteady(0))
	o := summarize(runSync(t, job, pods("s", 2, succeeded)))
	if want := []string{"Normal Completed"}; !slices.Equal(o.Events, want) {
		t.Errorf("events %v, want %v", o.Events, want)
	}
}

func TestTrackSyncNoTooManySucceededPodsEventWithoutCompletions(t *testing.T) {
	job := newJob(3, -1, trSteady(0))
	o := summarize(runSync(t, job, pods("s", 3, succeeded)))
	if want := []string{"Normal Completed"}; !slices.Equal(o.Events, want) {
		t.Errorf("events %v, want %v", o.Events, want)
	}
}

func TestTrackSyncWorkQueueJobCompletesDespiteAFailure(t *testing.T) {
	job := newJob(2, -1, trSteady(0))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", failed)}))
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=1 failed=1 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted),
		trCond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted))
}

func TestTrackSyncWorkQueueJobWaitsForRunningPodAfterSuccess(t *testing.T) {
	job := newJob(2, -1, trSteady(1))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", running)}))
	if o.Created != 0 || o.Deleted != 0 {
		t.Errorf("created %d deleted %d, want none", o.Created, o.Deleted)
	}
	trWantDesc(t, "final", *o.Status, `active=1 succeeded=1 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "final", o.Status.Conditions)
}

func TestTrackSyncMoreActivePodsThanRemainingCompletions(t *testing.T) {
	job := newJob(3, 4, trSteady(3))
	ps := append(pods("r", 3, running), pods("s", 2, succeeded)...)
	o := summarize(runSync(t, job, ps))
	if o.Deleted != 1 || !o.DeletesFinalizer {
		t.Errorf("deleted %d (finalizer removed first: %v), want 1 with finalizer removal", o.Deleted, o.DeletesFinalizer)
	}
	trWantDesc(t, "final", *o.Status, `active=2 succeeded=2 failed=0 uncounted=[]/[] completed=""`)
	trWantNames(t, "finalizers removed", o.FinalizersGone, "s-0", "s-1")
}

func TestTrackSyncFinishedJobPlansNothing(t *testing.T) {
	for _, cond := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		t.Run(string(cond), func(t *testing.T) {
			job := newJob(1, 1, withCondition(cond, corev1.ConditionTrue, ""))
			p := runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", running)})
			if len(p.Actions) != 0 || !p.ReleaseJobState {
				t.Errorf("actions %v release %v; want none and release", trKinds(p), p.ReleaseJobState)
			}
		})
	}
}

func TestTrackSyncRunningJobKeepsState(t *testing.T) {
	job := newJob(2, 5, trSteady(1))
	p := runSync(t, job, []*corev1.Pod{newPod("a", succeeded), newPod("b", running)})
	if p.ReleaseJobState {
		t.Error("ReleaseJobState set for a running Job")
	}
}

func TestTrackSyncCapOnUncountedSuccessesDelaysCompletion(t *testing.T) {
	job := newJob(0, 600, trSteady(0))
	p := runSync(t, job, pods("s", 600, succeeded))
	w := trWrites(p)
	if len(w) != 2 {
		t.Fatalf("%d writes, want 2", len(w))
	}
	scm := trCond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, trMsgCompleted)
	if n := len(w[0].Status.UncountedTerminatedPods.Succeeded); n != 500 {
		t.Errorf("first write: %d uncounted successes, want 500", n)
	}
	trWantConds(t, "first write", w[0].Status.Conditions, scm)
	trWantDesc(t, "second write", w[1].Status, `active=0 succeeded=500 failed=0 uncounted=[]/[] completed=""`)
	trWantConds(t, "second write", w[1].Status.Conditions, scm)
	if o := summarize(p); len(o.FinalizersGone) != 500 || o.ReleaseJobState || len(o.Events) != 0 {
		t.Errorf("%d finalizers removed, release %v, events %v; want 500, no release, no events", len(o.FinalizersGone), o.ReleaseJobState, o.Events)
	}
}

func TestTrackSyncCapRemainderCountedAndCompletedNextSync(t *testing.T) {
	job := newJob(0, 600, trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Succeeded = 500
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue,
			batchv1.JobReasonCompletionsReached, trMsgCompleted, now.Add(-time.Second)))
	}))
	p := runSync(t, job, append(pods("done", 500, succeeded, noFinalizer()), pods("s", 100, succeeded)...))
	trWantKinds(t, p, "write", "rmfinalizers", "write", "event:Completed")
	o := summarize(p)
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=600 failed=0 uncounted=[]/[] completed=""`)
	if o.conditionOf(batchv1.JobComplete) == nil || o.Status.CompletionTime == nil {
		t.Errorf("conditions %v completionTime %v; want Complete with a completionTime", trConds(o.Status.Conditions), o.Status.CompletionTime)
	}
}

func TestTrackSyncSuccessCriteriaMetStopsActivePodsWithoutCountingThem(t *testing.T) {
	job := newJob(2, 2, trSteady(1), withStatus(func(s *batchv1.JobStatus) {
		s.Succeeded = 2
		s.Conditions = append(s.Conditions, *newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue,
			batchv1.JobReasonCompletionsReached, trMsgCompleted, now.Add(-time.Second)))
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("r", running)})
	o := summarize(p)
	trWantNames(t, "deleted", o.DeletedNames, "r")
	trWantNames(t, "finalizers removed", o.FinalizersGone, "r")
	trWantDesc(t, "final", *o.Status, `active=0 succeeded=2 failed=0 uncounted=[]/[] completed=""`)
	if o.conditionOf(batchv1.JobComplete) != nil {
		t.Error("Complete added while the stopped pod terminates")
	}
}

func TestTrackSyncManualFailureTargetFalseIsIgnored(t *testing.T) {
	job := newJob(1, 1, trSteady(1), withStatus(func(s *batchv1.JobStatus) {
		s.Ready = ptr.To[int32](1)
		s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionFalse,
			Reason: "ConditionAddedManually", Message: "Testing"})
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("a", running, ready(now.Add(-time.Minute)))})
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
}

func TestTrackSyncManualSuccessCriteriaMetFalseIsIgnored(t *testing.T) {
	job := newJob(1, 1, trSteady(1), withStatus(func(s *batchv1.JobStatus) {
		s.Ready = ptr.To[int32](1)
		s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionFalse,
			Reason: "ConditionAddedManually", Message: "Testing"})
	}))
	p := runSync(t, job, []*corev1.Pod{newPod("a", running, ready(now.Add(-time.Minute)))})
	if len(p.Actions) != 0 {
		t.Errorf("actions %v, want none", trKinds(p))
	}
}

func TestTrackSyncFailureTargetAppendedAfterManualFalseOne(t *testing.T) {
	// The reference appends the interim condition without looking for one
	// of the same type.
	job := newJob(1, 1, backoffLimit(0), trSteady(0), withStatus(func(s *batchv1.JobStatus) {
		s.Conditions = append(s.Conditions, batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionFalse,
			Reason: "ConditionAddedManually", Message: "Testing"})
	}))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", failed)}))
	trWantConds(t, "final", o.Status.Conditions,
		trCond(batchv1.JobFailureTarget, corev1.ConditionFalse, "ConditionAddedManually", "Testing"),
		trCond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff),
		trCond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, trMsgBackoff))
}

func TestTrackSyncUnsatisfiedExpectationsSkipPodManagement(t *testing.T) {
	job := newJob(2, 2, trSteady(1))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", pending)}, unsatisfiedExpectations()))
	if o.Created != 0 || o.Deleted != 0 || o.StatusWrites != 0 {
		t.Errorf("created %d deleted %d writes %d; want nothing", o.Created, o.Deleted, o.StatusWrites)
	}
}

func TestTrackSyncExpiredExpectationsCountAsSatisfied(t *testing.T) {
	job := newJob(2, 2, trSteady(1))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", pending)}, func(s *Snapshot) {
		s.Expectations = Expectations{PendingCreations: 1, RecordedAt: now.Add(-ExpectationsTimeout - time.Second)}
	}))
	if o.Created != 1 {
		t.Errorf("created %d, want 1", o.Created)
	}
}

func TestTrackSyncExpectationsExactlyAtTimeoutStillWait(t *testing.T) {
	job := newJob(2, 2, trSteady(1))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", pending)}, func(s *Snapshot) {
		s.Expectations = Expectations{PendingDeletions: 1, RecordedAt: now.Add(-ExpectationsTimeout)}
	}))
	if o.Created != 0 {
		t.Errorf("created %d, want 0", o.Created)
	}
}

// trEnact runs enactJobFinished on a Job status.
func trEnact(job *batchv1.Job, cond *batchv1.JobCondition, terminating int32) (*syncCtx, bool) {
	c := newSyncCtx(&Snapshot{Job: job, Now: now}, &Plan{})
	c.finishedCondition = cond
	c.terminating = terminating
	return c, c.enactJobFinished()
}

func TestTrackEnactJobFinishedWaitsForUncountedPods(t *testing.T) {
	c, ok := trEnact(newJob(1, 1, trUncounted(nil, []string{"a"})), trCondition(batchv1.JobFailed, "r", "m"), 0)
	if ok || len(c.job.Status.Conditions) != 0 {
		t.Errorf("finished %v with conditions %v; want not finished", ok, trConds(c.job.Status.Conditions))
	}
}

func TestTrackEnactJobFinishedWaitsForTerminatingPods(t *testing.T) {
	c, ok := trEnact(newJob(1, 1), trCondition(batchv1.JobComplete, "r", "m"), 1)
	if ok || len(c.job.Status.Conditions) != 0 || c.job.Status.CompletionTime != nil {
		t.Errorf("finished %v with conditions %v; want not finished", ok, trConds(c.job.Status.Conditions))
	}
}

func TestTrackEnactJobFinishedWithoutConditionDoesNothing(t *testing.T) {
	if _, ok := trEnact(newJob(1, 1), nil, 0); ok {
		t.Error("finished without a condition")
	}
}

func TestTrackEnactJobFinishedSetsConditionAndCompletionTime(t *testing.T) {
	c, ok := trEnact(newJob(1, 1), trCondition(batchv1.JobComplete, "r", "m"), 0)
	if !ok {
		t.Fatal("not finished")
	}
	trWantConds(t, "status", c.job.Status.Conditions, trCond(batchv1.JobComplete, corev1.ConditionTrue, "r", "m"))
	if ct := c.job.Status.CompletionTime; ct == nil || !ct.Time.Equal(now) {
		t.Errorf("completionTime %v, want %v", ct, now)
	}
}
