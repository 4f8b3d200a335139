package e2e

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
)

// instanceStream collects the messages of one WatchJobInstances stream.
type instanceStream struct {
	messages chan *jobplanev1.WatchJobInstancesResponse
	ended    chan error
}

func openInstanceStream(t *testing.T, ctx context.Context, client jobplanev1.CronServiceClient, req *jobplanev1.WatchJobInstancesRequest) *instanceStream {
	t.Helper()
	stream, err := client.WatchJobInstances(ctx, req)
	if err != nil {
		t.Fatalf("WatchJobInstances: %v", err)
	}
	s := &instanceStream{messages: make(chan *jobplanev1.WatchJobInstancesResponse, 100), ended: make(chan error, 1)}
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				s.ended <- err
				return
			}
			s.messages <- m
		}
	}()
	return s
}

// next is the stream's next message, within timeout.
func (s *instanceStream) next(t *testing.T, timeout time.Duration, what string) *jobplanev1.WatchJobInstancesResponse {
	t.Helper()
	select {
	case m := <-s.messages:
		return m
	case err := <-s.ended:
		if errors.Is(err, io.EOF) {
			err = errors.New("the server closed it")
		}
		t.Fatalf("waiting for %s: the stream ended: %v", what, err)
	case <-time.After(timeout):
		t.Fatalf("no %s on the stream within %s", what, timeout)
	}
	return nil
}

// none fails if the stream has a message within wait.
func (s *instanceStream) none(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case m := <-s.messages:
		t.Errorf("unexpected message on the stream: Job %s, trigger %s", m.GetJob().GetMetadata().GetName(), m.GetTrigger())
	case <-time.After(wait):
	}
}

// checkInstance checks a stream message names the Job, trigger and
// scheduled time.
func checkInstance(t *testing.T, m *jobplanev1.WatchJobInstancesResponse, job, trigger string, scheduled time.Time) {
	t.Helper()
	if got := m.GetJob().GetMetadata().GetName(); got != job {
		t.Errorf("stream: Job %s, want %s", got, job)
	}
	if m.GetTrigger() != trigger {
		t.Errorf("stream: Job %s has trigger %q, want %q", m.GetJob().GetMetadata().GetName(), m.GetTrigger(), trigger)
	}
	if got := m.GetScheduledTime().AsTime(); !got.Equal(scheduled) {
		t.Errorf("stream: Job %s scheduled at %s, want %s", m.GetJob().GetMetadata().GetName(), got, scheduled)
	}
	if m.GetCronJob().GetName() != "cj" || m.GetCronJob().GetKind() != cronapi.Kind {
		t.Errorf("stream: Job %s of %v, want CronJob cj", m.GetJob().GetMetadata().GetName(), m.GetCronJob())
	}
	if m.GetResourceVersion() == "" {
		t.Errorf("stream: Job %s without resource_version", m.GetJob().GetMetadata().GetName())
	}
}

