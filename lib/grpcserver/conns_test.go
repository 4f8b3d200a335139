package grpcserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// answering answers ValidateJob at once.
type answering struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

func (answering) ValidateJob(context.Context, *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	return &jobplanev1.ValidateJobResponse{}, nil
}

// connsServer serves answering to the users' tokens ("<user>-token"), with
// "executor" at the system level.
func connsServer(t *testing.T, edit func(*grpcserver.Config), users ...string) *grpctest.Server {
	t.Helper()
	cluster, cfg := usersCluster(users...)
	cfg.Admission.SystemUsers = []string{"executor"}
	edit(&cfg)
	return grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, answering{}) })
}

// newConn is a client connection of its own to srv: one TCP connection.
func newConn(t *testing.T, srv *grpctest.Server) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func validateOn(conn *grpc.ClientConn, user string) error {
	_, err := jobplanev1.NewPlannerServiceClient(conn).ValidateJob(bearer(user+"-token"), &jobplanev1.ValidateJobRequest{})
	return err
}

// connMetric is the value of the gate's metric name with labelName=value.
func connMetric(t *testing.T, srv *grpctest.Server, name, labelName, value string) float64 {
	t.Helper()
	families, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, labelName) == value {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A caller (a tenant: all its ServiceAccounts) keeps at most so many
// connections: a call on one more is refused, with RetryInfo, and that
// connection closed; another tenant and the services' own identities are
// not held back, and a connection closed makes room for a new one.
func TestACallersConnectionsAreBounded(t *testing.T) {
	const a1, a2, a3, b = "system:serviceaccount:team-a:one", "system:serviceaccount:team-a:two",
		"system:serviceaccount:team-a:three", "system:serviceaccount:team-b:one"
	srv := connsServer(t, func(c *grpcserver.Config) { c.MaxConnsPerCaller = 2 }, a1, a2, a3, b, "executor")
	first := newConn(t, srv)
	for user, conn := range map[string]*grpc.ClientConn{a1: first, a2: newConn(t, srv)} {
		if err := validateOn(conn, user); err != nil {
			t.Fatalf("%s: %v", user, err)
		}
	}
	third := newConn(t, srv)
	err := validateOn(third, a3)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "connections open") {
		t.Fatalf("team-a's third connection: %v, want ResourceExhausted for too many connections", err)
	}
	if d, ok := retryDelay(err); !ok || d <= 0 {
		t.Errorf("RetryInfo %v, %v", d, ok)
	}
	waitFor(t, "the third connection closed", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "too_many_connections") == 1
	})
	if err := validateOn(newConn(t, srv), b); err != nil {
		t.Errorf("team-b beside team-a's connections: %v", err)
	}
	for range 3 {
		if err := validateOn(newConn(t, srv), "executor"); err != nil {
			t.Errorf("the system level's connections are not bounded: %v", err)
		}
	}
	first.Close()
	waitFor(t, "a new connection of team-a served once one is closed", func() bool {
		return validateOn(newConn(t, srv), a3) == nil
	})
}

// A connection no call of which is authenticated is closed after the
// first-call timeout; one whose caller is known stays open.
func TestASilentConnectionIsClosed(t *testing.T) {
	srv := connsServer(t, func(c *grpcserver.Config) { c.FirstCallTimeout = time.Second }, "alice")
	calling := newConn(t, srv)
	if err := validateOn(calling, "alice"); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := silent.Read(make([]byte, 1<<10)); err == nil {
		// The server's HTTP/2 settings come first, then its close.
		for err == nil {
			_, err = silent.Read(make([]byte, 1<<10))
		}
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the silent connection was not closed")
	}
	if err := validateOn(calling, "alice"); err != nil {
		t.Fatal(err)
	}
	if got := connMetric(t, srv, "jobplane_connections_closed_total", "reason", "first_call_timeout"); got != 1 {
		t.Errorf("%v connections closed for want of a call, want 1 (the silent one)", got)
	}
	if got := connMetric(t, srv, "jobplane_connections_open", "state", "identified"); got != 1 {
		t.Errorf("%v connections identified, want 1", got)
	}
}

