package auth

import (
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/retryinfo"
)

// NonResourceHandler serves next only to callers the cluster allows, as
// kube-controller-manager serves its /metrics: a request is authenticated as
// a gRPC call is (a verified client certificate, else a bearer token
// reviewed by the API server, else, when configured, the anonymous
// identity) and authorized on its non-resource URL, the verb being the
// lower-cased HTTP method as the API server has it (get /metrics). It
// answers 401 without credentials or with refused ones, 403 when the caller
// may not, 429 with Retry-After when its review had no turn of the review
// budget, and 503 when the API server does not answer or there is none to
// ask (authz nil).
func NonResourceHandler(authn *Authenticator, authz Authorizer, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := authn.AuthenticateRequest(r)
		if err != nil {
			switch status.Code(err) {
			case codes.Unauthenticated:
				w.Header().Set("WWW-Authenticate", `Bearer realm="jobplane"`)
				http.Error(w, status.Convert(err).Message(), http.StatusUnauthorized)
			case codes.ResourceExhausted:
				tooManyRequests(w, err)
			default:
				http.Error(w, status.Convert(err).Message(), http.StatusServiceUnavailable)
			}
			return
		}
		if authz == nil {
			http.Error(w, "the request cannot be authorized: this server has no Kubernetes API configured (-kubeconfig)", http.StatusServiceUnavailable)
			return
		}
		a := Attributes{Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		d, err := authz.Authorize(r.Context(), id, a)
		if status.Code(err) == codes.ResourceExhausted {
			tooManyRequests(w, err)
			return
		}
		if err != nil {
			log.Warn("SubjectAccessReview failed", "path", a.Path, "user", id.User, "err", err)
			http.Error(w, "the request could not be authorized: the Kubernetes API did not answer the SubjectAccessReview", http.StatusServiceUnavailable)
			return
		}
		if !d.Allowed {
			http.Error(w, deniedMessage(id.User, a, d), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tooManyRequests answers 429 with the Retry-After of err's RetryInfo.
func tooManyRequests(w http.ResponseWriter, err error) {
	if delay, ok := retryinfo.Delay(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(delay.Seconds()))))
	}
	http.Error(w, status.Convert(err).Message(), http.StatusTooManyRequests)
}
