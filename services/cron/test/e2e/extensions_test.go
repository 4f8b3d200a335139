package e2e

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// TestBufferOneQueuesTheRunWhileAJobIsActive runs a CronJob every minute
// with concurrencyPolicy BufferOne whose Jobs run 75 seconds: at the
// second scheduled time the first Job still runs, so that run waits in
// status.pendingRuns, without a Job; once the first Job has completed, the
// queued run starts, named and annotated for its scheduled time. Never
// are two of its Jobs running at once.
func TestBufferOneQueuesTheRunWhileAJobIsActive(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "cron-bufferone")
	jobs := watchJobs(t, e, ns)

	awayFromBoundary(t, 5*time.Second)
	created := createByRPC(t, e.CronClient, cronJob(ns, "cj", batchv1.CronJobSpec{
		ConcurrencyPolicy: cronapi.BufferOne, JobTemplate: jobTemplate(fateAfter, "75s"),
	}))
	m0 := firstRun(created.CreationTimestamp.Time)
	m1 := m0.Add(time.Minute)
	first, queued := jobName("cj", m0), jobName("cj", m1)

	// Polled until the queued run has started: at most one Job running.
	running := func(ctx context.Context) (int, map[string]*batchv1.Job) {
		all, err := jobsOf(ctx, e, ns)
		if err != nil {
			return 0, nil
		}
		n := 0
		for _, j := range all {
			if terminal(j) == "Running" {
				n++
			}
		}
		return n, all
	}
	sawPending := false
	if err := poll(ctx, time.Until(m1)+2*time.Minute, func(ctx context.Context) bool {
		n, all := running(ctx)
		if n > 1 {
			t.Errorf("%d Jobs run at once under BufferOne: %v", n, jobs.appearances())
		}
		c, err := getCronJob(ctx, e, ns, "cj")
		if err == nil && len(c.Status.PendingRuns) == 1 && c.Status.PendingRuns[0].ScheduledTime.Time.Equal(m1) {
			sawPending = true
			// The queued run's Job is created once the first has
			// completed, then the run leaves the status: between the
			// two, both are seen. Never while the first still runs.
			if j, ok := all[first]; ok && terminal(j) == "Running" {
				if _, ok := all[queued]; ok {
					t.Errorf("the run at %s is pending and its Job %s exists while %s runs", m1.Format(time.TimeOnly), queued, first)
				}
			}
			if j, ok := all[first]; ok && terminal(j) != "Running" {
				// The queue empties once the first Job has completed.
				return false
			}
		}
		_, started := all[queued]
		return started
	}); err != nil {
		t.Fatalf("the queued run at %s never started: %v", m1.Format(time.TimeOnly), jobs.appearances())
	}
	if !sawPending {
		t.Errorf("status.pendingRuns never held the run at %s", m1.Format(time.TimeOnly))
	}
	firstJob, err := e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	queuedJob, err := e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, queued, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if terminal(firstJob) != "Complete/CompletionsReached" || firstJob.Status.CompletionTime == nil ||
		queuedJob.CreationTimestamp.Before(firstJob.Status.CompletionTime) {
		t.Errorf("the queued run's Job was created at %s, before the first Job completed (%s, %v)",
			queuedJob.CreationTimestamp.Format(time.TimeOnly), terminal(firstJob), firstJob.Status.CompletionTime)
	}
	if at, err := scheduledTime(queuedJob); err != nil || !at.Equal(m1) {
		t.Errorf("Job %s has the scheduled timestamp %q, want %s", queued, queuedJob.Annotations[batchv1.CronJobScheduledTimestampAnnotation], m1)
	}
	if tr := queuedJob.Annotations[cronapi.TriggerAnnotation]; tr != "" {
		t.Errorf("Job %s has the trigger %q: a queued scheduled run is still Schedule", queued, tr)
	}
	c, err := getCronJob(ctx, e, ns, "cj")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Status.PendingRuns {
		if p.ScheduledTime.Time.Equal(m1) {
			t.Errorf("the run at %s started but is still pending: %v", m1.Format(time.TimeOnly), c.Status.PendingRuns)
		}
	}
}
