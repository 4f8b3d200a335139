// Command cron serves jobplane.v1.CronService.
package main

import (
	"context"
	"log/slog"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

func main() {
	grpcserver.Command{
		Name:   "cron",
		Server: grpcserver.Defaults("127.0.0.1:50053", "127.0.0.1:9093"),
		Setup: func(_ context.Context, srv *grpcserver.Server, _ *slog.Logger) error {
			srv.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{}))
			return nil
		},
	}.Main()
}
