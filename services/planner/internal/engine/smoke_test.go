package engine

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestNewJobCreatesParallelismPods(t *testing.T) {
	o := summarize(runSync(t, newJob(2, 5), nil))
	if o.Created != 2 || o.Status == nil || o.Status.Active != 2 || o.Status.StartTime == nil {
		t.Fatalf("%+v %+v", o, o.Status)
	}
	if o.SyncAction != SyncActionPodsCreated || o.CreationReason != PodCreateNew {
		t.Errorf("%+v", o)
	}
}

func TestLastSuccessCompletesTheJobInOneSync(t *testing.T) {
	job := newJob(1, 2, startedAt(now.Add(-10*60e9)), withStatus(func(s *batchv1.JobStatus) { s.Succeeded = 1 }))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", succeeded)}))
	if o.Status == nil || o.Status.Succeeded != 2 || o.conditionOf(batchv1.JobComplete) == nil || o.conditionOf(batchv1.JobSuccessCriteriaMet) == nil {
		t.Fatalf("%+v %+v", o, o.Status)
	}
	if len(o.FinalizersGone) != 1 || o.StatusWrites != 2 || o.Status.CompletionTime == nil {
		t.Errorf("%+v", o)
	}
	if len(o.Events) != 1 || o.Events[0] != "Normal Completed" {
		t.Errorf("events %v", o.Events)
	}
}

// job_finished_indexes_total: succeeded indexes for every Indexed Job, failed
// indexes with backoffLimitPerIndex, labelled by the kind of backoff limit.
func TestFinishedIndexesMetric(t *testing.T) {
	job := newJob(2, 4, indexed(), backoffLimitPerIndex(0))
	p := runSync(t, job, []*corev1.Pod{
		newPod("a", index(0), succeeded),
		newPod("b", index(1), failed, failureCount(0)),
	})
	m := p.Metrics
	if m.IndexesSucceeded != 1 || m.IndexesFailed != 1 || m.BackoffLimit != "perIndex" {
		t.Errorf("metrics %+v", m)
	}

	p = runSync(t, newJob(2, 4, indexed()), []*corev1.Pod{newPod("a", index(0), succeeded)})
	if m := p.Metrics; m.IndexesSucceeded != 1 || m.IndexesFailed != 0 || m.BackoffLimit != "global" {
		t.Errorf("metrics %+v", m)
	}

	p = runSync(t, newJob(2, 4), []*corev1.Pod{newPod("a", succeeded)})
	if m := p.Metrics; m.IndexesSucceeded != 0 || m.BackoffLimit != "" || m.PodsSucceeded != 1 {
		t.Errorf("metrics %+v", m)
	}
}
