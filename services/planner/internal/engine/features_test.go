package engine

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func withFeatures(f Features) syncOpt { return func(s *Snapshot) { s.Features = f } }

// olderThanPodReplacementPolicy is v1.28's Job controller: JobManagedBy and
// JobPodReplacementPolicy off, so nothing delays a terminal condition.
var olderThanPodReplacementPolicy = Features{JobManagedByOff: true, JobPodReplacementPolicyOff: true, JobSuccessPolicyOff: true, JobBackoffLimitPerIndexOff: true}

// The gates change what the reference's Job controller writes as its code
// says for each (pkg/controller/job of v1.36.3): checked here one behaviour
// at a time, and as a whole by the reference's integration tests, which
// emulate older versions (make conformance).
func TestFeatureGates(t *testing.T) {
	t.Run("all off: Complete at once, without reason, and no terminating count", func(t *testing.T) {
		o := summarize(runSync(t, newJob(2, 2), pods("p", 2, succeeded), withFeatures(olderThanPodReplacementPolicy)))
		if o.conditionOf(batchv1.JobSuccessCriteriaMet) != nil {
			t.Error("SuccessCriteriaMet written with the gates that add it off")
		}
		c := o.conditionOf(batchv1.JobComplete)
		if c == nil || c.Reason != "" || c.Message != "" {
			t.Errorf("Complete condition %+v, want one without reason nor message", c)
		}
		if o.Status.Terminating != nil {
			t.Errorf("terminating %d written with JobPodReplacementPolicy off", *o.Status.Terminating)
		}
	})
	t.Run("JobSuccessPolicy off alone: SuccessCriteriaMet then Complete, without reason", func(t *testing.T) {
		o := summarize(runSync(t, newJob(2, 2), pods("p", 2, succeeded), withFeatures(Features{JobSuccessPolicyOff: true})))
		met, complete := o.conditionOf(batchv1.JobSuccessCriteriaMet), o.conditionOf(batchv1.JobComplete)
		if met == nil || complete == nil || met.Reason != "" || complete.Reason != "" {
			t.Errorf("conditions %+v and %+v, want SuccessCriteriaMet and Complete without reason", met, complete)
		}
	})
	t.Run("all off: Failed at once on the backoff limit, though a pod still runs", func(t *testing.T) {
		ps := append(pods("f", 2, failed), newPod("r", running))
		o := summarize(runSync(t, newJob(3, 3, backoffLimit(1)), ps, withFeatures(olderThanPodReplacementPolicy)))
		if o.conditionOf(batchv1.JobFailureTarget) != nil {
			t.Error("FailureTarget written with the gates that add it off")
		}
		if c := o.conditionOf(batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonBackoffLimitExceeded {
			t.Errorf("Failed condition %+v, want BackoffLimitExceeded without waiting for the running pod", c)
		}
	})
	t.Run("v1.36: the backoff limit waits behind FailureTarget while a pod terminates", func(t *testing.T) {
		ps := append(pods("f", 2, failed), newPod("r", running))
		o := summarize(runSync(t, newJob(3, 3, backoffLimit(1)), ps))
		if o.conditionOf(batchv1.JobFailureTarget) == nil || o.conditionOf(batchv1.JobFailed) != nil {
			t.Errorf("conditions %+v, want FailureTarget and no Failed yet", o.Status.Conditions)
		}
	})
	t.Run("JobSuccessPolicy off: the success policy is not read", func(t *testing.T) {
		job := newJob(3, 3, indexed(), successPolicy(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](1)}))
		ps := []*corev1.Pod{newPod("a", index(0), succeeded), newPod("b", index(1), running), newPod("c", index(2), running)}
		if o := summarize(runSync(t, job, ps, withFeatures(Features{JobSuccessPolicyOff: true}))); o.conditionOf(batchv1.JobSuccessCriteriaMet) != nil || o.Deleted != 0 {
			t.Errorf("the success policy was applied with its gate off: %+v", o)
		}
		if o := summarize(runSync(t, job, ps)); o.conditionOf(batchv1.JobSuccessCriteriaMet) == nil {
			t.Error("the success policy was not applied with its gate on")
		}
	})
	t.Run("JobBackoffLimitPerIndex off: per-index limits are not read", func(t *testing.T) {
		job := newJob(2, 2, indexed(), backoffLimitPerIndex(0))
		ps := []*corev1.Pod{newPod("a", index(0), failed), newPod("b", index(1), running)}
		o := summarize(runSync(t, job, ps, withFeatures(Features{JobBackoffLimitPerIndexOff: true})))
		if o.Status == nil || o.Status.FailedIndexes != nil {
			t.Errorf("failed indexes tracked with JobBackoffLimitPerIndex off: %+v", o.Status)
		}
	})
	t.Run("JobPodReplacementPolicy off: podReplacementPolicy Failed is not read", func(t *testing.T) {
		// A running pod being deleted counts as failed at once unless only
		// failed pods are replaced.
		job := newJob(1, 1, replacementPolicy(batchv1.Failed))
		ps := []*corev1.Pod{newPod("a", running, deleting())}
		if o := summarize(runSync(t, job, ps, withFeatures(Features{JobPodReplacementPolicyOff: true}))); o.Status == nil || o.Status.Failed != 1 {
			t.Errorf("a terminating pod was not counted failed with the gate off: %+v", o.Status)
		}
		if o := summarize(runSync(t, job, ps)); o.Status != nil && o.Status.Failed != 0 {
			t.Errorf("a terminating pod was counted failed before it failed with podReplacementPolicy Failed: %+v", o.Status)
		}
	})
	t.Run("MutableSchedulingDirectivesForSuspendedJobs off: a suspended Job keeps its start time", func(t *testing.T) {
		started := now.Add(-15 * time.Second)
		job := newJob(1, 2, suspended(), startedAt(started))
		o := summarize(runSync(t, job, nil, withFeatures(Features{MutableSchedulingDirectivesForSuspendedJobsOff: true})))
		if o.Status == nil || o.Status.StartTime == nil || !o.Status.StartTime.Time.Equal(started) {
			t.Errorf("start time %+v, want %v kept with the gate off", o.Status, started)
		}
		if o := summarize(runSync(t, job, nil)); o.Status == nil || o.Status.StartTime != nil {
			t.Errorf("start time %+v kept with the gate on", o.Status)
		}
	})
}
