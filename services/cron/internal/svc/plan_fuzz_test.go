package svc_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

var (
	fuzzedPolicies = []string{"", "Allow", "Forbid", "Replace", "BufferOne", "BufferAll", "Sometimes"}
	fuzzedCatchUps = []string{"", "Latest", "Skip", "All", "Never"}
)

// FuzzPlanCronJob plans make run's CronJob with every number and choice
// PlanCronJob takes, in range and out of it, at clocks anywhere a timestamp
// goes, with finished and running Jobs, as jobplane.dev/v1 and batch/v1:
// the answer is a plan or INVALID_ARGUMENT, never a panic nor another code.
func FuzzPlanCronJob(f *testing.F) {
	base := planRequest(f)
	f.Add("*/15 * * * *", "Europe/Paris", int64(-1), int32(3), int32(1), uint8(2), uint8(0), int64(-1), int32(0), int32(0),
		int64(1795000000), int64(1794990000), int64(1794999000), uint8(0x23), false)
	f.Add("@every 1s", "", int64(0), int32(0), int32(0), uint8(4), uint8(4), int64(0), int32(1000), int32(3600),
		int64(253402300799), int64(-62135596800), int64(0), uint8(0xff), true)
	cs := svc.NewCronService(svc.Config{})
	f.Fuzz(func(t *testing.T, schedule, zone string, deadline int64, succeeded, failed int32, policy, catchUp uint8,
		window int64, maxRuns, jitter int32, now, created, last int64, jobs uint8, batch bool) {
		req := proto.Clone(base).(*jobplanev1.PlanCronJobRequest)
		cj := req.CronJob
		if batch {
			cj.ApiVersion = "batch/v1"
		}
		spec := cj.Spec
		spec.Schedule = schedule
		spec.TimeZone = nil
		if zone != "" {
			spec.TimeZone = proto.String(zone)
		}
		if deadline != -1 {
			spec.StartingDeadlineSeconds = proto.Int64(deadline)
		}
		spec.SuccessfulJobsHistoryLimit, spec.FailedJobsHistoryLimit = proto.Int32(succeeded), proto.Int32(failed)
		spec.ConcurrencyPolicy = fuzzedPolicies[int(policy)%len(fuzzedPolicies)]
		if !batch && catchUp > 0 {
			spec.CatchUp = &jobplanev1.CatchUpPolicy{Policy: fuzzedCatchUps[int(catchUp)%len(fuzzedCatchUps)]}
			if window != -1 {
				spec.CatchUp.WindowSeconds = proto.Int64(window)
			}
			if maxRuns != 0 {
				spec.CatchUp.MaxRuns = proto.Int32(maxRuns)
			}
		}
		if !batch && jitter != 0 {
			spec.JitterSeconds = proto.Int32(jitter)
		}
		req.Now = &timestamppb.Timestamp{Seconds: now}
		cj.Metadata.CreationTimestamp = &timestamppb.Timestamp{Seconds: created}
		cj.Status.LastScheduleTime = nil
		if last != 0 {
			cj.Status.LastScheduleTime = &timestamppb.Timestamp{Seconds: last}
		}
		addFuzzedJobs(req, jobs, now)
		_, err := cs.PlanCronJob(context.Background(), req)
		if code := status.Code(err); code != codes.OK && code != codes.InvalidArgument {
			t.Fatalf("%v", err)
		}
	})
}

// addFuzzedJobs adds up to seven Jobs of the CronJob's to req, scheduled
// an hour apart before now: bit i of states says whether the i-th has
// finished (Complete when its index is even, Failed when odd); the
// unfinished ones are listed in active.
func addFuzzedJobs(req *jobplanev1.PlanCronJobRequest, states uint8, now int64) {
	template := req.Jobs[0]
	for i := range int(states>>5) + int(states&1) {
		job := proto.Clone(template).(*jobplanev1.Job)
		scheduled := now - int64(i+1)*3600
		job.Metadata.Name = fmt.Sprintf("report-%d", scheduled/60)
		job.Metadata.Uid = fmt.Sprintf("uid-%d", i)
		job.Metadata.CreationTimestamp = &timestamppb.Timestamp{Seconds: scheduled}
		job.Status = &jobplanev1.JobStatus{StartTime: &timestamppb.Timestamp{Seconds: scheduled}}
		if states&(1<<(i%5)) == 0 {
			req.CronJob.Status.Active = append(req.CronJob.Status.Active, &jobplanev1.ObjectReference{
				Kind: "Job", ApiVersion: "batch/v1", Namespace: job.Metadata.Namespace, Name: job.Metadata.Name, Uid: job.Metadata.Uid})
		} else {
			condition := "Complete"
			if i%2 == 1 {
				condition = "Failed"
			}
			job.Status.CompletionTime = &timestamppb.Timestamp{Seconds: scheduled + 60}
			job.Status.Conditions = []*jobplanev1.JobCondition{{Type: condition, Status: "True"}}
		}
		req.Jobs = append(req.Jobs, job)
	}
}
