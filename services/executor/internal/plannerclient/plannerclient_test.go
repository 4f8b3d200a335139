package plannerclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/grpcserver"
	libplan "github.com/jobplane/jobplane/lib/plan"
)

// fakePlanner answers each snapshot with a plan whose summary names the
// snapshot's Job. Jobs named "refused" get InvalidArgument; Jobs named
// "hold..." are never answered. With batch > 1, it answers every batch
// requests at once, last first, so that answers come out of order.
type fakePlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer
	batch int
	// maxMessage is the largest request it says it takes; 0: 64 MiB.
	maxMessage int
	// noHeader sends no header before its first answer, as a planner
	// older than the header.
	noHeader bool
	streams  atomic.Int32
	received atomic.Int32
}

func (f *fakePlanner) StreamPlanSync(stream grpc.BidiStreamingServer[jobplanev1.StreamPlanSyncRequest, jobplanev1.StreamPlanSyncResponse]) error {
	f.streams.Add(1)
	if !f.noHeader {
		if err := sendMaxMessage(stream, cmp.Or(f.maxMessage, 64<<20)); err != nil {
			return err
		}
	}
	var pending []*jobplanev1.StreamPlanSyncRequest
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		f.received.Add(1)
		if strings.HasPrefix(jobName(req.GetRequest()), "hold") {
			continue
		}
		pending = append(pending, req)
		if len(pending) < max(f.batch, 1) {
			continue
		}
		for i := len(pending) - 1; i >= 0; i-- {
			if err := stream.Send(answer(pending[i])); err != nil {
				return err
			}
		}
		pending = nil
	}
}

func answer(req *jobplanev1.StreamPlanSyncRequest) *jobplanev1.StreamPlanSyncResponse {
	name := jobName(req.GetRequest())
	if name == "refused" {
		return &jobplanev1.StreamPlanSyncResponse{Id: req.GetId(),
			Error: status.New(codes.InvalidArgument, "job.spec.parallelism: Invalid value: -1").Proto()}
	}
	return &jobplanev1.StreamPlanSyncResponse{Id: req.GetId(),
		Response: &jobplanev1.PlanSyncResponse{Plan: &jobplanev1.SyncPlan{Summary: "plan for " + name}}}
}

func jobName(req *jobplanev1.PlanSyncRequest) string { return req.GetJob().GetMetadata().GetName() }

func request(name string) *jobplanev1.PlanSyncRequest {
	return &jobplanev1.PlanSyncRequest{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Namespace: "ns", Name: name}}}
}

// planner is a planner process that can be stopped and started again on the
// same loopback address.
type planner struct {
	t      *testing.T
	impl   *fakePlanner
	serve  jobplanev1.PlannerServiceServer // served instead of impl when set
	addr   string
	srv    *grpc.Server
	health *health.Server
	done   chan struct{}
}

