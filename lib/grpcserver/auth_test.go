package grpcserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// fakeCluster answers TokenReviews from tokens and SubjectAccessReviews
// from grants, as an API server with RBAC would, and counts them.
type fakeCluster struct {
	*fake.Clientset
	mu     sync.Mutex
	tokens map[string]authenticationv1.UserInfo
	grants map[string]bool // "user verb group/resource namespace", or "user verb path" for a non-resource URL
	down   bool            // every review fails
	// tokenReviewDelay is how long a TokenReview takes.
	tokenReviewDelay time.Duration
	reviews          map[string]int // "tokenreviews", "subjectaccessreviews"
	// reviewed are the reviews' questions in the order they came: the
	// token, or "user verb group/resource namespace".
	reviewed []string
}

func newFakeCluster() *fakeCluster {
	c := &fakeCluster{Clientset: fake.NewClientset(), tokens: map[string]authenticationv1.UserInfo{}, grants: map[string]bool{}, reviews: map[string]int{}}
	c.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		delay := c.tokenReviewDelay
		c.mu.Unlock()
		time.Sleep(delay)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.reviews["tokenreviews"]++
		if c.down {
			return true, nil, errors.New("connection refused")
		}
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		c.reviewed = append(c.reviewed, review.Spec.Token)
		if u, ok := c.tokens[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, review, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.reviews["subjectaccessreviews"]++
		if c.down {
			return true, nil, errors.New("connection refused")
		}
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		if nr := review.Spec.NonResourceAttributes; nr != nil {
			review.Status.Allowed = c.grants[review.Spec.User+" "+nr.Verb+" "+nr.Path]
			return true, review, nil
		}
		a := review.Spec.ResourceAttributes
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		question := review.Spec.User + " " + a.Verb + " " + a.Group + "/" + resource + " " + a.Namespace
		c.reviewed = append(c.reviewed, question)
		review.Status.Allowed = c.grants[question]
		return true, review, nil
	})
	return c
}

func (c *fakeCluster) grant(user, verb, groupResource, namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants[user+" "+verb+" "+groupResource+" "+namespace] = true
}

// grantPath lets user verb the non-resource URL path.
func (c *fakeCluster) grantPath(user, verb, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants[user+" "+verb+" "+path] = true
}

func (c *fakeCluster) revoke(user, verb, groupResource, namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.grants, user+" "+verb+" "+groupResource+" "+namespace)
}

func (c *fakeCluster) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func (c *fakeCluster) count(resource string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviews[resource]
}

// reviewsOf is how many reviews asked question.
func (c *fakeCluster) reviewsOf(question string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, q := range c.reviewed {
		if q == question {
			n++
		}
	}
	return n
}

// reviewsBefore is how many reviews came before the first whose question
// is question (all of them when none was).
func (c *fakeCluster) reviewsBefore(question string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.reviewed {
		if q == question {
			return i
		}
	}
	return len(c.reviewed)
}

// whoAmI answers ValidateJob with the caller's identity in the Job's name
// and groups in its labels, so a test sees what the handler saw.
type whoAmI struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

func (whoAmI) ValidateJob(ctx context.Context, _ *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no identity in the context")
	}
	labels := map[string]string{"method": id.Method}
	for _, g := range id.Groups {
		labels[g] = "group"
	}
	return &jobplanev1.ValidateJobResponse{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: id.User, Labels: labels}}}, nil
}

// watchAll answers WatchJobs with its end, or with an event every 20 ms
// when the label selector is "forever".
type watchAll struct {
	jobplanev1.UnimplementedExecutorServiceServer
}

