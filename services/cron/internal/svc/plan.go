package svc

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
	"github.com/jobplane/jobplane/services/cron/internal/validation"
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
	var errs field.ErrorList
	meta, metaPath := req.GetCronJob().GetMetadata(), field.NewPath("cronJob", "metadata")
	if req.GetCronJob() == nil {
		errs = append(errs, field.Required(field.NewPath("cronJob"), ""))
	} else {
		errs = append(errs, cronJobKey(metaPath, meta.GetNamespace(), meta.GetName())...)
		if meta.GetUid() == "" {
			errs = append(errs, field.Required(metaPath.Child("uid"), ""))
		}
		if meta.GetCreationTimestamp() == nil {
			errs = append(errs, field.Required(metaPath.Child("creationTimestamp"), ""))
		}
	}
	if req.GetNow() == nil {
		errs = append(errs, field.Required(field.NewPath("now"), ""))
	} else if err := req.GetNow().CheckValid(); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("now"), field.OmitValueType{}, err.Error()))
	}
	cronJob, err := kubeconv.CronJobToKube(req.GetCronJob())
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("cronJob", "spec", "jobTemplate", "spec", "template", "spec"), field.OmitValueType{}, err.Error()))
	} else {
		specPath := field.NewPath("cronJob", "spec")
		errs = append(errs, validation.ValidateSyncedFields(&cronJob.Spec, specPath)...)
		if cronJob.APIVersion == batchcron.APIVersion {
			for _, e := range batchcron.Extend(cronJob) {
				e.Field = "cronJob." + e.Field
				errs = append(errs, e)
			}
		} else {
			errs = append(errs, validation.ValidateExtensions(&cronJob.Spec, specPath)...)
		}
	}
	jobs := make([]*batchv1.Job, 0, len(req.GetJobs()))
	for i, j := range req.GetJobs() {
		jobPath := field.NewPath("jobs").Index(i)
		job, err := kubeconv.JobToKube(j, kubeconv.RestartPolicyOnly)
		if err != nil {
			errs = append(errs, field.Invalid(jobPath.Child("spec", "template", "spec"), field.OmitValueType{}, err.Error()))
			continue
		}
		if job.Name == "" {
			errs = append(errs, field.Required(jobPath.Child("metadata", "name"), ""))
		}
		jobs = append(jobs, job)
	}
	if err := apierr.Invalid("invalid PlanCronJob request", errs); err != nil {
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