func startPlanner(t *testing.T, impl *fakePlanner) *planner {
	t.Helper()
	p := &planner{t: t, impl: impl, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *planner) start() {
	p.t.Helper()
	var lis net.Listener
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for lis, err = net.Listen("tcp", p.addr); err != nil; lis, err = net.Listen("tcp", p.addr) {
		if time.Now().After(deadline) {
			p.t.Fatalf("listening on %s: %v", p.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.addr = lis.Addr().String()
	p.srv = grpc.NewServer()
	if p.serve != nil {
		jobplanev1.RegisterPlannerServiceServer(p.srv, p.serve)
	} else {
		jobplanev1.RegisterPlannerServiceServer(p.srv, p.impl)
	}
	p.health = health.NewServer()
	healthpb.RegisterHealthServer(p.srv, p.health)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(lis)
	}()
}

func (p *planner) stop() {
	if p.srv != nil {
		p.srv.Stop()
		<-p.done
		p.srv = nil
	}
}

// newClient is a Client of p whose connection retries quickly.
func newClient(t *testing.T, p *planner) *Client {
	t.Helper()
	conn, err := grpc.NewClient(p.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	c := New(conn)
	t.Cleanup(func() {
		c.Close()
		conn.Close()
	})
	return c
}

// sendMaxMessage opens stream with the header the chassis sends: the
// largest message it takes.
func sendMaxMessage(stream grpc.ServerStream, n int) error {
	return stream.SendHeader(metadata.Pairs(grpcserver.MaxMessageHeader, strconv.Itoa(n)))
}

// A snapshot larger than the planner says it takes is refused before it is
// sent, alone: sent, it would end the stream, and every call on it.
func TestASnapshotTooLargeFailsOnlyItsCall(t *testing.T) {
	impl := &fakePlanner{maxMessage: 1000}
	c := newClient(t, startPlanner(t, impl))
	req := request("big")
	req.Job.Metadata.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
	_, err := c.Plan(context.Background(), req)
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || apierr.Reason(err) != libplan.ReasonTooLarge || !strings.Contains(st.Message(), "1000") {
		t.Fatalf("a snapshot too large: %v, want RESOURCE_EXHAUSTED %s naming the limit", err, libplan.ReasonTooLarge)
	}
	if summary, err := plan(t, c, "after"); err != nil || summary != "plan for after" {
		t.Errorf("plan after it = %q, %v", summary, err)
	}
	if n, got := impl.streams.Load(), impl.received.Load(); n != 1 || got != 1 {
		t.Errorf("%d streams opened, %d requests received; want 1 and 1", n, got)
	}
}

// A planner that sends no header before its first answer (older than the
// header) is still asked: the first request waits for the header a
// moment, then goes unchecked.
func TestAPlannerWithoutTheHeaderIsStillAsked(t *testing.T) {
	impl := &fakePlanner{noHeader: true}
	c := newClient(t, startPlanner(t, impl))
	for _, name := range []string{"first", "second"} {
		if summary, err := plan(t, c, name); err != nil || summary != "plan for "+name {
			t.Fatalf("%s = %q, %v", name, summary, err)
		}
	}
}

func plan(t *testing.T, c *Client, name string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Plan(ctx, request(name))
	return p.GetSummary(), err
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConcurrentPlansShareOneStream(t *testing.T) {
	const calls = 8
	impl := &fakePlanner{batch: calls}
	c := newClient(t, startPlanner(t, impl))
	got := make([]string, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { got[i], errs[i] = plan(t, c, fmt.Sprintf("job-%d", i)) })
	}
	wg.Wait()
	for i := range calls {
		if want := fmt.Sprintf("plan for job-%d", i); errs[i] != nil || got[i] != want {
			t.Errorf("call %d = %q, %v; want %q", i, got[i], errs[i], want)
		}
	}
	if n := impl.streams.Load(); n != 1 {
		t.Errorf("%d streams opened for %d calls, want 1", n, calls)
	}
}

func TestRefusedSnapshotFailsOnlyItsCall(t *testing.T) {
	impl := &fakePlanner{}
	c := newClient(t, startPlanner(t, impl))
	names := []string{"a", "refused", "b", "c"}
	got := make([]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { got[i], errs[i] = plan(t, c, name) })
	}
	wg.Wait()
	for i, name := range names {
		if name == "refused" {
			if st := status.Convert(errs[i]); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "job.spec.parallelism") {
				t.Errorf("refused snapshot: %v; want the planner's InvalidArgument", errs[i])
			}
			continue
		}
		if errs[i] != nil || got[i] != "plan for "+name {
			t.Errorf("%s = %q, %v; want its plan", name, got[i], errs[i])
		}
	}
	if summary, err := plan(t, c, "after"); err != nil || summary != "plan for after" {
		t.Errorf("plan after a refusal = %q, %v", summary, err)
	}
	if n := impl.streams.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1: a refusal must not break the stream", n)
	}
}

func TestCallerDeadlineLeavesTheStream(t *testing.T) {
	impl := &fakePlanner{}
	c := newClient(t, startPlanner(t, impl))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Plan(ctx, request("hold")); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("unanswered call past its deadline: %v, want DeadlineExceeded", err)
	}
	if summary, err := plan(t, c, "next"); err != nil || summary != "plan for next" {
		t.Errorf("plan after a timed-out call = %q, %v", summary, err)
	}
	s := c.current()[syncs]
	s.mu.Lock()
	waiting := len(s.waiting)
	s.mu.Unlock()
	if waiting != 0 {
		t.Errorf("%d calls still registered on the stream, want 0", waiting)
	}
	if n := impl.streams.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1", n)
	}
}

