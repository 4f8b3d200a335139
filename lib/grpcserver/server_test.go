package grpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// panickyPlanner panics in PlanSync and StreamPlanSync and answers
// ValidateJob, so a test can see the server survive a panic.
type panickyPlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

func (panickyPlanner) PlanSync(context.Context, *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	panic("boom")
}

func (panickyPlanner) StreamPlanSync(grpc.BidiStreamingServer[jobplanev1.StreamPlanSyncRequest, jobplanev1.StreamPlanSyncResponse]) error {
	panic("boom")
}

func (panickyPlanner) ValidateJob(_ context.Context, req *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	return &jobplanev1.ValidateJobResponse{Job: req.GetJob()}, nil
}

type emptyCron struct {
	jobplanev1.UnimplementedCronServiceServer
}

func startTwoServices(t *testing.T) *grpctest.Server {
	return grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, panickyPlanner{})
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, emptyCron{})
	})
}

func TestHealthIsServingPerService(t *testing.T) {
	srv := startTwoServices(t)
	health := healthpb.NewHealthClient(srv.Conn)
	for _, name := range []string{"", "jobplane.v1.PlannerService", "jobplane.v1.CronService"} {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatalf("Check(%q): %v", name, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, want SERVING", name, resp.GetStatus())
		}
	}
	_, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "jobplane.v1.ExecutorService"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unregistered service: %v, want NotFound", err)
	}
}

func TestReflectionListsEveryServiceInBothVersions(t *testing.T) {
	srv := startTwoServices(t)
	want := []string{
		"grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection",
		"grpc.reflection.v1alpha.ServerReflection",
		"jobplane.v1.CronService",
		"jobplane.v1.PlannerService",
	}

	stream, err := reflectionv1.NewServerReflectionClient(srv.Conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("v1 services = %v, want %v", got, want)
	}

	alpha, err := reflectionv1alpha.NewServerReflectionClient(srv.Conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 v1alpha is deprecated, but grpcurl and older clients still ask it: the server must answer.
	if err := alpha.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	alphaResp, err := alpha.Recv()
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 as above.
	if n := len(alphaResp.GetListServicesResponse().GetService()); n != len(want) {
		t.Errorf("v1alpha lists %d services, want %d", n, len(want))
	}
}

// grpcurl resolves the type URL of each error detail through reflection
// before printing it.
func TestReflectionResolvesErrorDetailTypes(t *testing.T) {
	srv := startTwoServices(t)
	stream, err := reflectionv1.NewServerReflectionClient(srv.Conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, symbol := range []string{"google.rpc.BadRequest", "google.rpc.ErrorInfo", "jobplane.v1.SyncPlan"} {
		if err := stream.Send(&reflectionv1.ServerReflectionRequest{
			MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol},
		}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Errorf("symbol %s not resolvable: %s", symbol, e.GetErrorMessage())
		}
		if len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Errorf("symbol %s: no file descriptor", symbol)
		}
	}
}

func TestPanicBecomesInternalAndServerKeepsServing(t *testing.T) {
	srv := startTwoServices(t)
	planner := jobplanev1.NewPlannerServiceClient(srv.Conn)

	_, err := planner.PlanSync(context.Background(), &jobplanev1.PlanSyncRequest{})
	if status.Code(err) != codes.Internal {
		t.Fatalf("PlanSync after a panic: %v, want Internal", err)
	}
	if strings.Contains(err.Error(), "boom") {
		t.Errorf("the panic value leaked to the client: %v", err)
	}
	if _, err := planner.ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{}); err != nil {
		t.Fatalf("server stopped serving after a panic: %v", err)
	}
	metrics := get(t, srv.MetricsURL+"/metrics")
	if !strings.Contains(metrics, "grpc_req_panics_recovered_total 1") {
		t.Errorf("panic not counted; metrics:\n%s", grep(metrics, "panics"))
	}
}

