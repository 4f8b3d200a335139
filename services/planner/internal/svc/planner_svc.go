// Package svc is the gRPC face of the planner: it checks and converts
// requests, calls the sync engine, and answers with status errors only.
package svc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// PlannerService implements jobplane.v1.PlannerService.
type PlannerService struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

var _ jobplanev1.PlannerServiceServer = (*PlannerService)(nil)

// NewPlannerService returns the service.
func NewPlannerService() *PlannerService { return &PlannerService{} }

func notYet(rpc string) error {
	return status.Errorf(codes.Unimplemented,
		"%s is not implemented yet: the planner's Job sync engine is still to be built", rpc)
}

// PlanSync is not implemented yet.
func (s *PlannerService) PlanSync(context.Context, *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	return nil, notYet("PlanSync")
}

// StreamPlanSync is not implemented yet.
func (s *PlannerService) StreamPlanSync(jobplanev1.PlannerService_StreamPlanSyncServer) error {
	return notYet("StreamPlanSync")
}

// ValidateJob is not implemented yet.
func (s *PlannerService) ValidateJob(context.Context, *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	return nil, notYet("ValidateJob")
}
