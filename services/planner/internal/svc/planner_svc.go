// Package svc is the gRPC face of the planner: it checks and converts
// requests, calls the sync engine, and answers with status errors only.
package svc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/validation"
)

// PlannerService implements jobplane.v1.PlannerService.
type PlannerService struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

var _ jobplanev1.PlannerServiceServer = (*PlannerService)(nil)

// NewPlannerService returns the service.
func NewPlannerService() *PlannerService { return &PlannerService{} }

// PlanSync plans one sync of a Job.
func (s *PlannerService) PlanSync(_ context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	return planSync(req)
}

func planSync(req *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	if err := validation.Snapshot(req).Err("invalid PlanSync snapshot"); err != nil {
		return nil, err
	}
	snap, release, err := snapshotFromRequest(req)
	if err != nil {
		return nil, apierr.InvalidArgument("invalid PlanSync snapshot", apierr.Violation{Field: "job.spec.template.spec", Description: err.Error()})
	}
	defer release()
	return &jobplanev1.PlanSyncResponse{Plan: plan.ToProto(engine.Sync(snap))}, nil
}

// StreamPlanSync answers each snapshot of the stream with its plan, in
// order; a bad snapshot fails its own answer, not the stream.
func (s *PlannerService) StreamPlanSync(stream jobplanev1.PlannerService_StreamPlanSyncServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &jobplanev1.StreamPlanSyncResponse{Id: req.GetId()}
		if plan, err := planSync(req.GetRequest()); err != nil {
			resp.Error = status.Convert(err).Proto()
		} else {
			resp.Response = plan
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// ValidateJob checks a Job as the API server would and returns it defaulted.
func (s *PlannerService) ValidateJob(_ context.Context, req *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	job, err := jobvalidation.Check(req.GetJob(), "job")
	if err != nil {
		return nil, err
	}
	defaulted, err := kubeconv.JobFromKube(job)
	if err != nil {
		return nil, apierr.InvalidArgument("invalid Job", apierr.Violation{Field: "job.spec.template.spec", Description: err.Error()})
	}
	return &jobplanev1.ValidateJobResponse{Job: defaulted}, nil
}
