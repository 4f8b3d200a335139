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