// TestTriggerWatchAndBackfill follows a CronJob's runs with
// WatchJobInstances: a stream opened before its first scheduled time sees
// that run (trigger Schedule) and then a TriggerCronJob run (trigger
// Manual), each with its scheduled time; a stream resumed from the first
// message's resource_version replays only what came after it; a
// BackfillCronJob of the three minutes up to the first run creates the two
// not run yet (trigger Backfill) and skips the one that ran, and again
// skips them all. Every run completes; manual and backfilled runs leave
// lastScheduleTime alone. Deleting the CronJob with DeleteCronJob
// (foreground propagation) deletes its Jobs, then the CronJob.
func TestTriggerWatchAndBackfill(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "cron-rpc-watch")
	jobs := watchJobs(t, e, ns)

	awayFromBoundary(t, 15*time.Second)
	// A history long enough to keep every run this test looks at.
	created := createByRPC(t, e.CronClient, cronJob(ns, "cj", batchv1.CronJobSpec{SuccessfulJobsHistoryLimit: ptr.To[int32](10), JobTemplate: succeeding()}))
	m0 := firstRun(created.CreationTimestamp.Time)
	first := openInstanceStream(t, ctx, e.CronClient, &jobplanev1.WatchJobInstancesRequest{Namespace: ns, CronJobName: "cj"})
	t.Logf("first scheduled run at %s", m0.Format(time.TimeOnly))

	scheduled := first.next(t, time.Until(m0)+time.Minute, "the scheduled run")
	checkInstance(t, scheduled, jobName("cj", m0), cronapi.TriggerSchedule, m0)

	before := time.Now().Truncate(time.Second)
	triggered, err := e.CronClient.TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: ns, Name: "cj"})
	if err != nil {
		t.Fatalf("TriggerCronJob: %v", err)
	}
	after := time.Now()
	manualName := triggered.GetJob().GetMetadata().GetName()
	if manualName == "" {
		t.Fatalf("TriggerCronJob created no Job: %v", triggered)
	}
	manual := first.next(t, time.Minute, "the manual run")
	manualAt := manual.GetScheduledTime().AsTime()
	checkInstance(t, manual, manualName, cronapi.TriggerManual, manualAt)
	if manualAt.Before(before) || manualAt.After(after) {
		t.Errorf("the manual run is scheduled at %s, not when it was triggered (%s to %s)", manualAt, before, after)
	}

	resumed := openInstanceStream(t, ctx, e.CronClient, &jobplanev1.WatchJobInstancesRequest{Namespace: ns, CronJobName: "cj", ResourceVersion: scheduled.GetResourceVersion()})
	replayed := resumed.next(t, time.Minute, "the replayed manual run")
	checkInstance(t, replayed, manualName, cronapi.TriggerManual, manualAt)

	// The range ends after the first run: a backfill must not reach now.
	sleepUntil(ctx, m0.Add(2*time.Second))
	backfill := &jobplanev1.BackfillCronJobRequest{Namespace: ns, Name: "cj",
		Start: timestamppb.New(m0.Add(-2 * time.Minute)), End: timestamppb.New(m0.Add(time.Second))}
	resp, err := e.CronClient.BackfillCronJob(ctx, backfill)
	if err != nil {
		t.Fatalf("BackfillCronJob: %v", err)
	}
	var backfilled []string
	for _, j := range resp.GetJobs() {
		backfilled = append(backfilled, j.GetMetadata().GetName())
	}
	wantBackfilled := []string{jobName("cj", m0.Add(-2*time.Minute)), jobName("cj", m0.Add(-time.Minute))}
	if !slices.Equal(backfilled, wantBackfilled) {
		t.Errorf("BackfillCronJob created %v, want %v", backfilled, wantBackfilled)
	}
	if got := timestamps(resp.GetSkipped()); !slices.Equal(got, []time.Time{m0}) {
		t.Errorf("BackfillCronJob skipped %v, want the time that ran, %s", got, m0)
	}
	for i, name := range wantBackfilled {
		at := m0.Add(time.Duration(i-2) * time.Minute)
		for _, s := range []*instanceStream{first, resumed} {
			checkInstance(t, s.next(t, time.Minute, "a backfilled run"), name, cronapi.TriggerBackfill, at)
		}
	}

	again, err := e.CronClient.BackfillCronJob(ctx, backfill)
	if err != nil {
		t.Fatalf("BackfillCronJob again: %v", err)
	}
	if len(again.GetJobs()) != 0 || len(timestamps(again.GetSkipped())) != 3 {
		t.Errorf("BackfillCronJob again created %d Jobs and skipped %v, want none and all three times", len(again.GetJobs()), timestamps(again.GetSkipped()))
	}
	first.none(t, 2*time.Second)

	// Every run completes; the schedule's mark has not moved.
	names := append([]string{jobName("cj", m0), manualName}, wantBackfilled...)
	var states map[string]string
	if err := poll(ctx, 2*time.Minute, func(ctx context.Context) bool {
		all, err := jobsOf(ctx, e, ns)
		if err != nil {
			return false
		}
		states = map[string]string{}
		for _, name := range names {
			if j, ok := all[name]; ok {
				states[name] = terminal(j)
			}
		}
		for _, name := range names {
			if states[name] != "Complete/CompletionsReached" {
				return false
			}
		}
		return true
	}); err != nil {
		t.Errorf("the runs did not all complete: %v", states)
	}
	c, err := getCronJob(ctx, e, ns, "cj")
	if err != nil {
		t.Fatal(err)
	}
	if lst := c.Status.LastScheduleTime; lst == nil || lst.Time.Before(m0) || !lst.Time.Truncate(time.Minute).Equal(lst.Time) {
		t.Errorf("lastScheduleTime is %v, want a scheduled time, %s or later", lst, m0)
	}
	for _, a := range jobs.of("cj") {
		if a.Name == manualName && a.Trigger != cronapi.TriggerManual || slices.Contains(wantBackfilled, a.Name) && a.Trigger != cronapi.TriggerBackfill {
			t.Errorf("Job %s has the trigger annotation %q", a.Name, a.Trigger)
		}
	}

	// Foreground: the CronJob goes once the garbage collector has deleted
	// its Jobs.
	if _, err := e.CronClient.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: ns, Name: "cj",
		PropagationPolicy: string(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatalf("DeleteCronJob: %v", err)
	}
	waitJobsGone(t, ctx, e, ns)
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		_, err := getCronJob(ctx, e, ns, "cj")
		return apierrors.IsNotFound(err)
	}); err != nil {
		t.Errorf("the CronJob deleted in the foreground is still there once its Jobs are gone")
	}
}