func TestPlannerStoppedThenBack(t *testing.T) {
	impl := &fakePlanner{}
	p := startPlanner(t, impl)
	c := newClient(t, p)
	if _, err := plan(t, c, "first"); err != nil {
		t.Fatalf("plan with the planner up: %v", err)
	}

	// A call in flight when the planner stops fails with Unavailable.
	inFlight := make(chan error, 1)
	go func() {
		_, err := plan(t, c, "hold")
		inFlight <- err
	}()
	eventually(t, 5*time.Second, "the planner received the held call", func() bool { return impl.received.Load() == 2 })
	p.stop()
	select {
	case err := <-inFlight:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("call in flight when the planner stopped: %v, want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call in flight did not fail when the planner stopped")
	}

	// While it is down, calls fail fast.
	for range 5 {
		start := time.Now()
		_, err := plan(t, c, "down")
		if status.Code(err) != codes.Unavailable {
			t.Errorf("plan with the planner down: %v, want Unavailable", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("plan with the planner down took %s", d)
		}
	}

	p.start()
	eventually(t, 20*time.Second, "plans work again once the planner is back", func() bool {
		summary, err := plan(t, c, "back")
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("plan while the planner comes back: %v, want Unavailable or a plan", err)
		}
		return err == nil && summary == "plan for back"
	})
	if n := impl.streams.Load(); n != 2 {
		t.Errorf("%d streams opened, want 2 (one per planner life)", n)
	}
	c.mu.Lock()
	b := c.lanes[syncs].backoff
	c.mu.Unlock()
	if b != 0 {
		t.Errorf("backoff %s after a working stream, want reset to 0", b)
	}
}

func TestCloseFailsWaitingCalls(t *testing.T) {
	impl := &fakePlanner{}
	c := newClient(t, startPlanner(t, impl))
	inFlight := make(chan error, 1)
	go func() {
		_, err := plan(t, c, "hold")
		inFlight <- err
	}()
	eventually(t, 5*time.Second, "the planner received the call", func() bool { return impl.received.Load() == 1 })
	c.Close()
	select {
	case err := <-inFlight:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("call waiting at Close: %v, want Unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call waiting at Close never returned")
	}
	if summary, err := plan(t, c, "again"); err != nil || summary != "plan for again" {
		t.Errorf("plan after Close = %q, %v; want a new stream", summary, err)
	}
	if n := impl.streams.Load(); n != 2 {
		t.Errorf("%d streams opened, want 2", n)
	}
}

func TestReady(t *testing.T) {
	p := startPlanner(t, &fakePlanner{})
	c := newClient(t, p)
	svc := jobplanev1.PlannerService_ServiceDesc.ServiceName
	cases := []struct {
		name    string
		status  healthpb.HealthCheckResponse_ServingStatus
		wantErr bool
	}{
		{"serving", healthpb.HealthCheckResponse_SERVING, false},
		{"not serving", healthpb.HealthCheckResponse_NOT_SERVING, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.health.SetServingStatus(svc, tc.status)
			if err := c.Ready(context.Background()); (err != nil) != tc.wantErr {
				t.Errorf("Ready = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