func (watchAll) WatchJobs(req *jobplanev1.WatchJobsRequest, stream grpc.ServerStreamingServer[jobplanev1.WatchJobsResponse]) error {
	for req.GetLabelSelector() == "forever" {
		if err := stream.Send(&jobplanev1.WatchJobsResponse{Type: "MODIFIED"}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// authServer serves the planner (whoAmI), the executor (Unimplemented but
// for WatchJobs: a call that passes auth answers Unimplemented) and cron
// with auth against cluster.
func authServer(t *testing.T, cluster *fakeCluster, edit func(*grpcserver.Config)) *grpctest.Server {
	t.Helper()
	cfg := grpcserver.Defaults("127.0.0.1:0", "")
	cfg.ShutdownDrain = 0
	if edit != nil {
		edit(&cfg)
	}
	return grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) {
			s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, whoAmI{})
			s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, watchAll{})
			s.RegisterService(&jobplanev1.CronService_ServiceDesc, emptyCron{})
		})
}

func bearer(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

func whoami(t *testing.T, conn *grpc.ClientConn, ctx context.Context) (*jobplanev1.ObjectMeta, error) {
	t.Helper()
	resp, err := jobplanev1.NewPlannerServiceClient(conn).ValidateJob(ctx, &jobplanev1.ValidateJobRequest{})
	return resp.GetJob().GetMetadata(), err
}

func wantCode(t *testing.T, err error, want codes.Code, msgContains ...string) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("got %v, want %v", err, want)
	}
	for _, m := range msgContains {
		if !strings.Contains(status.Convert(err).Message(), m) {
			t.Errorf("message %q does not say %q", status.Convert(err).Message(), m)
		}
	}
}

func TestCallsWithoutCredentialsAreUnauthenticated(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, nil)
	_, err := whoami(t, srv.Conn, context.Background())
	wantCode(t, err, codes.Unauthenticated, "authorization: Bearer")
	_, err = jobplanev1.NewExecutorServiceClient(srv.Conn).SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{})
	wantCode(t, err, codes.Unauthenticated)

	// Health and reflection are for anyone: kubelet probes have no token.
	if _, err := healthpb.NewHealthClient(srv.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health check without credentials: %v", err)
	}
	stream, err := reflectionv1.NewServerReflectionClient(srv.Conn).ServerReflectionInfo(context.Background())
	if err == nil {
		err = stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}})
	}
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		t.Errorf("reflection without credentials: %v", err)
	}
	if n := cluster.count("tokenreviews") + cluster.count("subjectaccessreviews"); n != 0 {
		t.Errorf("%d reviews for calls without credentials", n)
	}
}

func TestBearerTokensAreReviewedByTheAPIServer(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a", "system:authenticated"}}
	srv := authServer(t, cluster, nil)

	meta, err := whoami(t, srv.Conn, bearer("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	if meta.GetName() != "alice" || meta.GetLabels()["team-a"] != "group" || meta.GetLabels()["method"] != auth.MethodToken {
		t.Errorf("the handler saw %v", meta)
	}

	for name, header := range map[string]string{
		"a forged token":     "Bearer forged",
		"another scheme":     "Basic YWxpY2U6cGFzc3dvcmQ=",
		"no token":           "Bearer ",
		"the token but bare": "alice-token",
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", header)
		_, err := whoami(t, srv.Conn, ctx)
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, err)
		}
	}
}

func TestTokenReviewsAreCachedForTheTTLAtMost(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.TokenCacheTTL = 300 * time.Millisecond })
	for range 5 {
		if _, err := whoami(t, srv.Conn, bearer("alice-token")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := whoami(t, srv.Conn, bearer("forged")); status.Code(err) != codes.Unauthenticated {
			t.Fatal(err)
		}
	}
	if n := cluster.count("tokenreviews"); n != 2 {
		t.Errorf("%d TokenReviews for two tokens used again and again, want 2", n)
	}
	// The token is revoked: within the TTL the cache still answers, after
	// it the API server does.
	delete(cluster.tokens, "alice-token")
	time.Sleep(350 * time.Millisecond)
	_, err := whoami(t, srv.Conn, bearer("alice-token"))
	wantCode(t, err, codes.Unauthenticated)
}

