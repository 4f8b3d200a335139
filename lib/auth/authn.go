package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	"github.com/jobplane/jobplane/lib/apierr"
)

// Authenticator establishes who calls, as the API server's own
// authenticators do, in their order: a client certificate verified against
// the client CA first, then a bearer token reviewed by the API server; then,
// only when configured, the anonymous identity. Credentials that do not
// authenticate are refused, never treated as none.
type Authenticator struct {
	client    kubernetes.Interface // nil: bearer tokens cannot be checked
	audiences []string
	anonymous bool
	ttl       time.Duration
	budget    *ReviewBudget // nil: reviews are not paced here
	keys      *serviceAccountKeys
	// accepted and refused keep the answers by the sha256 of their token,
	// apart, so that made-up tokens never push a caller's out.
	accepted *cache.LRUExpireCache
	refused  *cache.LRUExpireCache
	inflight singleflight.Group
	log      *slog.Logger
	now      func() time.Time
}

// tokenReview is the API server's answer about one token.
type tokenReview struct {
	id *Identity // nil: not authenticated
	// refusal is why, when not the TokenReview's generic one.
	refusal string
}

// NewAuthenticator returns an authenticator that reviews tokens with
// client (nil: tokens are answered UNAVAILABLE), each review within budget
// (nil: unpaced), service account tokens checked first against the keys
// client's discovery serves.
func NewAuthenticator(cfg Config, client kubernetes.Interface, budget *ReviewBudget, log *slog.Logger) *Authenticator {
	keys := &serviceAccountKeys{log: log, now: time.Now}
	if client != nil {
		keys.client = client.Discovery().RESTClient()
	}
	return &Authenticator{
		keys:      keys,
		client:    client,
		audiences: cfg.audiences(),
		anonymous: cfg.Anonymous,
		ttl:       cfg.TokenCacheTTL,
		budget:    budget,
		accepted:  cache.NewLRUExpireCache(cfg.TokenCacheSize),
		refused:   cache.NewLRUExpireCache(cfg.TokenCacheSize),
		log:       log,
		now:       time.Now,
	}
}

// Authenticate returns the identity of the caller of the gRPC call ctx
// belongs to, or UNAUTHENTICATED (no credentials or refused ones) or
// UNAVAILABLE (the API server could not answer).
func (a *Authenticator) Authenticate(ctx context.Context) (*Identity, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return a.authenticate(ctx, peerCertificate(ctx), md.Get("authorization"), "metadata", hostOfCall(ctx))
}

// AuthenticateRequest is Authenticate for an HTTP request: its verified
// client certificate, else its Authorization header.
func (a *Authenticator) AuthenticateRequest(r *http.Request) (*Identity, error) {
	var cert *Identity
	if r.TLS != nil {
		cert = certificateIdentity(r.TLS)
	}
	return a.authenticate(r.Context(), cert, r.Header.Values("Authorization"), "header", HostOfRequest(r))
}

// authenticate establishes who presents cert (nil: none) and the values of
// the authorization metadata or header (named by carrier, for the errors),
// from host.
func (a *Authenticator) authenticate(ctx context.Context, cert *Identity, authorization []string, carrier, host string) (*Identity, error) {
	if cert != nil {
		return cert, nil
	}
	token, present, err := bearerToken(authorization, carrier)
	if err != nil {
		return nil, err
	}
	if present {
		return a.reviewToken(ctx, token, host)
	}
	if a.anonymous {
		return Anonymous(), nil
	}
	return nil, unauthenticated(fmt.Sprintf("no credentials: send the %s \"authorization: Bearer <token>\" or a client certificate", carrier))
}

// HasCredentials says whether the call carries a verified client
// certificate or an authorization header.
func HasCredentials(ctx context.Context) bool {
	if peerCertificate(ctx) != nil {
		return true
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get("authorization")) > 0
}

func unauthenticated(msg string) error {
	return apierr.New(codes.Unauthenticated, "UNAUTHENTICATED", nil, "%s", msg)
}

// peerCertificate is the identity of the client certificate of the gRPC
// call ctx belongs to, or nil.
func peerCertificate(ctx context.Context) *Identity {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return certificateIdentity(&tlsInfo.State)
}

// certificateIdentity is the subject of a client certificate the TLS
// handshake verified against the client CA: CN the user, O the groups.
func certificateIdentity(state *tls.ConnectionState) *Identity {
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return nil
	}
	subject := state.PeerCertificates[0].Subject
	if subject.CommonName == "" {
		return nil
	}
	return &Identity{User: subject.CommonName, Groups: slices.Clone(subject.Organization), Method: MethodCertificate}
}

// bearerToken reads the values of the authorization metadata or header:
// absent, or exactly one "Bearer <token>".
func bearerToken(values []string, carrier string) (token string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, unauthenticated(fmt.Sprintf("more than one authorization %s value", carrier))
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", true, unauthenticated(fmt.Sprintf("the authorization %s must be \"Bearer <token>\"", carrier))
	}
	return token, true, nil
}

