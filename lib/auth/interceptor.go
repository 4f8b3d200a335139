package auth

import (
	"context"
	"log/slog"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/apierr"
)

// Interceptor authenticates every call and authorizes it by its rule.
type Interceptor struct {
	authn *Authenticator
	authz Authorizer
	rules map[string]Rule
	// recheck is how often a stream that acts on a resource (WatchJobs) is
	// authenticated and authorized again while it sends: a revoked caller's
	// stream ends within it, as a cached answer would.
	recheck time.Duration
	// openPure lets calls without credentials through to the RPCs that
	// need authentication only, as the anonymous identity.
	openPure bool
	log      *slog.Logger
}

// NewInterceptor returns the interceptor of rules (Rules in production).
func NewInterceptor(cfg Config, authn *Authenticator, authz Authorizer, rules map[string]Rule, log *slog.Logger) *Interceptor {
	return &Interceptor{authn: authn, authz: authz, rules: rules, openPure: cfg.AllowUnauthenticatedPureRPCs, log: log,
		recheck: max(cfg.AuthzCacheTTL, cfg.TokenCacheTTL, time.Second)}
}

// Unary authenticates and authorizes a unary call before its handler runs.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		rule, ctx, err := i.authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if err := i.authorize(ctx, info.FullMethod, rule, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream authenticates a streaming call before its handler runs and
// authorizes each message it receives, since the request is known only
// then (WatchJobs' namespace is in its one request message). A stream that
// acts on a resource is checked again as it sends, at most every recheck:
// a watch does not outlive its caller's permission (nor token) by more.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		rule, ctx, err := i.authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &authorizedStream{ServerStream: ss, ctx: ctx, i: i, method: info.FullMethod, rule: rule})
	}
}

type authorizedStream struct {
	grpc.ServerStream
	ctx    context.Context
	i      *Interceptor
	method string
	rule   Rule

	// The last request authorized, and when: handlers receive and send
	// from one goroutine, as gRPC requires.
	req     any
	checked time.Time
}

func (s *authorizedStream) Context() context.Context { return s.ctx }

func (s *authorizedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.i.authorize(s.ctx, s.method, s.rule, m); err != nil {
		return err
	}
	s.req, s.checked = m, time.Now()
	return nil
}

func (s *authorizedStream) SendMsg(m any) error {
	if s.req != nil && !s.rule.AuthenticationOnly() && time.Since(s.checked) >= s.i.recheck {
		if _, err := s.i.authn.Authenticate(s.ServerStream.Context()); err != nil {
			return err
		}
		if err := s.i.authorize(s.ctx, s.method, s.rule, s.req); err != nil {
			return err
		}
		s.checked = time.Now()
	}
	return s.ServerStream.SendMsg(m)
}

// authenticate finds the method's rule and the caller, and returns ctx
// carrying the caller's identity.
func (i *Interceptor) authenticate(ctx context.Context, method string) (Rule, context.Context, error) {
	rule, ok := i.rules[method]
	if !ok {
		// Registration checks the table; a method it does not know is a
		// bug, refused rather than let through.
		i.log.Error("no authorization rule for the method; refusing the call", "method", method)
		return Rule{}, ctx, apierr.New(codes.PermissionDenied, "NO_RULE", map[string]string{"method": method},
			"no authorization rule for %s", method)
	}
	id, err := i.identify(ctx, rule)
	if err != nil {
		return rule, ctx, err
	}
	logging.AddFields(ctx, logging.Fields{"grpc.user", id.User})
	return rule, NewContext(ctx, id), nil
}

// Identify is who calls method, as the interceptor will establish it, for
// what must know the caller before the request is read (admission);
// TokenReviews are cached, so the interceptor's own is no second review.
func (i *Interceptor) Identify(ctx context.Context, method string) (*Identity, error) {
	rule, ok := i.rules[method]
	if !ok {
		return nil, apierr.New(codes.PermissionDenied, "NO_RULE", map[string]string{"method": method}, "no authorization rule for %s", method)
	}
	return i.identify(ctx, rule)
}

func (i *Interceptor) identify(ctx context.Context, rule Rule) (*Identity, error) {
	// Admission identified the caller already (only the server's own code
	// puts an identity on a call's context).
	if id, ok := FromContext(ctx); ok {
		return id, nil
	}
	if i.openPure && rule.AuthenticationOnly() && !HasCredentials(ctx) {
		return Anonymous(), nil
	}
	return i.authn.Authenticate(ctx)
}

// authorize asks the authorizer for every permission req needs.
func (i *Interceptor) authorize(ctx context.Context, method string, rule Rule, req any) error {
	if rule.AuthenticationOnly() {
		return nil
	}
	id, _ := FromContext(ctx)
	attrs, ok := rule.Attributes(req)
	if !ok {
		i.log.Error("request of an unexpected type; refusing the call", "method", method)
		return apierr.New(codes.PermissionDenied, "NO_RULE", map[string]string{"method": method},
			"no authorization rule for %s with this request", method)
	}
	for _, a := range attrs {
		d, err := i.authz.Authorize(ctx, id, a)
		switch status.Code(err) {
		case codes.Canceled, codes.DeadlineExceeded, codes.ResourceExhausted:
			return err // the call ended, or its review had no turn (budgetStatus)
		}
		if err != nil {
			i.log.Warn("SubjectAccessReview failed", "method", method, "user", id.User, "err", err)
			return apierr.New(codes.Unavailable, "AUTHORIZATION_UNAVAILABLE", nil,
				"the call could not be authorized: the Kubernetes API did not answer the SubjectAccessReview")
		}
		if !d.Allowed {
			return apierr.New(codes.PermissionDenied, "FORBIDDEN", map[string]string{
				"user": id.User, "verb": a.Verb, "group": a.Group, "resource": a.Resource,
				"subresource": a.Subresource, "namespace": a.Namespace, "name": a.Name,
			}, "%s", deniedMessage(id.User, a, d))
		}
	}
	return nil
}