func TestAnAPIServerThatDoesNotAnswerIsUnavailableAndNotCached(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "list", "batch/jobs", "a")
	srv := authServer(t, cluster, nil)
	cluster.setDown(true)
	_, err := whoami(t, srv.Conn, bearer("alice-token"))
	wantCode(t, err, codes.Unavailable, "TokenReview")
	cluster.setDown(false)
	if _, err := whoami(t, srv.Conn, bearer("alice-token")); err != nil {
		t.Fatalf("after the API server is back: %v", err)
	}
	cluster.setDown(true)
	_, err = jobplanev1.NewExecutorServiceClient(srv.Conn).ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{Namespace: "a"})
	wantCode(t, err, codes.Unavailable, "SubjectAccessReview")
	cluster.setDown(false)
	_, err = jobplanev1.NewExecutorServiceClient(srv.Conn).ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{Namespace: "a"})
	wantCode(t, err, codes.Unimplemented)
}

func TestEveryRPCIsAuthorizedByItsRule(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	srv := authServer(t, cluster, nil)
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	cron := jobplanev1.NewCronServiceClient(srv.Conn)
	ctx := bearer("alice-token")
	job := func(ns string) *jobplanev1.Job {
		return &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Namespace: ns, Name: "j"}}
	}

	for _, tc := range []struct {
		rpc   string
		call  func(ns string) error
		grant string // verb group/resource
	}{
		{"SubmitJob", func(ns string) error {
			_, err := executor.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: job(ns)})
			return err
		}, "create batch/jobs"},
		{"GetJob", func(ns string) error {
			_, err := executor.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: ns, Name: "j"})
			return err
		}, "get batch/jobs"},
		{"ListJobs", func(ns string) error {
			_, err := executor.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: ns})
			return err
		}, "list batch/jobs"},
		{"DeleteJob", func(ns string) error {
			_, err := executor.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: ns, Name: "j"})
			return err
		}, "delete batch/jobs"},
		{"SyncJob", func(ns string) error {
			_, err := executor.SyncJob(ctx, &jobplanev1.SyncJobRequest{Namespace: ns, Name: "j"})
			return err
		}, "update batch/jobs/status"},
		{"Execute", func(ns string) error {
			_, err := executor.Execute(ctx, &jobplanev1.ExecuteRequest{Namespace: ns, Name: "j"})
			return err
		}, "update batch/jobs/status"},
		{"CreateCronJob", func(ns string) error {
			_, err := cron.CreateCronJob(ctx, &jobplanev1.CreateCronJobRequest{CronJob: &jobplanev1.CronJob{Metadata: &jobplanev1.ObjectMeta{Namespace: ns}}})
			return err
		}, "create jobplane.dev/cronjobs"},
		{"TriggerCronJob", func(ns string) error {
			_, err := cron.TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: ns, Name: "c"})
			return err
		}, "create jobplane.dev/cronjobs/trigger"},
	} {
		t.Run(tc.rpc, func(t *testing.T) {
			verb, groupResource, _ := strings.Cut(tc.grant, " ")
			cluster.grant("alice", verb, groupResource, "a")
			if err := tc.call("a"); status.Code(err) != codes.Unimplemented {
				t.Errorf("in namespace a, where alice may: %v, want the handler's Unimplemented", err)
			}
			err := tc.call("b")
			group, resource, _ := strings.Cut(groupResource, "/")
			wantCode(t, err, codes.PermissionDenied,
				`User "alice" cannot `+verb+` resource "`+resource+`" in API group "`+group+`" in the namespace "b"`)
			info := errorInfo(err)
			if info.GetReason() != "FORBIDDEN" || info.GetMetadata()["namespace"] != "b" || info.GetMetadata()["verb"] != verb {
				t.Errorf("ErrorInfo %v", info)
			}
		})
	}
}

