// Command planner serves jobplane.v1.PlannerService.
package main

import (
	"context"
	"log/slog"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/services/planner/internal/svc"
)

func main() {
	grpcserver.Command{
		Name:   "planner",
		Server: grpcserver.Defaults("127.0.0.1:50051", "127.0.0.1:9091"),
		Setup: func(_ context.Context, srv *grpcserver.Server, _ *slog.Logger) error {
			srv.RegisterService(&jobplanev1.PlannerService_ServiceDesc, svc.NewPlannerService())
			return nil
		},
	}.Main()
}
