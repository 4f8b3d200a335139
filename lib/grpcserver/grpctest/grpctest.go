// Package grpctest serves a jobplane gRPC server in process, over bufconn, for
// tests: the same chassis as production, without a port.
package grpctest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/jobplane/jobplane/lib/grpcserver"
)

// Server is a running in-process server.
type Server struct {
	*grpcserver.Server
	// Conn is a client connection to it.
	Conn *grpc.ClientConn
	// MetricsURL is the base URL of its /metrics and /healthz endpoints.
	MetricsURL string
}

// Start serves a server with default configuration on which register has
// registered the services; it stops when the test ends.
func Start(t testing.TB, register func(*grpcserver.Server)) *Server {
	t.Helper()
	cfg := grpcserver.Defaults("127.0.0.1:0", "127.0.0.1:0")
	cfg.ShutdownDrain = 0
	srv, err := grpcserver.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("building server: %v", err)
	}
	register(srv)

	lis := bufconn.Listen(1 << 20)
	metricsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for metrics: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, metricsLis) }()

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxSendMsgBytes), grpc.MaxCallSendMsgSize(cfg.MaxRecvMsgBytes)),
	)
	if err != nil {
		t.Fatalf("dialing bufconn: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server stopped with: %v", err)
		}
	})
	return &Server{Server: srv, Conn: conn, MetricsURL: "http://" + metricsLis.Addr().String()}
}