// Connections that never call cannot lock out a client that calls as it
// connects: beyond their bound, the oldest is closed for the newest.
func TestAFloodOfConnectionsLeavesRoomForACaller(t *testing.T) {
	// A caller's connection stays as long as the flood takes to open this
	// many more (one every 2 ms: 128 ms), its first call far sooner even
	// on a loaded machine.
	const bound = 64
	srv := connsServer(t, func(c *grpcserver.Config) { c.MaxUnidentifiedConns = bound }, "alice")
	stop := floodOfConnections(srv)
	waitFor(t, "the flood over its bound", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unidentified_evicted") > bound
	})
	for i := range 10 {
		if err := validateOn(newConn(t, srv), "alice"); err != nil {
			t.Errorf("call %d during the flood: %v", i, err)
		}
	}
	stop()
	if got := connMetric(t, srv, "jobplane_connections_open", "state", "unidentified"); got > bound {
		t.Errorf("%v unidentified connections open, bound %d", got, bound)
	}
}

// A flood of connections that never call cannot close a client's
// connection while its first call is being authenticated, however long
// that takes: the oldest connection with no call open is closed first.
func TestAFloodOfConnectionsSparesACallBeingAuthenticated(t *testing.T) {
	const bound = 16
	cluster, cfg := usersCluster("alice")
	cluster.tokenReviewDelay = 500 * time.Millisecond // the flood opens 250 meanwhile
	cfg.MaxUnidentifiedConns = bound
	srv := grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, answering{}) })
	stop := floodOfConnections(srv)
	defer stop()
	waitFor(t, "the flood over its bound", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unidentified_evicted") > bound
	})
	if err := validateOn(newConn(t, srv), "alice"); err != nil {
		t.Fatalf("a call authenticated during the flood: %v", err)
	}
}

// A flood whose connections each keep a health watch open (no credentials
// needed) closes only its own connections, not a client's whose first call
// is being authenticated meanwhile, however long that takes: from another
// host, since unidentified connections are shared fairly by host; from the
// same host, since a connection whose call is being authenticated is
// closed last, a unary call's or a stream's (whose credentials are
// reviewed before admission sees it).
func TestAFloodOfWatchesSparesACallBeingAuthenticated(t *testing.T) {
	unary := func(conn *grpc.ClientConn) error { return validateOn(conn, "alice") }
	stream := func(conn *grpc.ClientConn) error {
		s, err := jobplanev1.NewPlannerServiceClient(conn).StreamPlanSync(bearer("alice-token"))
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) == codes.Unimplemented { // admitted: answering has no streams
			return nil
		}
		return err
	}
	for _, c := range []struct {
		name string
		ip   net.IP
		call func(*grpc.ClientConn) error
	}{
		{"another host", net.IPv4(127, 0, 0, 2), unary},
		{"the same host", net.IPv4(127, 0, 0, 1), unary},
		{"the same host, a stream", net.IPv4(127, 0, 0, 1), stream},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := floodedWhileAuthenticating(t, c.ip)
			err := c.call(newConn(t, srv))
			// Until its first call arrives a connection is spared no more
			// than the flood's: on a loaded machine the gate may close it
			// before its preface is even read. A client dials again then;
			// once its call has arrived it must never be closed.
			for retries := 0; retries < 5 && err != nil && strings.Contains(err.Error(), "server preface"); retries++ {
				err = c.call(newConn(t, srv))
			}
			if err != nil {
				t.Fatalf("a call authenticated during a flood from %s: %v", c.name, err)
			}
			if evicted := connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unidentified_evicted"); evicted < 2*floodBound {
				t.Fatalf("%v connections evicted during the 500 ms call: the flood was too slow to show anything", evicted)
			}
		})
	}
}

// floodBound is the unidentified connections a flooded server keeps.
const floodBound = 16

// floodedWhileAuthenticating starts a server whose TokenReviews take
// 500 ms and floods it from ip, each connection keeping a health watch
// open, until the test ends; it returns once the flood is over the bound.
func floodedWhileAuthenticating(t *testing.T, ip net.IP) *grpctest.Server {
	cluster, cfg := usersCluster("alice")
	cluster.tokenReviewDelay = 500 * time.Millisecond
	cfg.MaxUnidentifiedConns = floodBound
	srv := grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, answering{}) })
	ctx, cancel := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	t.Cleanup(flood.Wait)
	t.Cleanup(cancel)
	flood.Go(func() {
		from := dialingFrom(ip)
		for ctx.Err() == nil {
			conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), from)
			if err != nil {
				continue
			}
			defer conn.Close()
			if watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{}); err == nil {
				_, _ = watch.Recv()
			}
		}
	})
	waitFor(t, "the flood over its bound", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unidentified_evicted") > floodBound
	})
	return srv
}

