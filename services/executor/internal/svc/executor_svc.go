// Package svc is the gRPC face of the executor: it checks requests, calls the
// Kubernetes side (informers, sync loop, plan execution) and answers with
// status errors only.
package svc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// ExecutorService implements jobplane.v1.ExecutorService.
type ExecutorService struct {
	jobplanev1.UnimplementedExecutorServiceServer
}

var _ jobplanev1.ExecutorServiceServer = (*ExecutorService)(nil)

// NewExecutorService returns the service.
func NewExecutorService() *ExecutorService { return &ExecutorService{} }

// The executor's Kubernetes side is the executor issue's work; until it lands
// every RPC says so instead of pretending.
func notYet(rpc string) error {
	return status.Errorf(codes.Unimplemented,
		"%s is not implemented yet: the executor's Kubernetes side (informers, workqueue, plan execution) is still to be built", rpc)
}

// SubmitJob is not implemented yet.
func (s *ExecutorService) SubmitJob(context.Context, *jobplanev1.SubmitJobRequest) (*jobplanev1.SubmitJobResponse, error) {
	return nil, notYet("SubmitJob")
}

// Execute is not implemented yet.
func (s *ExecutorService) Execute(context.Context, *jobplanev1.ExecuteRequest) (*jobplanev1.ExecuteResponse, error) {
	return nil, notYet("Execute")
}

// SyncJob is not implemented yet.
func (s *ExecutorService) SyncJob(context.Context, *jobplanev1.SyncJobRequest) (*jobplanev1.SyncJobResponse, error) {
	return nil, notYet("SyncJob")
}

// GetJob is not implemented yet.
func (s *ExecutorService) GetJob(context.Context, *jobplanev1.GetJobRequest) (*jobplanev1.GetJobResponse, error) {
	return nil, notYet("GetJob")
}

// ListJobs is not implemented yet.
func (s *ExecutorService) ListJobs(context.Context, *jobplanev1.ListJobsRequest) (*jobplanev1.ListJobsResponse, error) {
	return nil, notYet("ListJobs")
}

// WatchJobs is not implemented yet.
func (s *ExecutorService) WatchJobs(*jobplanev1.WatchJobsRequest, jobplanev1.ExecutorService_WatchJobsServer) error {
	return notYet("WatchJobs")
}

// DeleteJob is not implemented yet.
func (s *ExecutorService) DeleteJob(context.Context, *jobplanev1.DeleteJobRequest) (*jobplanev1.DeleteJobResponse, error) {
	return nil, notYet("DeleteJob")
}
