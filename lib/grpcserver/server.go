// Package grpcserver builds the gRPC server every jobplane service runs: TLS
// (mutual when a client CA is given) or plaintext on loopback only, one
// interceptor chain (metrics, logging, panic recovery, authentication and
// authorization with the cluster's TokenReview and SubjectAccessReview APIs
// by the table of lib/auth), health per service
// gated by readiness checks, reflection, bounded messages, keepalive
// enforcement, /healthz and /readyz over HTTP (or HTTPS, as gRPC) and
// /metrics behind the same authentication and authorization, long-lived
// work run beside gRPC in the same lifecycle, and a graceful shutdown. A
// service only adds its handlers, its work and its checks.
package grpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
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
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/auth"

	// Registers google.rpc error details (BadRequest, ErrorInfo, ...) so that
	// reflection resolves them and grpcurl prints them.
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Server is a gRPC server with jobplane's chassis around it.
type Server struct {
	cfg     Config
	log     *slog.Logger
	kube    kubernetes.Interface // reviews tokens and authorizes; nil when none is configured
	kubeErr error                // why kube is nil
	authn   *auth.Authenticator
	// reviews paces the TokenReviews and SubjectAccessReviews no cache
	// answers, fairly between hosts and tenants.
	reviews *auth.ReviewBudget
	// admission admits the calls of registered services (not health
	// checks or reflection).
	admission *admission.Controller
	// conns bounds the connections open.
	conns    *connGate
	authz    auth.Authorizer
	auth     *auth.Interceptor
	grpc     *grpc.Server
	health   *health.Server
	metrics  *grpcprom.ServerMetrics
	registry *prometheus.Registry
	panics   prometheus.Counter
	services []string
	work     []work
	checks   []readinessCheck
	served   atomic.Bool
	stopping atomic.Bool

	// metricsTLS serves the metrics port over TLS when gRPC is, with the
	// same certificate and client CA: bearer tokens travel to it too.
	metricsTLS *tls.Config

	readyMu sync.Mutex
	failing []string // the readiness checks that failed their last run
}

type work struct {
	name string
	run  func(ctx context.Context) error
}

type readinessCheck struct {
	name  string
	check func(ctx context.Context) error
}

// Option changes what New builds.
type Option func(*options)

type options struct {
	kube  kubernetes.Interface
	authz auth.Authorizer
}

// WithKubeClient makes client review tokens and authorize calls, instead of
// a client of cfg.Kubeconfig (or of the cluster the server runs in).
func WithKubeClient(client kubernetes.Interface) Option {
	return func(o *options) { o.kube = client }
}

// WithAuthorizer makes a authorize calls instead of SubjectAccessReviews.
func WithAuthorizer(a auth.Authorizer) Option {
	return func(o *options) { o.authz = a }
}

// authClientQPS bounds the TokenReviews and SubjectAccessReviews a server
// sends (auth.ReviewBudget, shared fairly between the callers' hosts and
// tenants): only cache misses reach the API server.
const (
	authClientQPS   = 50
	authClientBurst = 100
)

// New builds a server from a validated configuration.
func New(cfg Config, logger *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
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

	s.kube = o.kube
	if s.kube == nil {
		s.kube, s.kubeErr = authClient(cfg)
	}
	s.reviews = auth.NewReviewBudget(authClientQPS, authClientBurst)
	s.authz = o.authz
	if s.authz == nil && s.kube != nil {
		s.authz = auth.NewSubjectAccessReviewer(cfg.Auth, s.kube, s.reviews, logger)
	}
	s.authn = auth.NewAuthenticator(cfg.Auth, s.kube, s.reviews, logger)
	s.admission = admission.New(cfg.Admission.Config(), s.registry)
	s.conns = newConnGate(cfg, s.registry)
	s.admission.SetConnCloser(func(conn string) bool { return s.conns.closeByID(conn, "unread_answers_reclaimed") })
	s.auth = auth.NewInterceptor(cfg.Auth, s.authn, s.authz, auth.Rules, logger)

	unary, stream := s.interceptors()
	creds := insecure.NewCredentials()
	if cfg.TLS() {
		st, err := newServerTLS(cfg, logger)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(st.config("h2"))
		s.metricsTLS = st.config("http/1.1")
	}
	s.grpc = grpc.NewServer(
		grpc.Creds(creds),
		grpc.ForceServerCodecV2(deterministicCodec{}),
		grpc.StatsHandler(&connTracker{gate: s.conns, ended: s.admission.ConnClosed}),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(cfg.RecvMsgBytes()),
		grpc.MaxSendMsgSize(cfg.MaxSendMsgBytes),
		grpc.InitialWindowSize(int32(cfg.StreamWindowBytes)),
		grpc.InitialConnWindowSize(int32(16*cfg.StreamWindowBytes)),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxStreamsPerConn)),
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