func TestListingEveryNamespaceNeedsTheClusterScope(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "list", "batch/jobs", "a")
	srv := authServer(t, cluster, nil)
	_, err := jobplanev1.NewExecutorServiceClient(srv.Conn).ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{})
	wantCode(t, err, codes.PermissionDenied, `User "alice" cannot list resource "jobs" in API group "batch" at the cluster scope`)
}

func TestPodsOfGetJobAndTheWritesOfAPlanNeedTheirOwnPermissions(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "get", "batch/jobs", "a")
	cluster.grant("alice", "update", "batch/jobs/status", "a")
	// Uncached, so that a permission granted during the test counts at once.
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.AuthzCacheTTL = 0 })
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	ctx := bearer("alice-token")

	_, err := executor.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: "a", Name: "j", IncludePods: true})
	wantCode(t, err, codes.PermissionDenied, `cannot list resource "pods" in API group "" in the namespace "a"`)

	deletes := &jobplanev1.SyncPlan{Actions: []*jobplanev1.Action{{Kind: &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{}}}}}
	_, err = executor.Execute(ctx, &jobplanev1.ExecuteRequest{Namespace: "a", Name: "j", Plan: deletes})
	wantCode(t, err, codes.PermissionDenied, `cannot delete resource "pods"`)
	cluster.grant("alice", "delete", "/pods", "a")
	_, err = executor.Execute(ctx, &jobplanev1.ExecuteRequest{Namespace: "a", Name: "j", Plan: deletes})
	wantCode(t, err, codes.Unimplemented)
}

func TestStreamsAreAuthorizedOnTheirRequest(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "watch", "batch/jobs", "a")
	srv := authServer(t, cluster, nil)
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	for ns, want := range map[string]codes.Code{"a": codes.OK, "b": codes.PermissionDenied} {
		stream, err := executor.WatchJobs(bearer("alice-token"), &jobplanev1.WatchJobsRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if _, err = stream.Recv(); err == nil || (want == codes.OK) != (err.Error() == "EOF") || (want != codes.OK && status.Code(err) != want) {
			t.Errorf("WatchJobs in %s: %v, want %v", ns, err, want)
		}
	}
}

func TestAWatchEndsWhenItsPermissionIsRevoked(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "watch", "batch/jobs", "a")
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.TokenCacheTTL, c.Auth.AuthzCacheTTL = time.Second, time.Second })
	stream, err := jobplanev1.NewExecutorServiceClient(srv.Conn).WatchJobs(bearer("alice-token"), &jobplanev1.WatchJobsRequest{Namespace: "a", LabelSelector: "forever"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cluster.revoke("alice", "watch", "batch/jobs", "a")
	revoked := time.Now()
	for {
		_, err := stream.Recv()
		if err == nil {
			if time.Since(revoked) > 3*time.Second {
				t.Fatal("the watch still sends 3s after its permission was revoked (TTL 1s)")
			}
			continue
		}
		wantCode(t, err, codes.PermissionDenied, `User "alice" cannot watch resource "jobs"`)
		t.Logf("ended %s after the revocation", time.Since(revoked).Round(time.Millisecond))
		return
	}
}

func TestAuthorizationsAreCachedForTheTTLAtMost(t *testing.T) {
	cluster := newFakeCluster()
	cluster.tokens["alice-token"] = authenticationv1.UserInfo{Username: "alice"}
	cluster.grant("alice", "list", "batch/jobs", "a")
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.AuthzCacheTTL = 300 * time.Millisecond })
	executor := jobplanev1.NewExecutorServiceClient(srv.Conn)
	list := func() error {
		_, err := executor.ListJobs(bearer("alice-token"), &jobplanev1.ListJobsRequest{Namespace: "a"})
		return err
	}
	for range 5 {
		wantCode(t, list(), codes.Unimplemented)
	}
	if n := cluster.count("subjectaccessreviews"); n != 1 {
		t.Errorf("%d SubjectAccessReviews for one question asked 5 times, want 1", n)
	}
	cluster.revoke("alice", "list", "batch/jobs", "a")
	deadline := time.Now().Add(300*time.Millisecond + 200*time.Millisecond)
	for status.Code(list()) != codes.PermissionDenied {
		if time.Now().After(deadline) {
			t.Fatal("the revoked permission still allowed calls past the TTL")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAnonymousIsAnIdentityLikeAnyOther(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.Anonymous = true })
	meta, err := whoami(t, srv.Conn, context.Background())
	if err != nil || meta.GetName() != auth.AnonymousUser || meta.GetLabels()[auth.UnauthenticatedGroup] != "group" {
		t.Fatalf("anonymous: %v %v", meta, err)
	}
	_, err = jobplanev1.NewExecutorServiceClient(srv.Conn).ListJobs(context.Background(), &jobplanev1.ListJobsRequest{Namespace: "a"})
	wantCode(t, err, codes.PermissionDenied, `User "system:anonymous" cannot list`)
	// A refused token is refused, not taken for no token.
	_, err = whoami(t, srv.Conn, bearer("forged"))
	wantCode(t, err, codes.Unauthenticated)
}