func timestamps(ts []*timestamppb.Timestamp) []time.Time {
	var out []time.Time
	for _, t := range ts {
		out = append(out, t.AsTime())
	}
	return out
}

// waitJobsGone waits until the garbage collector has deleted every Job and
// pod of the namespace.
func waitJobsGone(t *testing.T, ctx context.Context, e *Env, ns string) {
	t.Helper()
	var left []string
	if err := poll(ctx, 90*time.Second, func(ctx context.Context) bool {
		left = nil
		jobs, err := e.Cluster.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, j := range jobs.Items {
			left = append(left, "job/"+j.Name)
		}
		pods, err := e.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			left = append(left, "pod/"+p.Name)
		}
		return len(left) == 0
	}); err != nil {
		t.Errorf("after the CronJob's deletion, still there: %v", left)
	}
}

// kubectlCronJob is a jobplane CronJob as a user writes it for kubectl: a
// batch/v1 CronJob's fields under apiVersion jobplane.dev/v1.
const kubectlCronJob = `{
  "apiVersion": "jobplane.dev/v1",
  "kind": "CronJob",
  "metadata": {"name": "applied"},
  "spec": {
    "schedule": "* * * * *",
    "concurrencyPolicy": "Forbid",
    "jobTemplate": {"spec": {
      "completions": 2, "parallelism": 2,
      "template": {
        "metadata": {"annotations": {"fate.jobplane.dev/after": "1s"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
      }
    }}
  }
}`

// TestKubectlCronJobRunsAndItsDeletionDeletesItsJobs creates a jobplane
// CronJob directly with a dynamic client, as kubectl apply would, without
// the cron service's RPCs: its first scheduled run is a Job of the
// executor that completes on kwok nodes, and the status says so, with the
// next scheduled time. Deleting
// the CronJob (background propagation, kubectl's default) lets the garbage
// collector delete its Jobs and their pods.
//
// Forbid, with a run of a few seconds, keeps the state simple.
func TestKubectlCronJobRunsAndItsDeletionDeletesItsJobs(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "cron-kubectl")

	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(kubectlCronJob)); err != nil {
		t.Fatal(err)
	}
	awayFromBoundary(t, 5*time.Second)
	created, err := e.CronJobs.Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m0 := firstRun(created.GetCreationTimestamp().Time)
	name := jobName("applied", m0)
	var job *batchv1.Job
	if err := poll(ctx, time.Until(m0)+2*time.Minute, func(ctx context.Context) bool {
		job, err = e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && terminal(job) != "Running"
	}); err != nil {
		t.Fatalf("the run scheduled at %s did not finish: %v (last read %v)", m0.Format(time.TimeOnly), err, job)
	}
	if got := terminal(job); got != "Complete/CompletionsReached" || job.Status.Succeeded != 2 {
		t.Errorf("Job %s ended %s with %d pods succeeded, want Complete with 2", name, got, job.Status.Succeeded)
	}
	if mb := job.Spec.ManagedBy; mb == nil || *mb != "jobplane.dev/executor" {
		t.Errorf("Job %s has spec.managedBy %v, want the executor's", name, mb)
	}
	if at, err := scheduledTime(job); err != nil || !at.Equal(m0) {
		t.Errorf("Job %s has the scheduled timestamp %q, want %s", name, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation], m0)
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.APIVersion != cronapi.APIVersion || ref.UID != created.GetUID() {
		t.Errorf("Job %s is controlled by %v, want the CronJob", name, ref)
	}
	// Before the next run: the status shows the completed one and the
	// next scheduled time.
	var status cronapi.CronJobStatus
	if err := poll(ctx, time.Until(m0.Add(55*time.Second)), func(ctx context.Context) bool {
		c, err := getCronJob(ctx, e, ns, "applied")
		if err != nil {
			return false
		}
		status = c.Status
		return status.LastSuccessfulTime != nil && len(status.Active) == 0
	}); err != nil {
		t.Errorf("the CronJob's status does not show the completed run: %+v", status)
	}
	if lst := status.LastScheduleTime; lst == nil || !lst.Time.Equal(m0) {
		t.Errorf("status.lastScheduleTime is %v, want %s", lst, m0)
	}
	if next := status.NextScheduleTime; next == nil || !next.Time.Equal(m0.Add(time.Minute)) {
		t.Errorf("status.nextScheduleTime is %v, want %s", next, m0.Add(time.Minute))
	}

	if err := e.CronJobs.Namespace(ns).Delete(ctx, "applied", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		_, err := e.CronJobs.Namespace(ns).Get(ctx, "applied", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}); err != nil {
		t.Errorf("the CronJob is still there after its deletion")
	}
	waitJobsGone(t, ctx, e, ns)
}