// authClient is the client of the Kubernetes API that reviews tokens and
// authorizes calls, with its own request budget.
func authClient(cfg Config) (kubernetes.Interface, error) {
	restCfg, err := cfg.KubeRESTConfig()
	if err != nil {
		return nil, err
	}
	// The reviews wait for their turn in the server's ReviewBudget instead.
	restCfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	restCfg.Timeout = 10 * time.Second
	restCfg.UserAgent = rest.DefaultKubernetesUserAgent() + " jobplane-auth"
	return kubernetes.NewForConfig(restCfg)
}

// KubeRESTConfig is the configuration of the Kubernetes client the service
// itself uses (-kubeconfig, or the cluster it runs in): a copy of its own
// for the caller to change.
func (s *Server) KubeRESTConfig() (*rest.Config, error) { return s.cfg.KubeRESTConfig() }

// interceptor is one named link of the chain.
type interceptor struct {
	name   string
	unary  grpc.UnaryServerInterceptor
	stream grpc.StreamServerInterceptor
}

// interceptors returns the chain, outermost first: metrics see every call
// including recovered panics and refusals; logging skips health checks;
// mask-internal answers any error that is not a status as INTERNAL with a
// correlation id (the cause logged, never sent); recovery turns a panic, in
// auth or in a handler, into an Internal status the others observe; auth is
// innermost, next to the handler, and leaves health checks and reflection
// to anyone (a kubelet probe has no token, reflection shows only the
// contracts).
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
		s.log.ErrorContext(ctx, "panic in gRPC handler", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error; the server logged the cause")
	})
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return !openServices[c.Service]
	})
	mask := maskInternal{log: s.log}
	chain := []interceptor{
		{"metrics", s.metrics.UnaryServerInterceptor(), s.metrics.StreamServerInterceptor()},
		{"logging",
			selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), notHealth),
			selector.StreamServerInterceptor(logging.StreamServerInterceptor(logger, logOpts...), notHealth)},
		{"mask-internal", mask.unary(), mask.stream()},
		{"recovery", recovery.UnaryServerInterceptor(recoveryOpt), recovery.StreamServerInterceptor(recoveryOpt)},
		// A unary call is counted by admission, which identifies it before
		// the interceptors run.
		{"authenticating", passUnary, selector.StreamServerInterceptor(s.conns.countAuthentication, needsAuth)},
		{"auth",
			selector.UnaryServerInterceptor(s.auth.Unary(), needsAuth),
			selector.StreamServerInterceptor(s.auth.Stream(), needsAuth)},
	}
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor
	for _, i := range chain {
		unary = append(unary, i.unary)
		stream = append(stream, i.stream)
	}
	return unary, stream
}

// passUnary lets a unary call through: a chain entry for streams only.
func passUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(ctx, req)
}

// openServices are the chassis' own services, served to anyone.
var openServices = map[string]bool{
	healthpb.Health_ServiceDesc.ServiceName:                    true,
	reflectionv1.ServerReflection_ServiceDesc.ServiceName:      true,
	reflectionv1alpha.ServerReflection_ServiceDesc.ServiceName: true,
}

// RegisterService adds a service implementation; its health status becomes
// SERVING when the server starts serving and every readiness check passes.
// It panics, as grpc.Server.RegisterService does for a bad registration,
// when an RPC of the service has no entry in the authorization table
// (auth.Rules): every call would be refused.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if missing := MissingRules(desc); len(missing) > 0 {
		panic(fmt.Sprintf("grpcserver: no authorization rule (lib/auth.Rules) for %s", strings.Join(missing, ", ")))
	}
	s.grpc.RegisterService(s.admitted(desc), impl)
	s.services = append(s.services, desc.ServiceName)
}

