package svc_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// planRequest is the example of make run: a CronJob every 15 minutes whose
// last run completed, synced at its next time.
func planRequest(t testing.TB) *jobplanev1.PlanCronJobRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "plancronjob.json"))
	if err != nil {
		t.Fatal(err)
	}
	req := &jobplanev1.PlanCronJobRequest{}
	if err := protojson.Unmarshal(data, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPlanCronJobDecidesTheSync(t *testing.T) {
	resp, err := client(t).PlanCronJob(context.Background(), planRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	plan := resp.GetPlan()
	var reasons []string
	for _, a := range plan.GetActions() {
		reasons = append(reasons, a.GetReason())
	}
	if want := []string{"SawCompletedJob", "Scheduled"}; !slices.Equal(reasons, want) {
		t.Errorf("actions %v, want %v", reasons, want)
	}
	create := plan.GetActions()[1].GetCreateJob()
	if got, want := create.GetJob().GetMetadata().GetName(), "report-29922375"; got != want {
		t.Errorf("creates %s, want %s", got, want)
	}
	if got := create.GetJob().GetMetadata().GetAnnotations()["batch.kubernetes.io/cronjob-scheduled-timestamp"]; got != "2026-11-22T11:15:00+01:00" {
		t.Errorf("scheduled timestamp %s, want it in Europe/Paris", got)
	}
	if !plan.GetUpdateStatus() || plan.GetStatus().GetLastSuccessfulTime().AsTime().Format(time.RFC3339) != "2026-11-22T10:03:00Z" {
		t.Errorf("status %v (update %v)", plan.GetStatus(), plan.GetUpdateStatus())
	}
	if got, want := plan.GetRequeueAfter().AsDuration(), 15*time.Minute-200*time.Millisecond+100*time.Millisecond; got != want {
		t.Errorf("requeue after %v, want %v", got, want)
	}
}

// PlanCronJob is a pure function: the same request gives the same bytes.
func TestPlanCronJobIsDeterministic(t *testing.T) {
	c := client(t)
	req := planRequest(t)
	var first []byte
	for i := range 20 {
		resp, err := c.PlanCronJob(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
		} else if string(got) != string(first) {
			t.Fatalf("call %d answered other bytes", i)
		}
	}
}

func TestPlanCronJobRejectsIncompleteRequests(t *testing.T) {
	c := client(t)
	_, err := c.PlanCronJob(context.Background(), &jobplanev1.PlanCronJobRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty request: %v", err)
	}
	req := planRequest(t)
	req.CronJob.Metadata.Uid = ""
	req.Now = nil
	req.Jobs = append(req.Jobs, &jobplanev1.Job{}) // no name, no spec: converted, then refused
	_, err = c.PlanCronJob(context.Background(), req)
	var fields []string
	for _, v := range apierr.FieldViolations(err) {
		fields = append(fields, v.Field)
	}
	slices.Sort(fields)
	if want := []string{"cronJob.metadata.uid", "jobs[1].metadata.name", "now"}; !slices.Equal(fields, want) {
		t.Errorf("violations %v, want %v (%v)", fields, want, err)
	}
}

// Numbers and choices the API server never stores out of range are refused
// with their paths, never planned: a negative history limit would have the
// sync delete more Jobs than it has. The schedule is the sync's to report.
func TestPlanCronJobRefusesFieldsOutOfRange(t *testing.T) {
	c := client(t)
	req := planRequest(t)
	spec := req.CronJob.Spec
	spec.SuccessfulJobsHistoryLimit, spec.FailedJobsHistoryLimit = proto.Int32(-1), proto.Int32(-5)
	spec.StartingDeadlineSeconds = proto.Int64(-10)
	spec.ConcurrencyPolicy = "Sometimes"
	spec.CatchUp = &jobplanev1.CatchUpPolicy{MaxRuns: proto.Int32(0)}
	spec.Schedule = "not a schedule"
	_, err := c.PlanCronJob(context.Background(), req)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	var fields []string
	for _, v := range apierr.FieldViolations(err) {
		fields = append(fields, v.Field)
	}
	slices.Sort(fields)
	want := []string{"cronJob.spec.catchUp.maxRuns", "cronJob.spec.concurrencyPolicy", "cronJob.spec.failedJobsHistoryLimit",
		"cronJob.spec.startingDeadlineSeconds", "cronJob.spec.successfulJobsHistoryLimit"}
	if !slices.Equal(fields, want) {
		t.Errorf("violations %v, want %v (%v)", fields, want, err)
	}

	// A batch/v1 CronJob's own fields too; its extensions are named by
	// their annotations (TestPlanCronJobReadsABatchV1CronJobsAnnotations).
	req = planRequest(t)
	req.CronJob.ApiVersion = "batch/v1"
	req.CronJob.Spec.SuccessfulJobsHistoryLimit = proto.Int32(-1)
	_, err = c.PlanCronJob(context.Background(), req)
	if v := apierr.FieldViolations(err); len(v) != 1 || v[0].Field != "cronJob.spec.successfulJobsHistoryLimit" {
		t.Errorf("batch/v1: %v, want successfulJobsHistoryLimit refused", err)
	}
}

// A batch/v1 CronJob is planned as the cron service in drop-in mode runs
// it: its extensions are its annotations (here a buffer: a run while one is
// active is queued, not started, as the spec's Allow would), and an invalid
// annotation is named.
func TestPlanCronJobReadsABatchV1CronJobsAnnotations(t *testing.T) {
	c := client(t)
	req := planRequest(t)
	req.CronJob.ApiVersion = "batch/v1"
	req.CronJob.Spec.ConcurrencyPolicy = "Allow"
	active := proto.Clone(req.Jobs[0]).(*jobplanev1.Job)
	active.Metadata.Name, active.Metadata.Uid, active.Status = "report-running", "running-uid", nil
	req.Jobs = append(req.Jobs, active)
	req.CronJob.Status.Active = append(req.CronJob.Status.Active, &jobplanev1.ObjectReference{
		ApiVersion: "batch/v1", Kind: "Job", Namespace: active.Metadata.Namespace, Name: active.Metadata.Name, Uid: active.Metadata.Uid})
	req.CronJob.Metadata.Annotations = map[string]string{"cron.jobplane.dev/concurrency-policy": "BufferOne"}
	resp, err := c.PlanCronJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range resp.GetPlan().GetActions() {
		if a.GetCreateJob() != nil {
			t.Errorf("BufferOne from the annotation: a Job created beside the active one (%v)", a)
		}
	}
	if n := len(resp.GetPlan().GetStatus().GetPendingRuns()); n != 1 {
		t.Errorf("%d pending runs, want the run buffered", n)
	}
	req.CronJob.ApiVersion = "jobplane.dev/v1" // annotations are batch/v1's extensions only
	resp, err = c.PlanCronJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.GetPlan().GetStatus().GetPendingRuns()); n != 0 {
		t.Errorf("a jobplane CronJob read its annotations: %d pending runs", n)
	}

	req.CronJob.ApiVersion = "batch/v1"
	req.CronJob.Metadata.Annotations = map[string]string{"cron.jobplane.dev/jitter-seconds": "soon"}
	_, err = c.PlanCronJob(context.Background(), req)
	violations := apierr.FieldViolations(err)
	if status.Code(err) != codes.InvalidArgument || len(violations) != 1 || violations[0].Field != "cronJob.metadata.annotations[cron.jobplane.dev/jitter-seconds]" {
		t.Errorf("invalid annotation: %v", err)
	}
}

// PreviewSchedule applies a daylight-saving policy as a CronJob would.
func TestPreviewScheduleFollowsTheDaylightSavingPolicy(t *testing.T) {
	c := client(t)
	req := &jobplanev1.PreviewScheduleRequest{
		Schedule: "30 2 * * *", TimeZone: "America/New_York",
		From: timestamppb.New(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)), Count: 2,
	}
	runs := func() []string {
		t.Helper()
		resp, err := c.PreviewSchedule(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range resp.GetRuns() {
			out = append(out, r.GetLocalTime())
		}
		return out
	}
	// The reference: 02:30 does not exist on 2026-03-08, so no run that day.
	if got, want := runs(), []string{"2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}; !slices.Equal(got, want) {
		t.Errorf("default %v, want %v", got, want)
	}
	req.DaylightSaving = &jobplanev1.DaylightSavingPolicy{SkippedHour: "RunAtNextValidTime"}
	if got, want := runs(), []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}; !slices.Equal(got, want) {
		t.Errorf("RunAtNextValidTime %v, want %v", got, want)
	}
	req.DaylightSaving = &jobplanev1.DaylightSavingPolicy{SkippedHour: "Never"}
	_, err := c.PreviewSchedule(context.Background(), req)
	if v := apierr.FieldViolations(err); len(v) != 1 || v[0].Field != "daylightSaving.skippedHour" {
		t.Errorf("unknown policy: %v", err)
	}
}

func apierrFields(err error) []string {
	var out []string
	for _, v := range apierr.FieldViolations(err) {
		out = append(out, v.Field)
	}
	return out
}
