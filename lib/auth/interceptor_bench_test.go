package auth_test

import (
	"context"
	"log/slog"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
)

// The unary interceptor alone, no network: what authentication and
// authorization add to a call. The API server is a fake clientset that
// answers at once, so the uncached path counts jobplane's work (building,
// sending through client-go, caching) and not the API server's round trip.
func BenchmarkUnaryInterceptor(b *testing.B) {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
			Username: "system:serviceaccount:team-a:alice", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"},
		}}
		return true, r, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		r.Status.Allowed = true
		return true, r, nil
	})
	log := slog.New(slog.DiscardHandler)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"))
	req := &jobplanev1.GetJobRequest{Namespace: "team-a", Name: "nightly"}
	info := &grpc.UnaryServerInfo{FullMethod: jobplanev1.ExecutorService_GetJob_FullMethodName}
	handler := func(context.Context, any) (any, error) { return nil, nil }

	for _, tc := range []struct {
		name   string
		cached bool // else the TTLs are 0: the API server is asked on every call
	}{{"cached", true}, {"uncached", false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := auth.Defaults()
			if !tc.cached {
				cfg.TokenCacheTTL, cfg.AuthzCacheTTL = 0, 0
			}
			unary := auth.NewInterceptor(cfg, auth.NewAuthenticator(cfg, client, nil, log), auth.NewSubjectAccessReviewer(cfg, client, nil, log), auth.Rules, log).Unary()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := unary(ctx, req, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
