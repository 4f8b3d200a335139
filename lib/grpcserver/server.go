// Package grpcserver builds the gRPC server every jobplane service runs: one
// interceptor chain (metrics, logging, panic recovery), health per service,
// reflection, bounded messages, keepalive enforcement, /metrics and /healthz
// over HTTP, and a graceful shutdown. A service only adds its handlers.
package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	// Registers google.rpc error details (BadRequest, ErrorInfo, ...) so that
	// reflection resolves them and grpcurl prints them.
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Server is a gRPC server with jobplane's chassis around it.
type Server struct {
	cfg      Config
	log      *slog.Logger
	grpc     *grpc.Server
	health   *health.Server
	metrics  *grpcprom.ServerMetrics
	registry *prometheus.Registry
	panics   prometheus.Counter
	services []string
	stopping atomic.Bool
}

// New builds a server from a validated configuration.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      logger,
		health:   health.NewServer(),
		registry: prometheus.NewRegistry(),
		metrics: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}),
		)),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grpc_req_panics_recovered_total",
			Help: "Panics in gRPC handlers, recovered and answered with Internal.",
		}),
	}
	s.registry.MustRegister(s.metrics, s.panics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	unary, stream := s.interceptors()
	s.grpc = grpc.NewServer(
		grpc.ForceServerCodecV2(deterministicCodec{}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgBytes),
		grpc.MaxSendMsgSize(cfg.MaxSendMsgBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             cfg.KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    cfg.KeepaliveTime,
			Timeout: cfg.KeepaliveTimeout,
		}),
	)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return s, nil
}

// interceptors returns the chain, outermost first: metrics see every call
// including recovered panics; logging skips health checks; recovery is
// innermost so a panic becomes an Internal status the others observe.
func (s *Server) interceptors() ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		s.log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	notHealth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName
	})
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		s.panics.Inc()
		s.log.ErrorContext(ctx, "panic in gRPC handler", "panic", fmt.Sprint(p))
		return status.Error(codes.Internal, "internal error; the server logged the cause")
	})
	unary := []grpc.UnaryServerInterceptor{
		s.metrics.UnaryServerInterceptor(),
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), notHealth),
		recovery.UnaryServerInterceptor(recoveryOpt),
	}
	stream := []grpc.StreamServerInterceptor{
		s.metrics.StreamServerInterceptor(),
		selector.StreamServerInterceptor(logging.StreamServerInterceptor(logger, logOpts...), notHealth),
		recovery.StreamServerInterceptor(recoveryOpt),
	}
	return unary, stream
}

// RegisterService adds a service implementation; its health status becomes
// SERVING when the server starts serving.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.grpc.RegisterService(desc, impl)
	s.services = append(s.services, desc.ServiceName)
}

// Registry is where a service registers its own Prometheus metrics.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Run listens on the configured addresses and serves until ctx is done, then
// shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening for gRPC: %w", err)
	}
	var metricsLis net.Listener
	if s.cfg.MetricsAddr != "" {
		if metricsLis, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			lis.Close()
			return fmt.Errorf("listening for metrics: %w", err)
		}
	}
	return s.Serve(ctx, lis, metricsLis)
}

// Serve serves gRPC on lis and, when metricsLis is not nil, HTTP on
// metricsLis, until ctx is done; then it shuts down: NOT_SERVING, a drain
// period, GracefulStop, and a hard Stop past the shutdown timeout.
func (s *Server) Serve(ctx context.Context, lis, metricsLis net.Listener) error {
	s.metrics.InitializeMetrics(s.grpc)
	for _, name := range s.services {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)

	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(lis) }()
	var httpSrv *http.Server
	if metricsLis != nil {
		httpSrv = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := httpSrv.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
		s.log.Info("serving", "grpc", lis.Addr().String(), "metrics", metricsLis.Addr().String(), "services", s.services)
	} else {
		s.log.Info("serving", "grpc", lis.Addr().String(), "services", s.services)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	s.shutdown()
	if httpSrv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(shutdownCtx)
	}
	return serveErr
}

func (s *Server) shutdown() {
	if !s.stopping.CompareAndSwap(false, true) {
		return
	}
	s.log.Info("shutting down", "drain", s.cfg.ShutdownDrain.String())
	s.health.Shutdown()
	time.Sleep(s.cfg.ShutdownDrain)

	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		s.log.Info("stopped gracefully")
	case <-time.After(s.cfg.ShutdownTimeout):
		s.log.Warn("calls still in flight after the shutdown timeout; stopping hard")
		s.grpc.Stop()
	}
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if s.stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// NewLogger returns the JSON logger of a service, writing to stderr.
func NewLogger(level string, service string) (*slog.Logger, error) {
	l, err := ParseLogLevel(level)
	if err != nil {
		return nil, err
	}
	h := slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})
	return slog.New(h).With("service", service), nil
}
