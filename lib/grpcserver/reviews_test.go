package grpcserver_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// The reviews no cache answers share one budget (50 a second, bursts of
// 100), turn by turn between the hosts calls come from and between the
// tenants asking: a flood waits for its own turns, and another caller's
// review comes within a turn or two of it, not behind the flood.

// floodBurst: the flood's reviews beyond the budget's burst, so that what
// it sends next waits.
const floodBurst = 120

// turnsAndOnTheirWay bounds the flood's reviews the fake API server sees
// between a caller's call and its review: a turn or two of the flood's, and
// those already granted and on their way while the machine is busy (3 to
// 4 seen); with one lane for all, 200.
const turnsAndOnTheirWay = 10

// A flood of made-up tokens from one host, each needing a TokenReview,
// leaves a caller on another host its turn.
func TestAFloodOfMadeUpTokensFromOneHostLeavesAnotherHostItsTurn(t *testing.T) {
	madeUpTokensBesideACaller(t, 1, floodBurst)
}

// A flood of made-up tokens from many hosts (a tenant's many pods), each
// needing a TokenReview, leaves a caller on another host its turn: a host
// whose tokens were refused a few times waits in a suspect's lane, and the
// suspects together get a small share of the turns.
func TestAFloodOfMadeUpTokensFromManyHostsLeavesAnotherHostItsTurn(t *testing.T) {
	// Every host refused often enough to be a suspect, and what each had
	// waiting as a host (200 calls, about 6 each) reviewed since.
	madeUpTokensBesideACaller(t, 32, 32*8+200+floodBurst)
}

// madeUpTokensBesideACaller floods a server with made-up tokens from
// hosts, and once the fake API server has reviewed reviewed of them, has
// alice call from 127.0.0.1 with a token it has not seen: her review comes
// within turnsAndOnTheirWay of the flood's.
func madeUpTokensBesideACaller(t *testing.T, hostCount, reviewed int) {
	t.Helper()
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	srv := authServer(t, cluster, nil)
	flood(t, srv, hosts(hostCount), func(ctx context.Context, conn *grpc.ClientConn, call string) {
		_, _ = jobplanev1.NewPlannerServiceClient(conn).ValidateJob(bearerCtx(ctx, "made-up-"+call), &jobplanev1.ValidateJobRequest{})
	})
	waitFor(t, "the flood's reviews", func() bool { return cluster.count("tokenreviews") > reviewed })

	before := cluster.count("tokenreviews")
	if _, err := whoami(t, srv.Conn, bearer("alice-token")); err != nil {
		t.Fatal(err)
	}
	reviewedWithinATurn(t, cluster, before, "alice-token")
}

// reviewedWithinATurn checks that question came to the fake API server
// within turnsAndOnTheirWay of the flood's reviews after the before-th.
func reviewedWithinATurn(t *testing.T, cluster *fakeCluster, before int, question string) {
	t.Helper()
	if waited := cluster.reviewsBefore(question) - before; waited > turnsAndOnTheirWay {
		t.Errorf("%q was reviewed after %d of the flood's reviews, want at most %d: the flood took the caller's turns", question, waited, turnsAndOnTheirWay)
	}
}

// A tenant's flood of questions no authorization cache holds (a new
// namespace each time) leaves another tenant's question its turn.
func TestAFloodOfUncachedQuestionsFromOneTenantLeavesAnotherTenantItsTurn(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.tokens["mallory-token"] = authenticationv1.UserInfo{Username: "mallory"}
	cluster.grant("alice", "list", "batch/jobs", "a")
	// Seats for the whole flood: what waits is its reviews, not its calls.
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Admission.Seats = 1024 })
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	_, err := executor.ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{Namespace: "b"})
	wantCode(t, err, codes.PermissionDenied) // her token is reviewed, and kept
	flood(t, srv, []net.IP{net.IPv4(127, 0, 0, 1)}, func(ctx context.Context, conn *grpc.ClientConn, call string) {
		_, _ = jobplanev1.NewExecutorServiceClient(conn).ListJobs(bearerCtx(ctx, "mallory-token"), &jobplanev1.ListJobsRequest{Namespace: "ns-" + call})
	})
	waitFor(t, "the flood's reviews past the burst", func() bool { return cluster.count("subjectaccessreviews") > floodBurst })

	before := cluster.count("subjectaccessreviews")
	_, err = executor.ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{Namespace: "a"})
	wantCode(t, err, codes.Unimplemented) // authorized: the test's executor implements nothing
	reviewedWithinATurn(t, cluster, before, "alice list batch/jobs a")
}

// flood makes 200 calls at once from the hosts of ips, on a connection
// each (four for one host), until the test ends; call names each call
// uniquely.
func flood(t testing.TB, srv *grpctest.Server, ips []net.IP, call func(ctx context.Context, conn *grpc.ClientConn, call string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var calls sync.WaitGroup
	t.Cleanup(calls.Wait)
	t.Cleanup(cancel)
	conns := max(4, len(ips))
	for c := range conns {
		ip := ips[c%len(ips)]
		from := dialingFrom(ip)
		conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), from)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		for g := range 200 / conns {
			calls.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					call(ctx, conn, fmt.Sprintf("%d-%d-%d", c, g, n))
				}
			})
		}
	}
}

// hosts are the n loopback addresses from 127.0.0.2.
func hosts(n int) []net.IP {
	ips := make([]net.IP, n)
	for i := range ips {
		ips[i] = net.IPv4(127, 0, 0, byte(2+i))
	}
	return ips
}

// Refused tokens are kept apart from accepted ones: made-up tokens, however
// many, never push a caller's answer out of the cache and send its token to
// the API server again.
func TestMadeUpTokensNeverPushACallersAnswerOut(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.TokenCacheSize = 8 })
	if _, err := whoami(t, srv.Conn, bearer("alice-token")); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		_, err := whoami(t, srv.Conn, bearer(fmt.Sprintf("made-up-%d", i)))
		wantCode(t, err, codes.Unauthenticated)
	}
	if _, err := whoami(t, srv.Conn, bearer("alice-token")); err != nil {
		t.Fatal(err)
	}
	if n := cluster.reviewsOf("alice-token"); n != 1 {
		t.Errorf("alice's token was reviewed %d times, want once: made-up tokens pushed her answer out", n)
	}
}

// dialingFrom makes a client's connections from ip, as a caller on another
// host of the loopback network.
func dialingFrom(ip net.IP) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, "tcp", addr)
	})
}
