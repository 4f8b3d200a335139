package svc

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/plan"
)

// Execute hands a plan to the controller, which performs it on the Job the
// plan was computed for.
func (s *ExecutorService) Execute(ctx context.Context, req *jobplanev1.ExecuteRequest) (*jobplanev1.ExecuteResponse, error) {
	errs := jobKey(req.GetNamespace(), req.GetName())
	if req.GetUid() == "" {
		errs = append(errs, field.Required(field.NewPath("uid"), "the UID of the Job the plan was computed for"))
	}
	var p *plan.Plan
	if req.GetPlan() == nil {
		errs = append(errs, field.Required(field.NewPath("plan"), ""))
	} else {
		var planErrs field.ErrorList
		p, planErrs = plan.FromProto(req.GetPlan(), field.NewPath("plan"))
		errs = append(errs, planErrs...)
		errs = append(errs, callerPlanErrors(req.GetPlan(), field.NewPath("plan"))...)
	}
	if err := apierr.Invalid("invalid Execute request", errs); err != nil {
		return nil, err
	}
	trimCallerPlan(p)
	if err := s.mustLead(); err != nil {
		return nil, err
	}
	outcomes, job, err := s.cfg.Runner.Execute(ctx, req.GetNamespace(), req.GetName(), types.UID(req.GetUid()), p)
	if err != nil {
		return nil, err
	}
	out, err := s.jobToProto(job)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.ExecuteResponse{Outcomes: outcomes, Job: out}, nil
}

// SyncJob has the controller sync a Job now and answers the plan it
// performed.
func (s *ExecutorService) SyncJob(ctx context.Context, req *jobplanev1.SyncJobRequest) (*jobplanev1.SyncJobResponse, error) {
	if err := apierr.Invalid("invalid SyncJob request", jobKey(req.GetNamespace(), req.GetName())); err != nil {
		return nil, err
	}
	if err := s.mustLead(); err != nil {
		return nil, err
	}
	p, outcomes, job, err := s.cfg.Runner.SyncJob(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	out, err := s.jobToProto(job)
	if err != nil {
		return nil, err
	}
	resp := &jobplanev1.SyncJobResponse{Outcomes: outcomes, Job: out}
	if p != nil {
		resp.Plan = plan.ToProto(p)
	}
	return resp, nil
}