func TestAnonymousIsRefusedOnAnAddressOtherThanLoopback(t *testing.T) {
	cfg := grpcserver.Defaults("0.0.0.0:50051", "")
	cfg.AllowInsecureNonLoopback = true
	cfg.Auth.Anonymous = true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "authn-anonymous is for development on loopback only") {
		t.Errorf("anonymous on 0.0.0.0: %v", err)
	}
}

func TestPureRPCsCanBeOpenedToCallersWithoutCredentials(t *testing.T) {
	cluster := newFakeCluster()
	srv := authServer(t, cluster, func(c *grpcserver.Config) { c.Auth.AllowUnauthenticatedPureRPCs = true })
	if meta, err := whoami(t, srv.Conn, context.Background()); err != nil || meta.GetName() != auth.AnonymousUser {
		t.Errorf("a pure RPC without credentials: %v %v", meta, err)
	}
	_, err := jobplanev1.NewCronServiceClient(srv.Conn).PreviewSchedule(context.Background(), &jobplanev1.PreviewScheduleRequest{})
	wantCode(t, err, codes.Unimplemented)
	_, err = jobplanev1.NewCronServiceClient(srv.Conn).GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{Namespace: "a", Name: "c"})
	wantCode(t, err, codes.Unauthenticated)
	_, err = whoami(t, srv.Conn, bearer("forged"))
	wantCode(t, err, codes.Unauthenticated)
}

func TestClientCertificatesNameTheUserAndGroups(t *testing.T) {
	ca := grpctest.NewCA(t, "jobplane-clients")
	server := ca.ServerCert(t, "server")
	cluster := newFakeCluster()
	srv := authServer(t, cluster, func(c *grpcserver.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.ClientCAFile = server.CertFile, server.KeyFile, ca.CertFile
	})
	client := ca.ClientCert(t, "bob", "team-b", "system:authenticated")
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool, Certificates: []tls.Certificate{client.Certificate},
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	meta, err := whoami(t, conn, context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if meta.GetName() != "bob" || meta.GetLabels()["team-b"] != "group" || meta.GetLabels()["method"] != auth.MethodCertificate {
		t.Errorf("the handler saw %v", meta)
	}
}

func TestAServiceWithAnRPCMissingFromTheTableCannotBeRegistered(t *testing.T) {
	srv, err := grpcserver.New(fastShutdown(), nil)
	if err != nil {
		t.Fatal(err)
	}
	desc := jobplanev1.PlannerService_ServiceDesc
	desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: "PlanEverything"})
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "/jobplane.v1.PlannerService/PlanEverything") {
			t.Errorf("registered, or panicked with %v", p)
		}
	}()
	srv.RegisterService(&desc, whoAmI{})
}

func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
