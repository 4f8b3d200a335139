package grpcserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	authenticationv1 "k8s.io/api/authentication/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// gatedPlanner's ValidateJob reports who entered it and waits until let
// go, so a test holds the seats and sees the order calls are served in.
type gatedPlanner struct {
	jobplanev1.UnimplementedPlannerServiceServer
	entered chan string
	release chan struct{}
}

func (g gatedPlanner) ValidateJob(ctx context.Context, req *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	id, _ := auth.FromContext(ctx)
	g.entered <- id.User
	<-g.release
	if req.GetJob().GetMetadata().GetName() == unencodable {
		// An answer protobuf-go refuses to write: a Struct's key that is
		// not UTF-8.
		spec := &structpb.Struct{Fields: map[string]*structpb.Value{"\xc3\x28": structpb.NewBoolValue(true)}}
		return &jobplanev1.ValidateJobResponse{Job: &jobplanev1.Job{Spec: &jobplanev1.JobSpec{Template: &jobplanev1.PodTemplateSpec{Spec: spec}}}}, nil
	}
	return &jobplanev1.ValidateJobResponse{}, nil
}

// unencodable is the name of a Job whose validation gatedPlanner answers
// with what cannot be encoded.
const unencodable = "unencodable"

// An answer is encoded while its call holds its seat; one that cannot be
// is answered INTERNAL, as grpc-go answers it, and its seat is given back.
func TestAnAnswerThatCannotBeEncodedIsInternal(t *testing.T) {
	srv, g := admissionServer(t, nil, "alice")
	done := make(chan error, 1)
	go func() {
		done <- validate(srv, "alice", &jobplanev1.ValidateJobRequest{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: unencodable}}})
	}()
	<-g.entered
	g.release <- struct{}{}
	err := <-done
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "marshaling") {
		t.Fatalf("got %v, want INTERNAL naming the encoding", err)
	}
	go func() { done <- validate(srv, "alice", nil) }()
	<-g.entered
	g.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("the next call: %v (its seat was not given back?)", err)
	}
}

// admissionServer serves gatedPlanner with one seat a priority level, the
// users' tokens known by name ("<user>-token"), and "executor" at the
// system level.
func admissionServer(t *testing.T, edit func(*grpcserver.Config), users ...string) (*grpctest.Server, gatedPlanner) {
	t.Helper()
	cluster, cfg := usersCluster(users...)
	cfg.Admission.Seats = 1
	cfg.Admission.SystemUsers = []string{"executor"}
	if edit != nil {
		edit(&cfg)
	}
	g := gatedPlanner{entered: make(chan string, 100), release: make(chan struct{})}
	srv := grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, g) })
	t.Cleanup(func() {
		for {
			select {
			case g.release <- struct{}{}:
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	})
	return srv, g
}

// usersCluster is a fake cluster that knows users by their tokens
// ("<user>-token"), and the configuration of a server of it.
func usersCluster(users ...string) (*fakeCluster, grpcserver.Config) {
	cluster := newFakeCluster()
	for _, u := range users {
		cluster.tokens[u+"-token"] = authenticationv1.UserInfo{Username: u}
	}
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 0
	return cluster, cfg
}

func validate(srv *grpctest.Server, user string, req *jobplanev1.ValidateJobRequest) error {
	if req == nil {
		req = &jobplanev1.ValidateJobRequest{}
	}
	_, err := jobplanev1.NewPlannerServiceClient(srv.Conn).ValidateJob(bearer(user+"-token"), req)
	return err
}

// waiting is the admission's count of calls waiting in level.
func waiting(t *testing.T, srv *grpctest.Server, level string) float64 {
	t.Helper()
	families, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "jobplane_admission_waiting" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "priority_level") == level && label(m, "budget") == "seats" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, 10*time.Second, what, cond)
}

// A caller flooding the server delays only itself: another caller's call
// waits for one turn of the flood's at most, not for the flood.
func TestAFloodFromOneCallerLeavesAnotherItsTurn(t *testing.T) {
	srv, g := admissionServer(t, nil, "flooder", "quiet")
	const flood = 20
	for range flood {
		go func() { _ = validate(srv, "flooder", nil) }()
	}
	if got := <-g.entered; got != "flooder" {
		t.Fatalf("%s entered first", got)
	}
	waitFor(t, "the flood queued", func() bool { return waiting(t, srv, "workload") == flood-1 })
	go func() { _ = validate(srv, "quiet", nil) }()
	waitFor(t, "the quiet call queued", func() bool { return waiting(t, srv, "workload") == flood })
	for served := 1; ; served++ {
		g.release <- struct{}{}
		if <-g.entered == "quiet" {
			// The call in flight ends, the flood's next call has its turn,
			// then the quiet caller's.
			if served > 2 {
				t.Errorf("the quiet caller was served after %d of the flood's calls, want at most 2", served)
			}
			return // the rest is let go when the test ends
		}
	}
}

