package svc_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

func TestExecutorIsHealthyAndSaysWhatIsNotBuiltYet(t *testing.T) {
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService())
	})
	resp, err := healthpb.NewHealthClient(srv.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "jobplane.v1.ExecutorService"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	_, err = jobplanev1.NewExecutorServiceClient(srv.Conn).SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "informers") {
		t.Errorf("SubmitJob: %v", err)
	}
}