// MissingRules lists the full method names of desc's RPCs that have no
// entry in auth.Rules.
func MissingRules(desc *grpc.ServiceDesc) []string {
	var missing []string
	check := func(method string) {
		name := "/" + desc.ServiceName + "/" + method
		if _, ok := auth.Rules[name]; !ok {
			missing = append(missing, name)
		}
	}
	for _, m := range desc.Methods {
		check(m.MethodName)
	}
	for _, st := range desc.Streams {
		check(st.StreamName)
	}
	return missing
}

// checkAuthDependencies reports what the registered services need to
// authenticate or authorize their callers and do not have.
func (s *Server) checkAuthDependencies() error {
	if s.kube != nil {
		return nil
	}
	var needSAR []string
	for name, info := range s.grpc.GetServiceInfo() {
		for _, m := range info.Methods {
			if rule, ok := auth.Rules["/"+name+"/"+m.Name]; ok && !rule.AuthenticationOnly() && s.authz == nil {
				needSAR = append(needSAR, name+"/"+m.Name)
			}
		}
	}
	if len(needSAR) > 0 {
		slices.Sort(needSAR)
		return fmt.Errorf("%s need SubjectAccessReviews, but there is no Kubernetes API to ask: %w", strings.Join(needSAR, ", "), s.kubeErr)
	}
	if !s.cfg.Auth.Anonymous && s.cfg.ClientCAFile == "" && !s.cfg.Auth.AllowUnauthenticatedPureRPCs {
		return fmt.Errorf("no caller can authenticate: bearer tokens need the Kubernetes API (%w); configure it, a client CA (-client-ca-file) or, on loopback, -authn-anonymous", s.kubeErr)
	}
	return nil
}

// checkMetricsAuth reports why no caller could be authorized to read
// /metrics. As kube-controller-manager without an authorization kubeconfig,
// the server still serves (health stays open, the service works) and says so.
func (s *Server) checkMetricsAuth() error {
	if s.cfg.Auth.AllowUnauthenticatedMetrics || s.authz != nil {
		return nil
	}
	return fmt.Errorf("/metrics needs SubjectAccessReviews, but there is no Kubernetes API to ask: %w; configure it or, on a loopback metrics address, -allow-unauthenticated-metrics", s.kubeErr)
}

// Go registers long-lived work (informers, workers, leader election) to run
// beside gRPC from the moment Serve starts. Its ctx is cancelled on shutdown,
// after the drain, and the server waits for run to return before it stops
// gRPC. Work that returns while the server serves, with an error or without
// one (work that quietly stops is work lost), shuts the server down and Serve
// returns the error, so the process exits non-zero. Call it before Serve.
func (s *Server) Go(name string, run func(ctx context.Context) error) {
	s.mustNotServeYet("Go")
	s.work = append(s.work, work{name: name, run: run})
}

// AddReadinessCheck gates health: the overall "" service and every registered
// service report NOT_SERVING, and /readyz answers 503, until every check
// passes. Checks run every ReadinessInterval while the server serves, each
// bounded by that interval; one failing flips health back to NOT_SERVING.
// Call it before Serve.
func (s *Server) AddReadinessCheck(name string, check func(ctx context.Context) error) {
	s.mustNotServeYet("AddReadinessCheck")
	s.checks = append(s.checks, readinessCheck{name: name, check: check})
}

