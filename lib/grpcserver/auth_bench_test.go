package grpcserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// allowEveryone allows every call.
type allowEveryone struct{}

func (allowEveryone) Authorize(context.Context, *auth.Identity, auth.Attributes) (auth.Decision, error) {
	return auth.Decision{Allowed: true}, nil
}

// getJobOK answers GetJob at once: the benchmarks measure what is around
// the handler.
type getJobOK struct {
	jobplanev1.UnimplementedExecutorServiceServer
}

func (getJobOK) GetJob(context.Context, *jobplanev1.GetJobRequest) (*jobplanev1.GetJobResponse, error) {
	return &jobplanev1.GetJobResponse{}, nil
}

// benchCalls makes b.N GetJob calls one after the other over loopback TCP
// and reports the latency's p50 and p99 beside the mean.
func benchCalls(b *testing.B, conn *grpc.ClientConn, ctx context.Context) {
	b.Helper()
	client := jobplanev1.NewExecutorServiceClient(conn)
	req := &jobplanev1.GetJobRequest{Namespace: "team-a", Name: "nightly"}
	if _, err := client.GetJob(ctx, req); err != nil {
		b.Fatal(err)
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := client.GetJob(ctx, req); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, latencies, time.Microsecond, "µs")
}

// reportLatencies reports the p50 and p99 of latencies in unit, named by
// its symbol.
func reportLatencies(b *testing.B, latencies []time.Duration, unit time.Duration, symbol string) {
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2]/unit), "p50-"+symbol)
	b.ReportMetric(float64(latencies[len(latencies)*99/100]/unit), "p99-"+symbol)
}

func benchServer(b testing.TB, edit func(*grpcserver.Config), opts ...grpcserver.Option) *grpctest.Server {
	b.Helper()
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 0
	cfg.LogLevel = "error"
	edit(&cfg)
	return grpctest.StartWith(b, grpctest.Options{Config: &cfg, Server: opts}, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, getJobOK{})
	})
}

// The cost of authentication and authorization per call, with an
// in-process API (a fake clientset) so that only jobplane's own work is
// measured: anonymous callers allowed everything (the floor: the
// interceptor's lookups), a token and a permission answered from the
// caches, and both asked anew on every call (TTL 0).
func BenchmarkAuth(b *testing.B) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a", "system:authenticated"}}
	cluster.grant("alice", "get", "batch/jobs", "team-a")
	withCluster := grpcserver.WithKubeClient(cluster)
	b.Run("anonymous-allow-all", func(b *testing.B) {
		srv := benchServer(b, func(c *grpcserver.Config) { c.Auth.Anonymous = true }, grpcserver.WithAuthorizer(allowEveryone{}))
		benchCalls(b, srv.Conn, context.Background())
	})
	b.Run("token-cached", func(b *testing.B) {
		srv := benchServer(b, func(*grpcserver.Config) {}, withCluster)
		benchCalls(b, srv.Conn, bearer("alice-token"))
	})
	b.Run("token-uncached", func(b *testing.B) {
		srv := benchServer(b, func(c *grpcserver.Config) { c.Auth.TokenCacheTTL, c.Auth.AuthzCacheTTL = 0, 0 }, withCluster)
		benchCalls(b, srv.Conn, bearer("alice-token"))
	})
}

// The same against a real kube-apiserver (RBAC, service account tokens) on
// loopback: the uncached path pays a TokenReview and a SubjectAccessReview
// round trip per call.
func BenchmarkAuthAgainstTheAPIServer(b *testing.B) {
	apiserver := kubetest.StartAPIServer(b)
	kube := apiserver.Client
	token := benchToken(b, kube)
	withAPI := grpcserver.WithKubeClient(kube)
	b.Run("token-cached", func(b *testing.B) {
		srv := benchServer(b, func(*grpcserver.Config) {}, withAPI)
		benchCalls(b, srv.Conn, bearer(token))
	})
	b.Run("token-uncached", func(b *testing.B) {
		srv := benchServer(b, func(c *grpcserver.Config) { c.Auth.TokenCacheTTL, c.Auth.AuthzCacheTTL = 0, 0 }, withAPI)
		benchCalls(b, srv.Conn, bearer(token))
	})
}

// A caller's first call with a new token while other hosts flood the
// server with made-up tokens (200 calls at once), against a real
// kube-apiserver reached through -kubeconfig, as deployed: the latency of
// the call, whose token the server has never seen. The reviews share the
// server's budget of 50 a second. The floods: one host, then 32, sending
// tokens that are not JWTs (each needs a TokenReview; the hosts refused
// become suspects), and 32 hosts sending service account tokens of the
// cluster's issuer and key id, not signed by it (refused against the
// cluster's keys, without a review).
func BenchmarkAFreshTokenDuringAFloodOfMadeUpTokens(b *testing.B) {
	apiserver := kubetest.StartAPIServer(b)
	kube := apiserver.Client
	header, _, _ := strings.Cut(benchToken(b, kube), ".") // the cluster's alg and key id
	floods := []struct {
		name  string
		hosts int
		token func(call string) string
	}{
		{"one-host-not-jwts", 1, func(call string) string { return "made-up-" + call }},
		{"32-hosts-not-jwts", 32, func(call string) string { return "made-up-" + call }},
		{"32-hosts-unsigned-service-account-tokens", 32, func(call string) string {
			claims := fmt.Sprintf(`{"iss":%q,"sub":"system:serviceaccount:team-b:mallory-%s"}`, kubetest.ServiceAccountIssuer, call)
			return header + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".bm90LXNpZ25lZA"
		}},
	}
	for _, f := range floods {
		b.Run(f.name, func(b *testing.B) {
			srv := benchServer(b, func(c *grpcserver.Config) { c.Kubeconfig = apiserver.WriteKubeconfig(b) })
			var answered atomic.Int64
			flood(b, srv, hosts(f.hosts), func(ctx context.Context, conn *grpc.ClientConn, call string) {
				if _, err := jobplanev1.NewExecutorServiceClient(conn).GetJob(bearerCtx(ctx, f.token(call)), &jobplanev1.GetJobRequest{}); status.Code(err) == codes.Unauthenticated {
					answered.Add(1)
				}
			})
			time.Sleep(12 * time.Second) // the flood's reviews past the budget's burst, its hosts suspects
			client := jobplanev1.NewExecutorServiceClient(srv.Conn)
			req := &jobplanev1.GetJobRequest{Namespace: "team-a", Name: "nightly"}
			latencies := make([]time.Duration, 0, b.N)
			flooded, since := answered.Load(), time.Now()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				token := newToken(b, kube)
				b.StartTimer()
				start := time.Now()
				if _, err := client.GetJob(bearer(token), req); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.StopTimer()
			reportLatencies(b, latencies, time.Millisecond, "ms")
			b.ReportMetric(float64(answered.Load()-flooded)/time.Since(since).Seconds(), "flood-refusals/s")
		})
	}
}

// benchToken is the token of a ServiceAccount that may get Jobs in team-a,
// a namespace it creates.
func benchToken(b testing.TB, kube kubernetes.Interface) string {
	b.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "alice"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team-a", Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return newToken(b, kube)
}

// newToken is a new token of benchToken's ServiceAccount.
func newToken(b testing.TB, kube kubernetes.Interface) string {
	b.Helper()
	tr, err := kube.CoreV1().ServiceAccounts("team-a").CreateToken(context.Background(), "alice", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return tr.Status.Token
}
