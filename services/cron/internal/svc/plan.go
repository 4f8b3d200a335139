package svc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// PlanCronJob decides one sync of a CronJob: the pure decision the
// controller itself performs.
func (s *CronService) PlanCronJob(_ context.Context, req *jobplanev1.PlanCronJobRequest) (*jobplanev1.PlanCronJobResponse, error) {
	in, err := planInput(req, s.cfg.Local)
	if err != nil {
		return nil, err
	}
	p := decide.Sync(in)
	plan, err := planToProto(&p)
	if err != nil {
		return nil, apierr.New(codes.Internal, "ENCODING", nil, "encoding the plan: %v", err)
	}
	return &jobplanev1.PlanCronJobResponse{Plan: plan}, nil
}

// planInput checks and converts a PlanCronJob request.
func planInput(req *jobplanev1.PlanCronJobRequest, local *time.Location) (decide.Input, error) {
	var v apierr.Violations
	meta := req.GetCronJob().GetMetadata()
	if req.GetCronJob() == nil {
		v.Add("cronJob", "Required value")
	} else {
		for _, f := range []struct{ field, value string }{
			{"cronJob.metadata.name", meta.GetName()},
			{"cronJob.metadata.namespace", meta.GetNamespace()},
			{"cronJob.metadata.uid", meta.GetUid()},
		} {
			if f.value == "" {
				v.Add(f.field, "Required value")
			}
		}
		if meta.GetCreationTimestamp() == nil {
			v.Add("cronJob.metadata.creationTimestamp", "Required value")
		}
	}
	if req.GetNow() == nil {
		v.Add("now", "Required value")
	} else if err := req.GetNow().CheckValid(); err != nil {
		v.Add("now", "Invalid value: %v", err)
	}
	cronJob, err := kubeconv.CronJobToKube(req.GetCronJob())
	if err != nil {
		v.Add("cronJob.spec.jobTemplate.spec.template.spec", "Invalid value: %v", err)
	}
	jobs := make([]*batchv1.Job, 0, len(req.GetJobs()))
	for i, j := range req.GetJobs() {
		job, err := kubeconv.JobToKube(j, kubeconv.RestartPolicyOnly)
		if err != nil {
			v.Add(fieldIndex("jobs", i, "spec.template.spec"), "Invalid value: %v", err)
			continue
		}
		if job.Name == "" {
			v.Add(fieldIndex("jobs", i, "metadata.name"), "Required value")
		}
		jobs = append(jobs, job)
	}
	if err := v.Err("invalid PlanCronJob request"); err != nil {
		return decide.Input{}, err
	}
	return decide.Input{CronJob: cronJob, Jobs: jobs, Now: req.GetNow().AsTime(), Local: local}, nil
}

// planToProto converts a decision to the contract.
func planToProto(p *decide.Plan) (*jobplanev1.CronJobPlan, error) {
	out := &jobplanev1.CronJobPlan{
		Status:       kubeconv.CronJobStatusFromKube(&p.Status),
		UpdateStatus: p.UpdateStatus,
		Summary:      p.Summary,
	}
	if p.RequeueAfter != nil {
		out.RequeueAfter = durationpb.New(*p.RequeueAfter)
	}
	for _, t := range p.MissedRuns {
		out.MissedRuns = append(out.MissedRuns, timestamppb.New(t))
	}
	for _, a := range p.Actions {
		action := &jobplanev1.CronJobAction{Reason: a.Reason, Explanation: a.Explanation}
		switch {
		case a.Create != nil:
			job, err := kubeconv.JobFromKube(a.Create.Job)
			if err != nil {
				return nil, err
			}
			action.Kind = &jobplanev1.CronJobAction_CreateJob{CreateJob: &jobplanev1.CreateJobAction{
				Job: job, ScheduledTime: timestamppb.New(a.Create.ScheduledTime), Trigger: a.Create.Trigger,
			}}
		case a.Delete != nil:
			action.Kind = &jobplanev1.CronJobAction_DeleteJob{DeleteJob: &jobplanev1.DeleteJobAction{
				Job: kubeconv.ObjectReferenceFromKube(a.Delete),
			}}
		case a.Event != nil:
			action.Kind = &jobplanev1.CronJobAction_RecordEvent{RecordEvent: &jobplanev1.RecordEventAction{
				Type: a.Event.Type, Reason: a.Event.Reason, Message: a.Event.Message,
			}}
		}
		out.Actions = append(out.Actions, action)
	}
	return out, nil
}

func fieldIndex(list string, i int, rest string) string {
	return list + "[" + strconv.Itoa(i) + "]." + rest
}