// reviewToken asks the API server who token is, or reuses its answer. The
// caches are keyed by the token's hash, never the token; concurrent calls
// with the same token share one review, which waits for a turn of the
// budget: in its tenant's lane for a service account token the cluster
// signed that has not expired, else in host's lane (laneOf). A token
// claiming the cluster's issuer that the cluster did not sign is refused
// without a review.
func (a *Authenticator) reviewToken(ctx context.Context, token, host string) (*Identity, error) {
	if a.client == nil {
		return nil, apierr.New(codes.Unavailable, "NO_KUBERNETES_API", nil,
			"bearer tokens cannot be checked: this server has no Kubernetes API configured (-kubeconfig)")
	}
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if v, ok := a.accepted.Get(key); ok {
		return v.(*tokenReview).result()
	}
	if v, ok := a.refused.Get(key); ok {
		return v.(*tokenReview).result()
	}
	expiry, expires := tokenExpiry(token)
	lane, inHostLane, forged := a.laneOf(ctx, token, host, expiry, expires)
	if forged {
		// Cached as a review's refusal is, so that a replay checks no
		// signature again.
		r := &tokenReview{refusal: "the bearer token was refused: it claims to be the cluster's service account token, and none of the cluster's keys signed it"}
		if ttl := a.cacheTTL(expiry, expires); ttl > 0 {
			a.refused.Add(key, r, ttl)
		}
		return r.result()
	}
	wait := func(ctx context.Context) error { return a.budget.wait(ctx, lane) }
	v, err := shareReview(ctx, &a.inflight, key, wait, func(reviewCtx context.Context) (any, error) {
		review, err := a.client.AuthenticationV1().TokenReviews().Create(reviewCtx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		r := &tokenReview{}
		if review.Status.Authenticated && a.audienceMatches(review.Status.Audiences) {
			u := review.Status.User
			r.id = &Identity{User: u.Username, UID: u.UID, Groups: u.Groups, Method: MethodToken}
			if len(u.Extra) > 0 {
				r.id.Extra = make(map[string][]string, len(u.Extra))
				for k, v := range u.Extra {
					r.id.Extra[k] = v
				}
			}
		} else {
			a.log.Debug("bearer token refused by the TokenReview API", "error", review.Status.Error)
			if inHostLane && !review.Status.Authenticated {
				a.budget.refusedFrom(host)
			}
		}
		if ttl := a.cacheTTL(expiry, expires); ttl > 0 {
			if r.id != nil {
				a.accepted.Add(key, r, ttl)
			} else {
				a.refused.Add(key, r, ttl)
			}
		}
		return r, nil
	})
	if err != nil {
		if st := budgetStatus(ctx, err, "TokenReview"); st != nil {
			return nil, st
		}
		a.log.Warn("TokenReview failed", "err", err)
		return nil, apierr.New(codes.Unavailable, "TOKEN_REVIEW_FAILED", nil,
			"the bearer token could not be checked: the Kubernetes API did not answer the TokenReview")
	}
	return v.(*tokenReview).result()
}

func (r *tokenReview) result() (*Identity, error) {
	if r.id == nil {
		return nil, unauthenticated(cmp.Or(r.refusal, "the bearer token was refused: invalid, expired or issued for another audience"))
	}
	return r.id, nil
}

// audienceMatches: when audiences are required, the API server must have
// found the token valid for one of them.
func (a *Authenticator) audienceMatches(got []string) bool {
	if len(a.audiences) == 0 {
		return true
	}
	for _, want := range a.audiences {
		if slices.Contains(got, want) {
			return true
		}
	}
	return false
}

// laneOf is the budget's lane token's review waits in, and whether it is
// host's: its tenant's for a service account token the cluster signed that
// has not expired (expiry, from tokenExpiry), else host's. An expired token, which anyone holding it
// may replay and whose refusal is not cached, never waits ahead of its
// tenant's own reviews. A token claiming the cluster's issuer that none of
// its keys signed is forged: it gets no lane, and no review.
func (a *Authenticator) laneOf(ctx context.Context, token, host string, expiry time.Time, expires bool) (lane string, byHost, isForged bool) {
	switch check, tenant := a.keys.check(ctx, token); check {
	case forged:
		return "", false, true
	case signed:
		if !expires || a.now().Before(expiry) {
			return tenantLane(tenant), false, false
		}
	}
	return a.budget.hostLane(host), true, false
}

// cacheTTL is the configured TTL, shortened to the token's expiry when it
// carries one (tokenExpiry), from now: an expired token is never accepted
// from the cache.
func (a *Authenticator) cacheTTL(expiry time.Time, expires bool) time.Duration {
	if expires {
		return min(a.ttl, expiry.Sub(a.now()))
	}
	return a.ttl
}

// tokenExpiry is a JWT's exp claim, read unverified (to shorten the
// cache's reuse, and to tell an expired token); false when token names
// none (or is no JWT).
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	return time.Unix(*claims.Exp, 0), true
}
