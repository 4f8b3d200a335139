package grpcserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// The bounds a priority level's callers share (its streams, its unread
// answers) are shared max-min fairly: tenants that fill them together,
// each within its own bound, cannot lock another tenant out.

// floodingWatch answers WatchJobs as watchAll does, and with events of 64
// KiB as fast as the client reads them when the selector is "flood".
type floodingWatch struct{ watchAll }

func (w floodingWatch) WatchJobs(req *jobplanev1.WatchJobsRequest, stream grpc.ServerStreamingServer[jobplanev1.WatchJobsResponse]) error {
	if req.GetLabelSelector() != "flood" {
		return w.watchAll.WatchJobs(req, stream)
	}
	big := &jobplanev1.WatchJobsResponse{Type: strings.Repeat("x", 64<<10)}
	for {
		if err := stream.Send(big); err != nil {
			return err
		}
	}
}

// watchersServer serves floodingWatch to the users' tokens, each allowed
// to watch Jobs, with room for 4 streams a level, 2 a caller.
func watchersServer(t *testing.T, users ...string) *grpctest.Server {
	t.Helper()
	cluster, cfg := usersCluster(users...)
	for _, u := range users {
		cluster.grant(u, "list", "batch/jobs", "")
		cluster.grant(u, "watch", "batch/jobs", "")
	}
	cfg.Admission.Streams, cfg.Admission.StreamsPerCaller = 4, 2
	return grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) {
			s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, floodingWatch{})
		})
}

// watching opens a watch of user's that sends events until it ends, and
// has read its first.
func watching(t *testing.T, ctx context.Context, srv *grpctest.Server, user string) grpc.ServerStreamingClient[jobplanev1.WatchJobsResponse] {
	t.Helper()
	stream, err := jobplanev1.NewExecutorServiceClient(srv.Conn).WatchJobs(bearerCtx(ctx, user+"-token"), &jobplanev1.WatchJobsRequest{LabelSelector: "forever"})
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Fatalf("%s's watch: %v", user, err)
	}
	return stream
}

func bearerCtx(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// streamsOpen is the streams open on every priority level.
func streamsOpen(t *testing.T, srv *grpctest.Server) float64 {
	t.Helper()
	families, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var open float64
	for _, f := range families {
		if f.GetName() == "jobplane_admission_in_use" {
			for _, m := range f.GetMetric() {
				if label(m, "budget") == "streams" {
					open += m.GetGauge().GetValue()
				}
			}
		}
	}
	return open
}

// endOf is how a watch ends, reading its events until then.
func endOf(stream grpc.ServerStreamingClient[jobplanev1.WatchJobsResponse]) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// Two tenants hold a level's four streams, two each; a third tenant's
// watch is served, and one of theirs ends with RESOURCE_EXHAUSTED and
// RetryInfo, to be opened again later.
func TestTenantsCannotTogetherTakeEveryStream(t *testing.T) {
	srv := watchersServer(t, "w1", "w2", "w3")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ends := make(chan error, 4)
	for _, user := range []string{"w1", "w1", "w2", "w2"} {
		stream := watching(t, ctx, srv, user)
		go func() { ends <- endOf(stream) }()
	}
	newcomer := watching(t, ctx, srv, "w3")
	select {
	case err := <-ends:
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "fewer") {
			t.Fatalf("the stream taken ended with %v, want RESOURCE_EXHAUSTED saying why", err)
		}
		if _, ok := retryDelay(err); !ok {
			t.Errorf("no RetryInfo in %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no stream of the two tenants ended")
	}
	if _, err := newcomer.Recv(); err != nil {
		t.Fatalf("the third tenant's watch: %v", err)
	}
	select {
	case err := <-ends:
		t.Fatalf("a second stream ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// A stream taken whose handler cannot end (it waits to send to a client
// that does not read) has its connection closed after the grace, so the
// level's bound holds.
func TestAStreamTakenThatDoesNotEndLosesItsConnection(t *testing.T) {
	srv := watchersServer(t, "mallory", "m2", "alice")
	grpcserver.SetPreemptedStreamGrace(srv.Server, 100*time.Millisecond)
	flood, err := proto.Marshal(&jobplanev1.WatchJobsRequest{LabelSelector: "flood"})
	if err != nil {
		t.Fatal(err)
	}
	hostile := dialNeverReading(t, srv.Addr, "mallory-token")
	hostile.callWith("/jobplane.v1.ExecutorService/WatchJobs", flood)
	hostile.callWith("/jobplane.v1.ExecutorService/WatchJobs", flood)
	other := dialNeverReading(t, srv.Addr, "m2-token")
	other.callWith("/jobplane.v1.ExecutorService/WatchJobs", flood)
	other.callWith("/jobplane.v1.ExecutorService/WatchJobs", flood)
	waitFor(t, "the level's streams taken", func() bool {
		return streamsOpen(t, srv) == 4
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := watching(t, ctx, srv, "alice")
	waitFor(t, "a connection of theirs closed", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "stream_preempted") == 1
	})
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("alice's watch beside them: %v", err)
	}
	waitFor(t, "the closed connection's other stream given back", func() bool {
		return streamsOpen(t, srv) == 3
	})
}

// Tenants that never read fill the level's unread answers, each within
// its own bound (2 MiB of a level's 4): another tenant's call is still
// answered, the connection of the one holding the most closed to make room
// (a third tenant takes its room so, and then the fourth; without sharing,
// the third would fill the level and the fourth be refused).
func TestTenantsCannotTogetherHoldEveryUnreadAnswer(t *testing.T) {
	srv := unreadServer(t, "alice", "m1", "m2", "m3")
	const calls = 10
	for _, user := range []string{"m1", "m2", "m3"} {
		hostile := dialNeverReading(t, srv.Addr, user+"-token")
		for range calls {
			hostile.call("/jobplane.v1.PlannerService/ValidateJob")
		}
		waitFor(t, user+"'s calls answered or held", func() bool {
			_, mine := grpcserver.AnswersHeld(srv.Server, user)
			return int64(hostile.refusals())*bigAnswer+mine >= calls*bigAnswer
		})
	}
	if err := validate(srv, "alice", nil); err != nil {
		t.Fatalf("another tenant beside them: %v", err)
	}
	if n := connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unread_answers_reclaimed"); n < 1 {
		t.Fatal("no connection closed for room")
	}
	if all, _ := grpcserver.AnswersHeld(srv.Server, "alice"); all > 4<<20 {
		t.Fatalf("%d bytes held, more than the level's 4 MiB", all)
	}
}
