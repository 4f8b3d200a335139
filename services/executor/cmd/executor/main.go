// Command executor serves jobplane.v1.ExecutorService.
package main

import (
	"context"
	"log/slog"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

func main() {
	grpcserver.Command{
		Name:   "executor",
		Server: grpcserver.Defaults("127.0.0.1:50052", "127.0.0.1:9092"),
		Setup: func(_ context.Context, srv *grpcserver.Server, _ *slog.Logger) error {
			srv.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService())
			return nil
		},
	}.Main()
}