// mustNotServeYet panics, as grpc.Server.RegisterService does, because work
// or a check added to a serving server would silently never run.
func (s *Server) mustNotServeYet(method string) {
	if s.served.Load() {
		panic("grpcserver: " + method + " after Serve")
	}
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
// metricsLis, and runs the long-lived work, until ctx is done or something
// fails; then it shuts down (see shutdown) and returns what failed, if
// anything.
func (s *Server) Serve(ctx context.Context, lis, metricsLis net.Listener) error {
	if !s.served.CompareAndSwap(false, true) {
		return errors.New("grpcserver: Serve called twice")
	}
	defer s.reviews.Stop()
	if err := s.checkAuthDependencies(); err != nil {
		lis.Close()
		if metricsLis != nil {
			metricsLis.Close()
		}
		return err
	}
	if metricsLis != nil {
		if err := s.checkMetricsAuth(); err != nil {
			s.log.Warn("metrics are served to no one", "err", err)
		}
		if s.metricsTLS != nil {
			metricsLis = tls.NewListener(metricsLis, s.metricsTLS)
		}
	}
	s.metrics.InitializeMetrics(s.grpc)
	// Until the checks have run, every one of them counts as failing.
	s.setReadiness(checkNames(s.checks))
	readyCtx, stopReadiness := context.WithCancel(ctx)
	defer stopReadiness()
	go s.watchReadiness(readyCtx)

	// The work outlives ctx: it is cancelled after the drain, by shutdown.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	workFailed := make(chan error, len(s.work))
	var workers errgroup.Group
	for _, w := range s.work {
		workers.Go(func() error { return s.runWork(ctx, workCtx, w, workFailed) })
	}
	workDone := make(chan error, 1)
	go func() { workDone <- workers.Wait() }()

	errc := make(chan error, 2)
	go func() { errc <- s.grpc.Serve(s.conns.listener(lis)) }()
	var httpSrv *http.Server
	if metricsLis != nil {
		httpSrv = &http.Server{Handler: s.httpHandler(), ConnState: newHTTPConns(s.cfg.MaxMetricsConns).track,
			ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		go func() {
			if err := httpSrv.Serve(metricsLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics server: %w", err)
			}
		}()
		s.log.Info("serving", "grpc", lis.Addr().String(), "transport", s.transport(), "metrics", metricsLis.Addr().String(), "services", s.services)
	} else {
		s.log.Info("serving", "grpc", lis.Addr().String(), "transport", s.transport(), "services", s.services)
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		s.log.Error("serving failed; shutting down", "err", serveErr)
	case serveErr = <-workFailed: // runWork logged it
	}
	stopReadiness()
	shutdownErr := s.shutdown(stopWork, workDone)
	if httpSrv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(shutdownCtx)
	}
	return errors.Join(serveErr, shutdownErr)
}

// transport names what gRPC is served over, for the log.
func (s *Server) transport() string {
	switch {
	case s.cfg.ClientCAFile != "":
		return "TLS with client certificates"
	case s.cfg.TLS():
		return "TLS"
	}
	return "plaintext"
}

// runWork runs w until it returns. Returning before shutdown began is a
// failure, reported on failed so that Serve shuts down; an error other than
// cancellation while stopping is returned, so that Serve still reports it.
func (s *Server) runWork(ctx, workCtx context.Context, w work, failed chan<- error) error {
	err := w.run(workCtx)
	// ctx done means SIGTERM arrived even if shutdown has not marked it yet.
	if ctx.Err() == nil && !s.stopping.Load() {
		if err == nil {
			err = fmt.Errorf("%s stopped", w.name)
		} else {
			err = fmt.Errorf("%s: %w", w.name, err)
		}
		s.log.Error("long-lived work failed; shutting down", "work", w.name, "err", err)
		failed <- err
		return nil
	}
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	err = fmt.Errorf("%s while stopping: %w", w.name, err)
	s.log.Error("long-lived work failed while stopping", "work", w.name, "err", err)
	return err
}

// shutdown stops in the order that loses nothing: NOT_SERVING, so that load
// balancers move away during the drain; then the long-lived work stops taking
// work and finishes what it holds; then gRPC stops gracefully, hard past the
// shutdown timeout. It returns the work's errors while stopping, or that the
// work outlived the shutdown timeout.
func (s *Server) shutdown(stopWork context.CancelFunc, workDone <-chan error) error {
	s.stopping.Store(true)
	s.log.Info("shutting down", "drain", s.cfg.ShutdownDrain.String())
	s.health.Shutdown()
	time.Sleep(s.cfg.ShutdownDrain)

	stopWork()
	var workErr error
	select {
	case workErr = <-workDone:
	case <-time.After(s.cfg.ShutdownTimeout):
		workErr = fmt.Errorf("long-lived work still running after the shutdown timeout of %s", s.cfg.ShutdownTimeout)
		s.log.Warn("long-lived work still running after the shutdown timeout; stopping gRPC anyway")
	}

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
	return workErr
}

// watchReadiness runs the checks now and then every ReadinessInterval until
// ctx is done; it sets health and logs only when the failing set changes.
func (s *Server) watchReadiness(ctx context.Context) {
	if len(s.checks) == 0 {
		return
	}
	tick := time.NewTicker(s.cfg.ReadinessInterval)
	defer tick.Stop()
	var last []string
	for first := true; ; first = false {
		var failing []string
		var errs []error
		for _, c := range s.checks {
			checkCtx, cancel := context.WithTimeout(ctx, s.cfg.ReadinessInterval)
			err := c.check(checkCtx)
			cancel()
			if err != nil {
				failing = append(failing, c.name)
				errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
			}
		}
		if ctx.Err() != nil {
			return // checks cut short by shutdown say nothing of readiness
		}
		if first || !slices.Equal(failing, last) {
			s.setReadiness(failing)
			if len(failing) > 0 {
				s.log.Warn("not ready", "failing", failing, "err", errors.Join(errs...))
			} else {
				s.log.Info("ready")
			}
		}
		last = failing
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// setReadiness records the failing checks for /readyz and sets health:
// SERVING only when none fails. After health.Shutdown the health server
// ignores it, so shutdown wins over readiness.
func (s *Server) setReadiness(failing []string) {
	s.readyMu.Lock()
	s.failing = failing
	s.readyMu.Unlock()
	status := healthpb.HealthCheckResponse_SERVING
	if len(failing) > 0 {
		status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	s.health.SetServingStatus("", status)
	for _, name := range s.services {
		s.health.SetServingStatus(name, status)
	}
}

func (s *Server) failingChecks() []string {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	return s.failing
}

func checkNames(checks []readinessCheck) []string {
	var names []string
	for _, c := range checks {
		names = append(names, c.name)
	}
	return names
}

// httpHandler serves the metrics port: /healthz and /readyz to anyone (a
// kubelet's probe has no credentials), as kube-controller-manager does;
// everything else (/metrics, /debug/pprof/ with -profiling, and any path
// added later) only to callers allowed get on its non-resource URL, unless
// metrics are open on loopback.
func (s *Server) httpHandler() http.Handler {
	guarded := http.NewServeMux()
	guarded.Handle("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	if s.cfg.Profiling {
		guarded.HandleFunc("/debug/pprof/", pprof.Index)
		guarded.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		guarded.HandleFunc("/debug/pprof/profile", pprof.Profile)
		guarded.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		guarded.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux := http.NewServeMux()
	// Scrapes (and the token reviews of their callers) are bounded as
	// gRPC calls are; the probes below are not, and cost nothing.
	if s.cfg.Auth.AllowUnauthenticatedMetrics {
		mux.Handle("/", limitInFlight(maxScrapes, maxScrapesPerHost, guarded))
	} else {
		mux.Handle("/", limitInFlight(maxScrapes, maxScrapesPerHost, auth.NonResourceHandler(s.authn, s.authz, s.log, guarded)))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if s.stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if failing := s.failingChecks(); len(failing) > 0 {
			http.Error(w, "not ready: "+strings.Join(failing, ", "), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// maxScrapes is how many requests to the metrics port (but its probes) are
// served at once, maxScrapesPerHost from one host: Prometheus scrapes a
// target one at a time, and a host sending requests that wait (their
// callers' reviews) leaves the others' seats free.
const (
	maxScrapes        = 4
	maxScrapesPerHost = 2
)

// limitInFlight serves at most n requests of h at once, perHost from one
// host, and answers the others 429 Too Many Requests with Retry-After, at
// once.
func limitInFlight(n, perHost int, h http.Handler) http.Handler {
	var mu sync.Mutex
	inFlight, byHost := 0, map[string]int{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := auth.HostOfRequest(r)
		mu.Lock()
		seated := inFlight < n && byHost[host] < perHost
		if seated {
			inFlight++
			byHost[host]++
		}
		mu.Unlock()
		if !seated {
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("%d requests in flight, or %d from this host, the most allowed; retry later", n, perHost), http.StatusTooManyRequests)
			return
		}
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			inFlight--
			if byHost[host]--; byHost[host] == 0 {
				delete(byHost, host)
			}
		}()
		h.ServeHTTP(w, r)
	})
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
