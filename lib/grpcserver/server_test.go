package grpcserver_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
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

// panickyPlanner panics in PlanSync and answers ValidateJob, so a test can see
// the server survive a panic.
type panickyPlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

func (panickyPlanner) PlanSync(context.Context, *jobplanev1.PlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
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
	if err := alpha.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	alphaResp, err := alpha.Recv()
	if err != nil {
		t.Fatal(err)
	}
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
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.MaxRecvMsgBytes = 1024
	conn, _ := serve(t, cfg)
	job := &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: strings.Repeat("x", 2048)}}
	_, err := jobplanev1.NewPlannerServiceClient(conn).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{Job: job})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized message: %v, want ResourceExhausted", err)
	}
}

func TestShutdownReportsNotServingThenStops(t *testing.T) {
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 500 * time.Millisecond
	conn, stop := serve(t, cfg)
	health := healthpb.NewHealthClient(conn)

	done := stop()
	deadline := time.Now().Add(cfg.ShutdownDrain)
	for {
		resp, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "jobplane.v1.PlannerService"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never reported NOT_SERVING during the drain (last: %v, %v)", resp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(cfg.ShutdownDrain + cfg.ShutdownTimeout):
		t.Fatal("server did not stop")
	}
}

// serve starts a server with cfg over bufconn; stop cancels it and returns
// the channel Serve's result arrives on.
func serve(t *testing.T, cfg grpcserver.Config) (*grpc.ClientConn, func() <-chan error) {
	t.Helper()
	srv, err := grpcserver.New(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterService(&jobplanev1.PlannerService_ServiceDesc, panickyPlanner{})
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, nil) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() <-chan error { stopped = true; cancel(); return done }
	t.Cleanup(func() {
		conn.Close()
		if !stopped {
			cancel()
			<-done
		}
	})
	return conn, stop
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
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