func TestMetricsAndHealthzAreExposed(t *testing.T) {
	srv := startTwoServices(t)
	cron := jobplanev1.NewCronServiceClient(srv.Conn)
	_, _ = cron.GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{})

	metrics := get(t, srv.MetricsURL+"/metrics")
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="Unimplemented",grpc_method="GetCronJob",grpc_service="jobplane.v1.CronService",grpc_type="unary"} 1`,
		`grpc_server_handling_seconds_bucket{grpc_method="GetCronJob"`,
		`grpc_server_started_total{grpc_method="PlanSync",grpc_service="jobplane.v1.PlannerService",grpc_type="unary"} 0`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if body := get(t, srv.MetricsURL+"/healthz"); body != "ok\n" {
		t.Errorf("/healthz = %q", body)
	}
}

func TestMessagesLargerThanTheBoundAreRefused(t *testing.T) {
	cfg := fastShutdown()
	cfg.MaxRecvMsgBytes = 1024
	srv := serve(t, cfg, nil)
	job := &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: strings.Repeat("x", 2048)}}
	_, err := jobplanev1.NewPlannerServiceClient(srv.conn).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{Job: job})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
}

func TestPanicIsLoggedWithItsStack(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(jobplanev1.PlannerServiceClient) error
	}{
		{"unary", func(c jobplanev1.PlannerServiceClient) error {
			_, err := c.PlanSync(context.Background(), &jobplanev1.PlanSyncRequest{})
			return err
		}},
		{"stream", func(c jobplanev1.PlannerServiceClient) error {
			stream, err := c.StreamPlanSync(context.Background())
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, fastShutdown(), nil)
			if err := tc.call(jobplanev1.NewPlannerServiceClient(srv.conn)); status.Code(err) != codes.Internal {
				t.Fatalf("call after a panic: %v, want Internal", err)
			}
			logs := srv.logs.String()
			if !strings.Contains(logs, "panic in gRPC handler") || !strings.Contains(logs, "goroutine ") {
				t.Errorf("panic logged without its stack:\n%s", logs)
			}
		})
	}
}

func TestShutdownReportsNotServingThenStops(t *testing.T) {
	cfg := fastShutdown()
	cfg.ShutdownDrain = 500 * time.Millisecond
	srv := serve(t, cfg, nil)

	srv.cancel()
	eventually(t, cfg.ShutdownDrain, "health reports NOT_SERVING during the drain", func() bool {
		return healthOf(srv.conn, "jobplane.v1.PlannerService") == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if err := srv.wait(t, cfg.ShutdownDrain+cfg.ShutdownTimeout); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
}

func TestWorkThatStopsWhileServingStopsTheServer(t *testing.T) {
	errWatch := errors.New("watch of Jobs closed")
	for _, tc := range []struct {
		name    string
		returns error
		want    string
	}{
		{"with an error", errWatch, "informer: watch of Jobs closed"},
		// Work that returns quietly is work no longer done: as bad as an error.
		{"without an error", nil, "informer stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var otherCancelled atomic.Bool
			srv := serve(t, fastShutdown(), func(s *grpcserver.Server) {
				s.Go("informer", func(context.Context) error { return tc.returns })
				s.Go("worker", func(ctx context.Context) error {
					<-ctx.Done()
					otherCancelled.Store(true)
					return ctx.Err()
				})
			})
			err := srv.wait(t, 5*time.Second)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Serve returned %v, want %q", err, tc.want)
			}
			if tc.returns != nil && !errors.Is(err, tc.returns) {
				t.Errorf("Serve's error %v does not wrap the work's", err)
			}
			if !otherCancelled.Load() {
				t.Error("Serve returned before the other work was cancelled and returned")
			}
			if !strings.Contains(srv.logs.String(), tc.want) {
				t.Errorf("the failure was not logged:\n%s", srv.logs)
			}
		})
	}
}

// On SIGTERM the work stops after the drain, while gRPC still answers, and
// the server waits for it before stopping gRPC.
func TestShutdownCancelsWorkAfterTheDrainAndWaitsForIt(t *testing.T) {
	cfg := fastShutdown()
	cfg.ShutdownDrain = 100 * time.Millisecond
	type atCancel struct {
		health      healthpb.HealthCheckResponse_ServingStatus
		callErr     error
		sinceCancel time.Duration
	}
	started, observed, release := make(chan struct{}), make(chan atCancel, 1), make(chan struct{})
	var conn *grpc.ClientConn
	var cancelledAt time.Time
	srv := serve(t, cfg, func(s *grpcserver.Server) {
		s.Go("worker", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			_, err := jobplanev1.NewPlannerServiceClient(conn).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{})
			observed <- atCancel{healthOf(conn, ""), err, time.Since(cancelledAt)}
			<-release // finishing what it holds
			return ctx.Err()
		})
	})
	conn = srv.conn
	<-started
	cancelledAt = time.Now()
	srv.cancel()

	var got atCancel
	select {
	case got = <-observed:
	case <-time.After(5 * time.Second):
		t.Fatal("the work's ctx was not cancelled on shutdown")
	}
	if got.health != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health when the work stopped = %v, want NOT_SERVING", got.health)
	}
	if got.sinceCancel < cfg.ShutdownDrain {
		t.Errorf("work cancelled %s after SIGTERM, before the drain of %s ended", got.sinceCancel, cfg.ShutdownDrain)
	}
	if got.callErr != nil {
		t.Errorf("gRPC stopped before the work: %v", got.callErr)
	}
	select {
	case <-srv.done:
		t.Fatal("Serve returned while the work was still stopping")
	default:
	}
	close(release)
	if err := srv.wait(t, 5*time.Second); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
}

func TestShutdownStopsWaitingForWorkAfterTheTimeout(t *testing.T) {
	cfg := fastShutdown()
	cfg.ShutdownTimeout = 100 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := serve(t, cfg, func(s *grpcserver.Server) {
		s.Go("stuck", func(context.Context) error { <-release; return nil })
	})
	srv.cancel()
	err := srv.wait(t, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "still running after the shutdown timeout") {
		t.Fatalf("Serve returned %v, want the work outliving the shutdown timeout", err)
	}
}

func TestReadinessGatesHealth(t *testing.T) {
	cfg := fastShutdown()
	cfg.ReadinessInterval = 10 * time.Millisecond
	var synced atomic.Bool
	var runs atomic.Int64
	srv := serve(t, cfg, func(s *grpcserver.Server) {
		s.AddReadinessCheck("always", func(context.Context) error { return nil })
		s.AddReadinessCheck("informers-synced", func(context.Context) error {
			runs.Add(1)
			if !synced.Load() {
				return errors.New("Jobs not synced")
			}
			return nil
		})
	})
	services := []string{"", "jobplane.v1.PlannerService"}
	healthIs := func(want healthpb.HealthCheckResponse_ServingStatus) func() bool {
		return func() bool {
			for _, name := range services {
				if healthOf(srv.conn, name) != want {
					return false
				}
			}
			return true
		}
	}
	readyz := func() (int, string) {
		resp, err := http.Get(srv.metricsURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitForRuns := func(n int64) {
		from := runs.Load()
		eventually(t, 5*time.Second, "the checks re-run", func() bool { return runs.Load() >= from+n })
	}

	waitForRuns(3)
	if !healthIs(healthpb.HealthCheckResponse_NOT_SERVING)() {
		t.Fatal("health is not NOT_SERVING while a check fails")
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "informers-synced") || strings.Contains(body, "always") {
		t.Errorf("/readyz while a check fails = %d %q, want 503 naming only the failing check", code, body)
	}
	if body := get(t, srv.metricsURL+"/healthz"); body != "ok\n" {
		t.Errorf("/healthz (liveness) while not ready = %q, want ok", body)
	}

	synced.Store(true)
	eventually(t, 5*time.Second, "health SERVING once every check passes", healthIs(healthpb.HealthCheckResponse_SERVING))
	if code, body := readyz(); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz when ready = %d %q", code, body)
	}

	synced.Store(false)
	eventually(t, 5*time.Second, "health back to NOT_SERVING when a check fails", healthIs(healthpb.HealthCheckResponse_NOT_SERVING))
	waitForRuns(3)
	logs := srv.logs.String()
	// Not ready at start, ready, not ready again: each logged once, however
	// many times the checks ran.
	if n := strings.Count(logs, `"msg":"not ready"`); n != 2 {
		t.Errorf("logged not ready %d times, want 2 (one per transition):\n%s", n, logs)
	}
	if n := strings.Count(logs, `"msg":"ready"`); n != 1 {
		t.Errorf("logged ready %d times, want 1:\n%s", n, logs)
	}
}

// fastShutdown is the default configuration with no drain, for tests that
// stop servers, and anonymous callers (the planner needs authentication
// only).
func fastShutdown() grpcserver.Config {
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 0
	cfg.Auth.Anonymous = true
	return cfg
}

// testServer is a server started by serve.
type testServer struct {
	conn       *grpc.ClientConn
	metricsURL string
	logs       *syncBuffer
	cancel     context.CancelFunc // starts the shutdown, as SIGTERM does
	done       chan struct{}      // closed when Serve has returned err
	err        error
}

// wait returns what Serve returned, failing the test if that takes longer
// than within.
func (s *testServer) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-s.done:
		return s.err
	case <-time.After(within):
		t.Fatalf("Serve did not return within %s", within)
		return nil
	}
}

// serve starts a server with cfg over bufconn, with the panicky planner and
// what setup adds, its metrics on loopback and its logs kept; it stops when
// the test ends.
func serve(t *testing.T, cfg grpcserver.Config, setup func(*grpcserver.Server)) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	srv, err := grpcserver.New(cfg, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(&jobplanev1.PlannerService_ServiceDesc, panickyPlanner{})
	if setup != nil {
		setup(srv)
	}
	lis := bufconn.Listen(1 << 20)
	metricsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{metricsURL: "http://" + metricsLis.Addr().String(), logs: logs, cancel: cancel, done: make(chan struct{})}
	go func() {
		ts.err = srv.Serve(ctx, lis, metricsLis)
		close(ts.done)
	}()
	ts.conn, err = grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ts.conn.Close()
		cancel()
		<-ts.done
	})
	return ts
}

// healthOf is the status health reports for service, or UNKNOWN when the
// check fails.
func healthOf(conn *grpc.ClientConn, service string) healthpb.HealthCheckResponse_ServingStatus {
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

// eventually polls cond until it holds, failing the test past within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer the server's goroutines can log to while a
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func get(t *testing.T, url string) string {
	t.Helper()
	_, body := scrape(t, http.DefaultClient, url, "")
	return body
}

func grep(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
