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

	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
)

// Server is a running in-process server.
type Server struct {
	*grpcserver.Server
	// Conn is a client connection to it.
	Conn *grpc.ClientConn
	// MetricsURL is the base URL of its /metrics and /healthz endpoints:
	// https:// when it serves TLS.
	MetricsURL string
	// Addr is the address to dial: "host:port" over TCP, a passthrough
	// target over bufconn.
	Addr string
}

// Options say how StartWith starts a server.
type Options struct {
	// Config replaces the default configuration (loopback, no drain,
	// every caller anonymous and allowed everything).
	Config *grpcserver.Config
	// Server are the options of grpcserver.New; with Config nil, the
	// default's authorizer allows everything.
	Server []grpcserver.Option
	// Dial are the options of Conn; it is plaintext unless one of them sets
	// transport credentials.
	Dial []grpc.DialOption
}

// Start serves a server with default configuration on which register has
// registered the services, over bufconn; it stops when the test ends. It
// tests handlers, not who may call them: every caller is anonymous and
// allowed everything.
func Start(t testing.TB, register func(*grpcserver.Server)) *Server {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	return start(t, Options{}, register, lis, "passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
}

// StartTCP is Start over a real loopback TCP connection, for benchmarks that
// must pay what a network client pays.
func StartTCP(t testing.TB, register func(*grpcserver.Server)) *Server {
	t.Helper()
	return StartWith(t, Options{}, register)
}

// StartWith is StartTCP with opts.
func StartWith(t testing.TB, opts Options, register func(*grpcserver.Server)) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for gRPC: %v", err)
	}
	return start(t, opts, register, lis, lis.Addr().String())
}

// allowAll allows every call, for servers testing their handlers.
type allowAll struct{}

func (allowAll) Authorize(context.Context, *auth.Identity, auth.Attributes) (auth.Decision, error) {
	return auth.Decision{Allowed: true}, nil
}

func start(t testing.TB, opts Options, register func(*grpcserver.Server), lis net.Listener, target string, dialOpts ...grpc.DialOption) *Server {
	t.Helper()
	cfg := grpcserver.Defaults("127.0.0.1:0", "127.0.0.1:0")
	cfg.ShutdownDrain = 0
	cfg.Auth.Anonymous = true
	serverOpts := append([]grpcserver.Option{grpcserver.WithAuthorizer(allowAll{})}, opts.Server...)
	if opts.Config != nil {
		cfg = *opts.Config
		serverOpts = opts.Server
	}
	srv, err := grpcserver.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)), serverOpts...)
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

	dialOpts = append(dialOpts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cfg.MaxSendMsgBytes), grpc.MaxCallSendMsgSize(64<<20)))
	// Later options win: the caller's transport credentials replace plaintext.
	conn, err := grpc.NewClient(target, append(dialOpts, opts.Dial...)...)
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
	scheme := "http://"
	if cfg.TLS() {
		scheme = "https://"
	}
	return &Server{Server: srv, Conn: conn, MetricsURL: scheme + metricsLis.Addr().String(), Addr: target}
}