// A tenant's ServiceAccounts are one flow: more accounts in a namespace
// buy it no more queue, while another namespace keeps its own.
func TestATenantsServiceAccountsShareOneFlow(t *testing.T) {
	const a1, a2, a3, b = "system:serviceaccount:team-a:one", "system:serviceaccount:team-a:two",
		"system:serviceaccount:team-a:three", "system:serviceaccount:team-b:one"
	srv, g := admissionServer(t, func(c *grpcserver.Config) { c.Admission.QueueLength = 2 }, a1, a2, a3, b)
	go func() { _ = validate(srv, a1, nil) }()
	<-g.entered
	go func() { _ = validate(srv, a1, nil) }()
	go func() { _ = validate(srv, a2, nil) }()
	waitFor(t, "team-a's queue full", func() bool { return waiting(t, srv, "workload") == 2 })
	if err := validate(srv, a3, nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third account of team-a: %v, want ResourceExhausted (its tenant's queue is full)", err)
	}
	go func() { _ = validate(srv, b, nil) }()
	waitFor(t, "team-b's call queued", func() bool { return waiting(t, srv, "workload") == 3 })
}

// The services' own identities have a priority level of their own: the
// executor is served while outside callers hold every workload seat.
func TestTheSystemLevelIsServedWhileTheWorkloadLevelIsFull(t *testing.T) {
	srv, g := admissionServer(t, nil, "outsider", "executor")
	for range 5 {
		go func() { _ = validate(srv, "outsider", nil) }()
	}
	<-g.entered
	waitFor(t, "the outsiders queued", func() bool { return waiting(t, srv, "workload") == 4 })
	go func() { _ = validate(srv, "executor", nil) }()
	if got := <-g.entered; got != "executor" {
		t.Fatalf("%s entered while the executor waited", got)
	}
}

func retryDelay(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// Beyond its queue, a caller is shed at once with RESOURCE_EXHAUSTED and
// RetryInfo; a request larger than the whole memory budget is shed at once,
// naming the limit; a caller keeps at most so many streams open.
func TestShedCallsAreResourceExhausted(t *testing.T) {
	t.Run("queue full", func(t *testing.T) {
		srv, g := admissionServer(t, func(c *grpcserver.Config) { c.Admission.QueueLength = 2 }, "flooder")
		for range 3 {
			go func() { _ = validate(srv, "flooder", nil) }()
		}
		<-g.entered
		waitFor(t, "two queued", func() bool { return waiting(t, srv, "workload") == 2 })
		err := validate(srv, "flooder", nil)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("got %v, want ResourceExhausted", err)
		}
		if d, ok := retryDelay(err); !ok || d <= 0 {
			t.Errorf("RetryInfo %v, %v", d, ok)
		}
	})
	t.Run("a request that can never fit", func(t *testing.T) {
		for _, tc := range []struct {
			name, limit string
			maxRecv     int
		}{
			// By default the server receives no message larger than a
			// level can take (1 KiB / 16): refused as it arrives.
			{name: "by default", limit: "64"},
			// A larger -max-recv-msg-bytes: refused when charged.
			{name: "received, then charged", limit: "1024", maxRecv: 1 << 20},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv, _ := admissionServer(t, func(c *grpcserver.Config) {
					c.Admission.Bytes = 2 << 10 // 1 KiB a level
					c.Admission.Expansion = 16
					c.MaxRecvMsgBytes = tc.maxRecv
				}, "big")
				req := &jobplanev1.ValidateJobRequest{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: strings.Repeat("x", 200)}}}
				err := validate(srv, "big", req)
				if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), tc.limit) {
					t.Fatalf("got %v, want ResourceExhausted naming the limit %s", err, tc.limit)
				}
				if _, ok := retryDelay(err); ok {
					t.Error("RetryInfo on a request that can never fit")
				}
			})
		}
	})
	t.Run("streams per caller", func(t *testing.T) {
		cluster := newFakeCluster()
		cluster.tokens["watcher-token"] = authenticationv1.UserInfo{Username: "watcher"}
		cluster.grant("watcher", "list", "batch/jobs", "")
		cluster.grant("watcher", "watch", "batch/jobs", "")
		srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Admission.StreamsPerCaller = 1 })
		ctx, cancel := context.WithCancel(bearer("watcher-token"))
		defer cancel()
		api := jobplanev1.NewExecutorServiceClient(srv.Conn)
		first, err := api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{LabelSelector: "forever"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := first.Recv(); err != nil {
			t.Fatalf("first stream: %v", err)
		}
		second, err := api.WatchJobs(ctx, &jobplanev1.WatchJobsRequest{LabelSelector: "forever"})
		if err == nil {
			_, err = second.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("second stream: %v, want ResourceExhausted", err)
		}
	})
}

// levelAnswer answers ValidateJob with whether its caller is of the system
// level, in the Job's name.
type levelAnswer struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

func (levelAnswer) ValidateJob(ctx context.Context, _ *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	return &jobplanev1.ValidateJobResponse{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: fmt.Sprint(grpcserver.SystemCaller(ctx))}}}, nil
}

// A handler knows whether its caller is one of the services' own
// identities (-system-users), and no one else is.
func TestAHandlerKnowsASystemCaller(t *testing.T) {
	cluster, cfg := usersCluster("executor", "system:serviceaccount:team-a:executor")
	cfg.Admission.SystemUsers = []string{"executor"}
	srv := grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, levelAnswer{}) })
	for user, want := range map[string]string{"executor": "true", "system:serviceaccount:team-a:executor": "false"} {
		resp, err := jobplanev1.NewPlannerServiceClient(srv.Conn).ValidateJob(bearer(user+"-token"), &jobplanev1.ValidateJobRequest{})
		if err != nil || resp.GetJob().GetMetadata().GetName() != want {
			t.Errorf("%s: system caller %q, %v; want %s", user, resp.GetJob().GetMetadata().GetName(), err, want)
		}
	}
}