// floodOfConnections opens a connection to srv every 2 ms, never calling,
// until stopped.
func floodOfConnections(srv *grpctest.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	flood.Go(func() {
		var open []net.Conn
		defer func() {
			for _, c := range open {
				c.Close()
			}
		}()
		for ctx.Err() == nil {
			c, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				continue
			}
			open = append(open, c)
			time.Sleep(2 * time.Millisecond)
		}
	})
	return func() { cancel(); flood.Wait() }
}

// A connection has at most so many calls open at once: the server sees no
// more of them, while another connection's calls still arrive.
func TestAConnectionsCallsAreBounded(t *testing.T) {
	srv, g := admissionServer(t, func(c *grpcserver.Config) { c.MaxStreamsPerConn = 3 }, "flooder", "quiet")
	conn := newConn(t, srv)
	for range 6 {
		go func() { _ = validateOn(conn, "flooder") }()
	}
	<-g.entered
	waitFor(t, "two of the connection's calls queued", func() bool { return waiting(t, srv, "workload") == 2 })
	go func() { _ = validate(srv, "quiet", nil) }()
	waitFor(t, "another connection's call queued", func() bool { return waiting(t, srv, "workload") == 3 })
	if got := waiting(t, srv, "workload"); got != 3 {
		t.Errorf("%v calls queued, want 3: the first connection's 3 calls open less the one in flight, and the other's", got)
	}
}

// The metrics port keeps at most so many connections, the oldest idle one
// closed for a new one: a flood of connections leaves the probes served.
func TestTheMetricsPortsConnectionsAreBounded(t *testing.T) {
	const bound = 8
	srv := connsServer(t, func(c *grpcserver.Config) { c.MaxMetricsConns = bound })
	addr := strings.TrimPrefix(srv.MetricsURL, "http://")
	var silent []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	for i := range 5 {
		resp, err := http.Get(srv.MetricsURL + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %d beside the flood: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	open := 0
	for _, c := range silent {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	if open > bound {
		t.Errorf("%d of the flood's connections open, bound %d", open, bound)
	}
}

// A connection whose only call is a health check's watch (no credentials
// needed) is not cut at the first-call timeout while the watch is open;
// once it ends, the timeout applies.
func TestAHealthWatchKeepsItsConnection(t *testing.T) {
	srv := connsServer(t, func(c *grpcserver.Config) { c.FirstCallTimeout = 200 * time.Millisecond })
	conn := newConn(t, srv)
	ctx, stop := context.WithCancel(context.Background())
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // three timeouts
	if got := connMetric(t, srv, "jobplane_connections_closed_total", "reason", "first_call_timeout"); got != 0 {
		t.Fatalf("%v connections closed while their watch was open", got)
	}
	stop()
	waitFor(t, "the connection closed once its watch ended", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "first_call_timeout") == 1
	})
}

// A connection whose calls are health checks, one at a time (a client
// checking a server's readiness every so often), is kept while they come
// within the first-call timeout; once they stop, the timeout applies.
func TestPeriodicHealthChecksKeepTheirConnection(t *testing.T) {
	srv := connsServer(t, func(c *grpcserver.Config) { c.FirstCallTimeout = 300 * time.Millisecond })
	health := healthpb.NewHealthClient(newConn(t, srv))
	for i := range 10 { // a second, three timeouts
		if _, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := connMetric(t, srv, "jobplane_connections_closed_total", "reason", "first_call_timeout"); got != 0 {
		t.Fatalf("%v connections closed while checked every 100 ms", got)
	}
	waitFor(t, "the connection closed once the checks stopped", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "first_call_timeout") == 1
	})
}

// Health checks need no credentials, so they cannot keep a flood's
// connections: beyond the bound, the oldest is closed even with a watch
// open on it.
func TestAFloodOfHealthWatchesIsBoundedToo(t *testing.T) {
	const bound = 4
	srv := connsServer(t, func(c *grpcserver.Config) { c.MaxUnidentifiedConns = bound })
	for range 2 * bound {
		watch, err := healthpb.NewHealthClient(newConn(t, srv)).Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := watch.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the oldest watchers' connections closed", func() bool {
		return connMetric(t, srv, "jobplane_connections_closed_total", "reason", "unidentified_evicted") >= bound
	})
	if got := connMetric(t, srv, "jobplane_connections_open", "state", "unidentified"); got > bound {
		t.Errorf("%v unidentified connections open, bound %d", got, bound)
	}
}
