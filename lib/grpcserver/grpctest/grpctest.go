// Package grpctest serves a jobplane gRPC server in process for tests and
// benchmarks: the same chassis as production, over bufconn or loopback TCP.
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
// registered the services, over bufconn; it stops when the test ends.
func Start(t testing.TB, register func(*grpcserver.Server)) *Server {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	return start(t, register, lis, "passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
}

// StartTCP is Start over a real loopback TCP connection, for benchmarks that
// must pay what a network client pays.
func StartTCP(t testing.TB, register func(*grpcserver.Server)) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for gRPC: %v", err)
	}
	return start(t, register, lis, lis.Addr().String())
}

func start(t testing.TB, register func(*grpcserver.Server), lis net.Listener, target string, dialOpts ...grpc.DialOption) *Server {
	t.Helper()
	cfg := grpcserver.Defaults("127.0.0.1:0", "127.0.0.1:0")
	cfg.ShutdownDrain = 0
	srv, err := grpcserver.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("building server: %v", err)
	}
	register(srv)

	metricsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for metrics: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, metricsLis) }()

	conn, err := grpc.NewClient(target, append(dialOpts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxSendMsgBytes), grpc.MaxCallSendMsgSize(cfg.MaxRecvMsgBytes)),
	)...)
	if err != nil {
		t.Fatalf("dialing %s: %v", target, err)
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
